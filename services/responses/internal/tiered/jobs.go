package tiered

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// Background jobs live beside the records, in the same hash slot: a hash
// per job ("{<stream key>}:job:<id>": status, token, attempts, error,
// updated, request, headers) that expires with the record, and one sorted
// set of the jobs that are due ("{<stream key>}:jobs", scored by when, in
// Unix ms: a queued job from its retry time, a running one from the end
// of its lease). Every step is one script, so a run that lost its job
// (cancelled, or its lease ran out and another run took it) changes
// nothing.

var _ store.Jobs = (*Store)(nil)

// submitScript stores the record as putScript does and queues its job.
// KEYS: record, stream, job, due set. ARGV: value, ttl ms, id, "1" to
// append, maxLen, now ms, request, headers.
var submitScript = valkey.NewLuaScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'op', 'put', 'id', ARGV[3], 'v', ARGV[1])
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'status', 'queued', 'token', '', 'attempts', 0, 'error', '', 'updated', ARGV[6], 'request', ARGV[7], 'headers', ARGV[8])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[3])
return 1
`)

// claimScript takes the longest-due job. KEYS: due set. ARGV: job key
// prefix, now ms, lease ms, token. Returns {id, attempts, request,
// headers} or nil.
var claimScript = valkey.NewLuaScript(`
for _ = 1, 16 do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, 1)
  if #due == 0 then return false end
  local id = due[1]
  local job = ARGV[1] .. id
  local st = redis.call('HGET', job, 'status')
  if st == 'queued' or st == 'in_progress' then
    local n = redis.call('HINCRBY', job, 'attempts', 1)
    redis.call('HSET', job, 'status', 'in_progress', 'token', ARGV[4], 'updated', ARGV[2])
    redis.call('ZADD', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]), id)
    local f = redis.call('HMGET', job, 'request', 'headers')
    return {id, n, f[1], f[2]}
  end
  redis.call('ZREM', KEYS[1], id)
end
return false
`)

// heldScript changes a job the run holds. KEYS: job, due set. ARGV: id,
// token, now ms, action (extend, retry, fail), score ms (extend, retry),
// reason. Returns 1, or 0 when the run does not hold the job.
var heldScript = valkey.NewLuaScript(`
local f = redis.call('HMGET', KEYS[1], 'status', 'token')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[2] or ARGV[2] == '' then return 0 end
if ARGV[4] == 'extend' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
elseif ARGV[4] == 'retry' then
  redis.call('HSET', KEYS[1], 'status', 'queued', 'token', '', 'error', ARGV[6], 'updated', ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
else
  redis.call('HSET', KEYS[1], 'status', 'failed', 'token', '', 'error', ARGV[6], 'updated', ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
`)

// completeScript stores the outcome of the run holding the job and
// completes it. KEYS: record, stream, job, due set. ARGV: value, ttl ms,
// id, "1" to append, maxLen, now ms, token.
var completeScript = valkey.NewLuaScript(`
local f = redis.call('HMGET', KEYS[3], 'status', 'token')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[7] or ARGV[7] == '' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'op', 'put', 'id', ARGV[3], 'v', ARGV[1])
end
redis.call('HSET', KEYS[3], 'status', 'completed', 'token', '', 'error', '', 'updated', ARGV[6])
redis.call('ZREM', KEYS[4], ARGV[3])
return 1
`)

// cancelScript cancels a queued or running job. KEYS: job, due set.
// ARGV: id, now ms. Returns 0 when there is no such job.
var cancelScript = valkey.NewLuaScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 0 end
if st == 'queued' or st == 'in_progress' then
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'token', '', 'updated', ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
`)

func (s *Store) jobPrefix() string       { return "{" + s.cfg.Stream.Key + "}:job:" }
func (s *Store) jobKey(id string) string { return s.jobPrefix() + id }
func (s *Store) dueKey() string          { return "{" + s.cfg.Stream.Key + "}:jobs" }
func (s *Store) nowMilli() string        { return strconv.FormatInt(s.opts.Now().UnixMilli(), 10) }

// Submit implements store.Jobs.
func (s *Store) Submit(ctx context.Context, r *store.Record, job *store.Job) error {
	if err := store.CheckPut(r, s.cfg.Redis.MaxEntryBytes); err != nil {
		return err
	}
	headers, err := json.Marshal(job.Headers)
	if err != nil {
		return fmt.Errorf("submit %s: headers: %w", r.ID, err)
	}
	err = submitScript.Exec(ctx, s.rdb, []string{s.key(r.ID), s.cfg.Stream.Key, s.jobKey(r.ID), s.dueKey()},
		[]string{string(encodeValue(s.value(r))), s.ttlMilli, r.ID, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10),
			s.nowMilli(), string(job.Request), string(headers)}).Error()
	s.opts.Metrics.op("submit", store.TierRedis, err)
	if err != nil {
		return fmt.Errorf("submit %s: %w", r.ID, err)
	}
	return nil
}

