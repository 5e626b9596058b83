package coord

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Member is one live member of a service, as stored (JSON) under
// MemberKey(service, id).
type Member struct {
	// ID is the member's id, unique within the service (a pod name).
	ID string `json:"id"`
	// Address is what the member advertises (WithAddress); may be empty.
	Address string `json:"address,omitempty"`
	// JoinedAt is when the member (last) joined: when its key was written
	// under its current lease.
	JoinedAt time.Time `json:"joined_at"`
}

// EncodeMember returns a member's value: JSON with the fields id, address
// (omitted when empty) and joined_at (RFC 3339).
func EncodeMember(m Member) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode member %s: %w", m.ID, err)
	}
	return b, nil
}

// DecodeMember decodes the value stored under a member key of service. It
// fails with a KeyError when the key is not a member key of service, the
// value is not a member, or the value's id differs from the key's. Unknown
// fields are ignored.
func DecodeMember(service, key string, value []byte) (Member, error) {
	id, ok := strings.CutPrefix(key, MembersPrefix(service))
	if !ok {
		return Member{}, KeyError{Key: key, Err: fmt.Errorf("not a member key of service %s: %w", service, ErrInvalidName)}
	}
	if err := ValidateMemberID(id); err != nil {
		return Member{}, KeyError{Key: key, Err: err}
	}
	var m Member
	if err := json.Unmarshal(value, &m); err != nil {
		return Member{}, KeyError{Key: key, Err: fmt.Errorf("decode: %w", err)}
	}
	if m.ID != id {
		return Member{}, KeyError{Key: key, Err: fmt.Errorf("value names member %q", m.ID)}
	}
	return m, nil
}

// MemberIDs returns the ids of members, in their order.
func MemberIDs(members []Member) []string {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	return ids
}

// Membership keeps one member of a service joined: its key is bound to a
// lease that a goroutine owned by the Membership keeps alive, and written
// again under a new lease whenever the lease is lost (the mechanism of
// Registration). The methods are safe for concurrent use.
type Membership struct {
	k       *leasedKey
	service string

	mu     sync.Mutex
	member Member
}

// Join writes the member id of service under MemberKey(service, id), bound to
// a new lease of the given TTL (at least one second), and keeps it there
// until Close: when the lease is lost (revoked, or expired while etcd was
// unreachable for longer than the TTL) it joins again, with backoff, with
// JoinedAt set to then. WithAddress sets the address it advertises. ctx
// bounds the first join only: Join returns an error, and leaves nothing
// behind, if it fails. Two Joins with the same id overwrite each other; ids
// must be unique within the service.
func Join(ctx context.Context, cli *clientv3.Client, service, id string, ttl time.Duration, opts ...Option) (*Membership, error) {
	if cli == nil {
		return nil, errors.New("join: nil etcd client")
	}
	if err := errors.Join(ValidateServiceName(service), ValidateMemberID(id)); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	key := MemberKey(service, id)
	if ttl < time.Second {
		return nil, fmt.Errorf("join %s: ttl %s is shorter than 1s", key, ttl)
	}
	o := newOptions(opts)
	m := &Membership{service: service, member: Member{ID: id, Address: o.address, JoinedAt: time.Now().UTC()}}
	k, err := startLeasedKey(ctx, cli, key, "member", leaseSeconds(ttl), o,
		o.logger.With("service", service, "member", id), m.value)
	if err != nil {
		return nil, fmt.Errorf("join %s: %w", key, err)
	}
	m.k = k
	return m, nil
}

// value is the leasedKey's value func: the member, with JoinedAt set to now
// when written again under a new lease.
func (m *Membership) value(rewrite bool) ([]byte, func(), error) {
	m.mu.Lock()
	mem := m.member
	m.mu.Unlock()
	if rewrite {
		mem.JoinedAt = time.Now().UTC()
	}
	value, err := EncodeMember(mem)
	if err != nil {
		return nil, nil, err
	}
	return value, func() {
		m.mu.Lock()
		m.member = mem
		m.mu.Unlock()
	}, nil
}

// Key returns the member's etcd key.
func (m *Membership) Key() string { return m.k.key }

// Member returns the member as last written.
func (m *Membership) Member() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.member
}

// LeaseID returns the lease the key is written with. While the member joins
// again, it is the new lease from just before the key is written with it.
func (m *Membership) LeaseID() clientv3.LeaseID { return m.k.leaseID() }

