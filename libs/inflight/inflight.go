// Package inflight keeps a pool's in-flight request counts in a Valkey or
// Redis sorted set that every picker replica (and so every gateway) shares:
// member = endpoint, score = requests in flight. A script atomically picks
// the least-loaded of a request's candidates and increments it, so two
// replicas picking at once never both see the same idle endpoint; another
// decrements it when the request completes, never below zero.
//
// Every pick takes a lease named by the request id, with an expiry: the
// release is idempotent (a completion reported twice counts once), and
// the leases of a gateway that died with requests in flight expire and
// are repaired. Scripts are called by hash (EVALSHA) and sent again when
// the server answers NOSCRIPT (after a restart or SCRIPT FLUSH).
//
// Keys, under "hermod:inflight:{<pool>}:" (one cluster slot per pool):
//
//	counts   sorted set: endpoint -> requests in flight
//	leases   hash: request id -> endpoint
//	expiry   sorted set: request id -> lease expiry (Unix ms)
package inflight

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// DefaultLeaseTTL is how long a pick's lease lives without a release.
const DefaultLeaseTTL = 15 * time.Minute

// pickScript: KEYS counts, leases, expiry; ARGV request id, lease ms,
// limit (<= 0: none), candidates in preference order. A request that holds
// a lease on one of the candidates keeps it (a retried pick). Otherwise
// the candidate with the fewest in flight below the limit wins, the
// earlier on ties. Returns {endpoint, count after} or nil when every
// candidate is at the limit.
var pickScript = valkey.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  for i = 4, #ARGV do
    if ARGV[i] == held then
      redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
      return {held, tonumber(redis.call('ZSCORE', KEYS[1], held) or '0')}
    end
  end
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  local s = redis.call('ZSCORE', KEYS[1], held)
  if s and tonumber(s) > 0 then redis.call('ZINCRBY', KEYS[1], -1, held) end
end
local limit = tonumber(ARGV[3])
local best, least
for i = 4, #ARGV do
  local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]) or '0')
  if (limit <= 0 or s < limit) and (least == nil or s < least) then
    best, least = ARGV[i], s
  end
end
if not best then return false end
local n = redis.call('ZINCRBY', KEYS[1], 1, best)
redis.call('HSET', KEYS[2], ARGV[1], best)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
return {best, tonumber(n)}
`)

// releaseScript: KEYS counts, leases, expiry; ARGV request ids. Drops
// each lease and decrements its endpoint (never below zero, never
// bringing back a removed endpoint). Returns how many leases it dropped.
var releaseScript = valkey.NewLuaScript(`
local n = 0
for i = 1, #ARGV do
  local ep = redis.call('HGET', KEYS[2], ARGV[i])
  if ep then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
    local s = redis.call('ZSCORE', KEYS[1], ep)
    if s and tonumber(s) > 0 then redis.call('ZINCRBY', KEYS[1], -1, ep) end
    n = n + 1
  end
end
return n
`)

// expiredScript: KEYS expiry; ARGV limit. Returns up to limit request ids
// whose leases have expired.
var expiredScript = valkey.NewLuaScriptReadOnly(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
`)

// syncScript: KEYS counts; ARGV the pool's endpoints. New endpoints start
// at 0, those not listed are removed, the others keep their counts.
var syncScript = valkey.NewLuaScript(`
local want = {}
for i = 1, #ARGV do
  want[ARGV[i]] = true
  redis.call('ZADD', KEYS[1], 'NX', 0, ARGV[i])
end
local removed = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if not want[m] then
    redis.call('ZREM', KEYS[1], m)
    removed = removed + 1
  end
end
return removed
`)

// Store is a pool's in-flight counts on a Valkey/Redis server.
type Store struct {
	c                      valkey.Client
	counts, leases, expiry string
	leaseMillis            string
}

