package coord

import "github.com/cespare/xxhash/v2"

// Owner assigns key to one of members by rendezvous (highest random weight)
// hashing: every member gets a pseudo-random weight for the key, derived
// from xxhash of the member and of the key, and the heaviest member owns
// it. Every caller with the same member set agrees on the owner, whatever
// the order of members. When a member joins, it takes about 1/N of the keys
// (N members after the join), each from whichever member owned it; when a
// member leaves, only its keys move, spread over the others. It returns ""
// when members is empty. Duplicates in members are harmless.
//
// Services use it to split work between replicas: a collector replica
// scrapes the endpoints it Owns among the members WatchMembers reports.
func Owner(members []string, key string) string {
	kh := xxhash.Sum64String(key)
	var owner string
	var best uint64
	for i, m := range members {
		w := weight(xxhash.Sum64String(m), kh)
		if i == 0 || w > best || (w == best && m < owner) {
			owner, best = m, w
		}
	}
	return owner
}

// Owns says whether self is the Owner of key among members.
func Owns(members []string, self, key string) bool {
	return self != "" && Owner(members, key) == self
}

// weight mixes a member's and a key's hashes into the member's weight for the
// key (the splitmix64 finalizer over their xor: a bijection, so distinct
// members never tie on one key unless their hashes collide).
func weight(member, key uint64) uint64 {
	x := member ^ key
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