// value is r as the store keeps it.
func (s *Store) value(r *store.Record) *value {
	v := &value{Record: *r}
	if s.mongo != nil {
		v.MongoExpires = s.opts.Now().Add(time.Duration(s.cfg.Mongo.TTL))
	}
	return v
}

// Job implements store.Jobs.
func (s *Store) Job(ctx context.Context, id string) (*store.Job, error) {
	m, err := s.rdb.Do(ctx, s.rdb.B().Hgetall().Key(s.jobKey(id)).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("background response %s: %w", id, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: background response %s", store.ErrNotFound, id)
	}
	attempts, _ := strconv.Atoi(m["attempts"])
	updated, _ := strconv.ParseInt(m["updated"], 10, 64)
	j := &store.Job{ID: id, Status: store.JobStatus(m["status"]), Error: m["error"], Attempts: attempts,
		UpdatedAt: time.UnixMilli(updated), Request: []byte(m["request"]), Token: m["token"]}
	if err := json.Unmarshal([]byte(m["headers"]), &j.Headers); err != nil {
		return nil, fmt.Errorf("background response %s: headers: %w", id, err)
	}
	return j, nil
}

// Claim implements store.Jobs.
func (s *Store) Claim(ctx context.Context, token string, lease time.Duration) (*store.Job, error) {
	now := s.opts.Now()
	res, err := claimScript.Exec(ctx, s.rdb, []string{s.dueKey()},
		[]string{s.jobPrefix(), strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(lease.Milliseconds(), 10), token}).ToArray()
	if valkey.IsValkeyNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim a background response: %w", err)
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("claim a background response: %d fields", len(res))
	}
	id, _ := res[0].ToString()
	attempts, _ := res[1].AsInt64()
	request, _ := res[2].ToString()
	headers, _ := res[3].ToString()
	j := &store.Job{ID: id, Status: store.JobInProgress, Attempts: int(attempts), UpdatedAt: now, Request: []byte(request), Token: token}
	if err := json.Unmarshal([]byte(headers), &j.Headers); err != nil {
		return nil, fmt.Errorf("background response %s: headers: %w", id, err)
	}
	return j, nil
}

func (s *Store) held(ctx context.Context, id, token, action string, at time.Time, reason string) error {
	ok, err := heldScript.Exec(ctx, s.rdb, []string{s.jobKey(id), s.dueKey()},
		[]string{id, token, s.nowMilli(), action, strconv.FormatInt(at.UnixMilli(), 10), reason}).AsInt64()
	if err != nil {
		return fmt.Errorf("%s background response %s: %w", action, id, err)
	}
	if ok == 0 {
		return fmt.Errorf("%w: %s", store.ErrNotHeld, id)
	}
	return nil
}

// Extend implements store.Jobs.
func (s *Store) Extend(ctx context.Context, id, token string, lease time.Duration) error {
	return s.held(ctx, id, token, "extend", s.opts.Now().Add(lease), "")
}

// Retry implements store.Jobs.
func (s *Store) Retry(ctx context.Context, id, token string, delay time.Duration, reason string) error {
	return s.held(ctx, id, token, "retry", s.opts.Now().Add(delay), reason)
}

// Fail implements store.Jobs.
func (s *Store) Fail(ctx context.Context, id, token, reason string) error {
	return s.held(ctx, id, token, "fail", s.opts.Now(), reason)
}

// Complete implements store.Jobs.
func (s *Store) Complete(ctx context.Context, r *store.Record, token string) error {
	if err := store.CheckPut(r, s.cfg.Redis.MaxEntryBytes); err != nil {
		return err
	}
	ok, err := completeScript.Exec(ctx, s.rdb, []string{s.key(r.ID), s.cfg.Stream.Key, s.jobKey(r.ID), s.dueKey()},
		[]string{string(encodeValue(s.value(r))), s.ttlMilli, r.ID, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10),
			s.nowMilli(), token}).AsInt64()
	s.opts.Metrics.op("complete", store.TierRedis, err)
	if err != nil {
		return fmt.Errorf("complete %s: %w", r.ID, err)
	}
	if ok == 0 {
		return fmt.Errorf("%w: %s", store.ErrNotHeld, r.ID)
	}
	return nil
}

// Cancel implements store.Jobs.
func (s *Store) Cancel(ctx context.Context, id string) (*store.Job, error) {
	ok, err := cancelScript.Exec(ctx, s.rdb, []string{s.jobKey(id), s.dueKey()}, []string{id, s.nowMilli()}).AsInt64()
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	if ok == 0 {
		return nil, fmt.Errorf("%w: background response %s", store.ErrNotFound, id)
	}
	return s.Job(ctx, id)
}