// New returns the pool's store on the client's server; leases expire
// after leaseTTL (DefaultLeaseTTL when 0).
func New(c valkey.Client, pool string, leaseTTL time.Duration) *Store {
	if leaseTTL <= 0 {
		leaseTTL = DefaultLeaseTTL
	}
	p := "hermod:inflight:{" + pool + "}:"
	return &Store{c: c, counts: p + "counts", leases: p + "leases", expiry: p + "expiry", leaseMillis: strconv.FormatInt(max(1, leaseTTL.Milliseconds()), 10)}
}

// ErrFull means every candidate is at the limit.
var ErrFull = errors.New("inflight: every candidate is at its in-flight limit")

// Pick atomically picks the candidate (in preference order: the earlier
// wins ties) with the fewest requests in flight, below limit when limit
// is positive, counts the request on it under a lease named requestID,
// and returns it with its count after the pick. A request id that already
// holds a lease on a candidate keeps it. ErrFull when all are at the limit.
func (s *Store) Pick(ctx context.Context, requestID string, candidates []string, limit int) (string, int64, error) {
	if requestID == "" {
		return "", 0, errors.New("inflight: a pick needs a request id")
	}
	if len(candidates) == 0 {
		return "", 0, ErrFull
	}
	args := make([]string, 0, 3+len(candidates))
	args = append(args, requestID, s.leaseMillis, strconv.Itoa(limit))
	args = append(args, candidates...)
	res, err := pickScript.Exec(ctx, s.c, []string{s.counts, s.leases, s.expiry}, args).ToArray()
	if valkey.IsValkeyNil(err) {
		return "", 0, ErrFull
	}
	if err != nil {
		return "", 0, fmt.Errorf("inflight: pick: %w", err)
	}
	if len(res) != 2 {
		return "", 0, fmt.Errorf("inflight: pick: a reply of %d values", len(res))
	}
	ep, err := res[0].ToString()
	if err != nil {
		return "", 0, fmt.Errorf("inflight: pick: %w", err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return "", 0, fmt.Errorf("inflight: pick: %w", err)
	}
	return ep, n, nil
}

// Release ends the requests' leases, each decrementing its endpoint once
// however often it is released; it returns how many leases it ended.
func (s *Store) Release(ctx context.Context, requestIDs ...string) (int, error) {
	if len(requestIDs) == 0 {
		return 0, nil
	}
	n, err := releaseScript.Exec(ctx, s.c, []string{s.counts, s.leases, s.expiry}, requestIDs).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("inflight: release: %w", err)
	}
	return int(n), nil
}

// Repair releases the leases that expired (requests whose gateway never
// reported them) and returns how many.
func (s *Store) Repair(ctx context.Context) (int, error) {
	total := 0
	for {
		ids, err := expiredScript.Exec(ctx, s.c, []string{s.expiry}, []string{"1000"}).AsStrSlice()
		if err != nil {
			return total, fmt.Errorf("inflight: repair: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := s.Release(ctx, ids...)
		total += n
		if err != nil || len(ids) < 1000 {
			return total, err
		}
	}
}

// Sync makes the set's endpoints the pool's: new ones at 0, others
// removed, the rest keeping their counts. It returns how many it removed.
func (s *Store) Sync(ctx context.Context, endpoints []string) (int, error) {
	n, err := syncScript.Exec(ctx, s.c, []string{s.counts}, endpoints).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("inflight: sync: %w", err)
	}
	return int(n), nil
}

// Counts returns every endpoint's requests in flight.
func (s *Store) Counts(ctx context.Context) (map[string]int64, error) {
	zs, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.counts).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("inflight: counts: %w", err)
	}
	out := make(map[string]int64, len(zs))
	for _, z := range zs {
		out[z.Member] = int64(z.Score)
	}
	return out, nil
}

// Leases returns how many leases are held.
func (s *Store) Leases(ctx context.Context) (int64, error) {
	n, err := s.c.Do(ctx, s.c.B().Hlen().Key(s.leases).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("inflight: leases: %w", err)
	}
	return n, nil
}