// Close stops the keepalive goroutine, waits for it and revokes the lease
// (within the request timeout), so that the member leaves at once. If the
// revoke fails (etcd is unreachable, or the client was closed), the member
// leaves when the lease expires. Calls after the first return the first
// one's result.
func (m *Membership) Close(ctx context.Context) error {
	if err := m.k.close(ctx); err != nil {
		return fmt.Errorf("leave %s: %w", m.k.key, err)
	}
	return nil
}

// ListMembers returns a service's members sorted by id and the etcd revision
// they were read at. Malformed values are skipped and logged as warnings.
func ListMembers(ctx context.Context, cli *clientv3.Client, service string, opts ...Option) ([]Member, int64, error) {
	if cli == nil {
		return nil, 0, errors.New("list members: nil etcd client")
	}
	if err := ValidateServiceName(service); err != nil {
		return nil, 0, fmt.Errorf("list members: %w", err)
	}
	o := newOptions(opts)
	prefix := MembersPrefix(service)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list members %s: %w", prefix, err)
	}
	t := newMembersTarget(service, nil, o.logger.With("service", service))
	t.reset(resp)
	return t.sorted(), resp.Header.GetRevision(), nil
}

// MembersWatcher delivers a service's member list on every change. See
// WatchMembers.
type MembersWatcher struct {
	loop *watchLoop
}

// WatchMembers watches a service's members and calls fn with the members
// sorted by id: first once listed, then whenever the list changes (a member
// joins, leaves, or joins again). Changes that arrive while fn runs are
// coalesced into the next list; fn is never called twice in a row with the
// same list. Malformed values are skipped and logged. fn runs on the
// MembersWatcher's goroutine, one call at a time, owns the slice, and must
// not call Close.
//
// It lists and watches like WatchEndpoints: a list, then a watch from the
// revision after it, a new list when the watch is compacted or canceled,
// failures retried with backoff. While etcd cannot be reached fn is not
// called: the last list stays in force. The MembersWatcher stops when ctx
// ends, Close is called or the client is closed.
func WatchMembers(ctx context.Context, cli *clientv3.Client, service string, fn func([]Member), opts ...Option) (*MembersWatcher, error) {
	if err := checkWatch("watch members", cli, fn == nil, ValidateServiceName(service)); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	log := o.logger.With("service", service)
	target := newMembersTarget(service, fn, log)
	return &MembersWatcher{loop: startWatchLoop(ctx, cli, MembersPrefix(service), true, target, o, log)}, nil
}

// Close stops the MembersWatcher and waits for its goroutine (and so for a
// running fn) to return.
func (w *MembersWatcher) Close() { w.loop.close() }

// Done is closed when the MembersWatcher has stopped.
func (w *MembersWatcher) Done() <-chan struct{} { return w.loop.done }

// membersTarget is the MembersWatcher's watchTarget (and ListMembers' state).
type membersTarget struct {
	service   string
	fn        func([]Member)
	log       *slog.Logger
	members   map[string]Member // by key
	last      []Member
	delivered bool
}

func newMembersTarget(service string, fn func([]Member), log *slog.Logger) *membersTarget {
	return &membersTarget{service: service, fn: fn, log: log, members: map[string]Member{}}
}

func (t *membersTarget) reset(resp *clientv3.GetResponse) bool {
	clear(t.members)
	for _, kv := range resp.Kvs {
		t.put(string(kv.Key), kv.Value)
	}
	return t.pending()
}

func (t *membersTarget) apply(resp clientv3.WatchResponse) bool {
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		switch ev.Type {
		case mvccpb.PUT:
			t.put(key, ev.Kv.Value)
		case mvccpb.DELETE:
			delete(t.members, key)
		}
	}
	return t.pending()
}

func (t *membersTarget) put(key string, value []byte) {
	m, err := DecodeMember(t.service, key, value)
	if err != nil {
		t.log.Warn("skipping malformed member entry", "key", key, "error", err)
		delete(t.members, key)
		return
	}
	t.members[key] = m
}

// pending says whether the list differs from the last delivered.
func (t *membersTarget) pending() bool {
	return !t.delivered || !slices.EqualFunc(t.sorted(), t.last, func(a, b Member) bool {
		return a.ID == b.ID && a.Address == b.Address && a.JoinedAt.Equal(b.JoinedAt)
	})
}

func (t *membersTarget) sorted() []Member {
	return slices.SortedFunc(maps.Values(t.members), func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
}

func (t *membersTarget) deliver() {
	t.last, t.delivered = t.sorted(), true
	t.fn(slices.Clone(t.last))
}
