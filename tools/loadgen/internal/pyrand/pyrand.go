// Package pyrand is CPython's random module, bit for bit: the MT19937
// generator seeded as random.seed(int) seeds it, and the methods the
// reference workload generator calls (random, getrandbits, randint,
// shuffle, choice, choices, uniform). Workloads built with it match the
// Python generator's request for request.
package pyrand

import "math/bits"

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Rand is a Mersenne Twister in CPython's state. The zero value is not
// usable; use New.
type Rand struct {
	mt  [n]uint32
	mti int
}

// New returns a generator seeded as random.seed(seed).
func New(seed int64) *Rand {
	r := &Rand{}
	r.Seed(seed)
	return r
}

// Seed reseeds as random.seed(seed) does for an int: the absolute value,
// split into 32-bit words from the least significant, through
// init_by_array.
func (r *Rand) Seed(seed int64) {
	u := uint64(seed)
	if seed < 0 {
		u = uint64(-seed) // math.MinInt64 wraps to itself, which is its absolute value
	}
	key := []uint32{uint32(u)}
	if hi := uint32(u >> 32); hi != 0 {
		key = append(key, hi)
	}
	r.initByArray(key)
}

func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = n
}

func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(n, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 is genrand_uint32: the next tempered 32-bit output.
func (r *Rand) Uint32() uint32 {
	if r.mti >= n {
		r.twist()
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

func (r *Rand) twist() {
	mag := func(y uint32) uint32 { return (y & 1) * matrixA }
	var kk int
	for kk = 0; kk < n-m; kk++ {
		y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
		r.mt[kk] = r.mt[kk+m] ^ (y >> 1) ^ mag(y)
	}
	for ; kk < n-1; kk++ {
		y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
		r.mt[kk] = r.mt[kk+(m-n)] ^ (y >> 1) ^ mag(y)
	}
	y := (r.mt[n-1] & upperMask) | (r.mt[0] & lowerMask)
	r.mt[n-1] = r.mt[m-1] ^ (y >> 1) ^ mag(y)
	r.mti = 0
}

// Random is random.random(): 53 random bits as a float64 in [0, 1).
func (r *Rand) Random() float64 {
	a, b := r.Uint32()>>5, r.Uint32()>>6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// GetRandBits is random.getrandbits(k) for 0 <= k <= 32.
func (r *Rand) GetRandBits(k int) uint32 {
	if k <= 0 {
		return 0
	}
	if k > 32 {
		panic("pyrand: GetRandBits supports at most 32 bits")
	}
	return r.Uint32() >> (32 - k)
}

// Below is random._randbelow(n) for 0 < n < 2^32: rejection sampling over
// n.bit_length() bits.
func (r *Rand) Below(n int) int {
	if n <= 0 {
		panic("pyrand: Below needs n > 0")
	}
	k := bits.Len64(uint64(n))
	for {
		if v := int(r.GetRandBits(k)); v < n {
			return v
		}
	}
}

// RandInt is random.randint(a, b): an int in [a, b].
func (r *Rand) RandInt(a, b int) int { return a + r.Below(b-a+1) }

// Uniform is random.uniform(a, b).
func (r *Rand) Uniform(a, b float64) float64 { return a + (b-a)*r.Random() }

// Shuffle is random.shuffle over a sequence of length n, swapping with swap.
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.Below(i+1))
	}
}

// Choice is the index random.choice picks from a sequence of length n.
func (r *Rand) Choice(n int) int { return r.Below(n) }

// ChoicesIndex is the index random.choices (no weights) picks for one of
// its k draws from a population of length n.
func (r *Rand) ChoicesIndex(n int) int { return int(r.Random() * float64(n)) }
