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
// updated, request, headers; a finished job drops the request and its
// headers) that expires with the record, and one sorted
// set of the jobs that are due ("{<stream key>}:jobs", scored by when, in
// Unix ms: a queued job from its retry time, a running one from the end
// of its lease). Every step is one script, so a run that lost its job
// (cancelled, or its lease ran out and another run took it) changes
// nothing.

var _ store.Jobs = (*Store)(nil)

// submitScript stores the record as putScript does and queues its job
// (with an empty event log). KEYS: record, stream, job, due set, log.
// ARGV: value, ttl ms, id, "1" to append, maxLen, now ms, request,
// headers.
var submitScript = valkey.NewLuaScript(`
redis.call('DEL', KEYS[5])
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
  redis.call('HDEL', KEYS[1], 'request', 'headers')
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
`)

// The event log of a background response is a list beside its job
// ("{<stream key>}:ev:<id>") that expires with the job. appendLua is the
// append both scripts share: it returns the log's length, or -2 (the log
// is shorter than the append's index) or -3 (past the bound). Locals:
// job and log keys, the index, the bound and the events (ARGV from first).
const appendLua = `
local function append(job, log, from, bound, first)
  local n = redis.call('LLEN', log)
  if from > n then return -2 end
  if from + (#ARGV - first + 1) > bound then return -3 end
  for i = first + (n - from), #ARGV do redis.call('RPUSH', log, ARGV[i]) end
  local ttl = redis.call('PTTL', job)
  if ttl > 0 then redis.call('PEXPIRE', log, ttl) end
  return redis.call('LLEN', log)
end
`

// appendEventsScript appends to the log of a job the run holds. KEYS:
// job, log. ARGV: token, from, bound, events... Returns the length, -1
// (not held), -2 or -3.
var appendEventsScript = valkey.NewLuaScript(appendLua + `
local f = redis.call('HMGET', KEYS[1], 'status', 'token')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[1] or ARGV[1] == '' then return -1 end
return append(KEYS[1], KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]), 4)
`)

// completeScript stores the outcome of the run holding the job, appends
// its last events to the log and completes the job. KEYS: record, stream,
// job, due set, log. ARGV: value, ttl ms, id, "1" to append, maxLen, now
// ms, token, events' index (-1: none), bound, events... Returns 1, 0 (not
// held), -2 or -3.
var completeScript = valkey.NewLuaScript(appendLua + `
local f = redis.call('HMGET', KEYS[3], 'status', 'token')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[7] or ARGV[7] == '' then return 0 end
local from = tonumber(ARGV[8])
if from >= 0 then
  local n = append(KEYS[3], KEYS[5], from, tonumber(ARGV[9]), 10)
  if n < 0 then return n end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'op', 'put', 'id', ARGV[3], 'v', ARGV[1])
end
redis.call('HSET', KEYS[3], 'status', 'completed', 'token', '', 'error', '', 'updated', ARGV[6])
redis.call('HDEL', KEYS[3], 'request', 'headers')
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
  redis.call('HDEL', KEYS[1], 'request', 'headers')
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
`)

func (s *Store) jobPrefix() string       { return "{" + s.cfg.Stream.Key + "}:job:" }
func (s *Store) jobKey(id string) string { return s.jobPrefix() + id }
func (s *Store) logKey(id string) string { return "{" + s.cfg.Stream.Key + "}:ev:" + id }
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
	err = submitScript.Exec(ctx, s.rdb, []string{s.key(r.ID), s.cfg.Stream.Key, s.jobKey(r.ID), s.dueKey(), s.logKey(r.ID)},
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
	if h := m["headers"]; h != "" { // a finished job keeps none
		if err := json.Unmarshal([]byte(h), &j.Headers); err != nil {
			return nil, fmt.Errorf("background response %s: headers: %w", id, err)
		}
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
func (s *Store) Complete(ctx context.Context, r *store.Record, token string, tail *store.EventTail) error {
	if err := store.CheckPut(r, s.cfg.Redis.MaxEntryBytes); err != nil {
		return err
	}
	args := []string{string(encodeValue(s.value(r))), s.ttlMilli, r.ID, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10),
		s.nowMilli(), token, "-1", strconv.Itoa(store.MaxEvents)}
	if tail != nil {
		if err := store.CheckEvents(tail.From, tail.Events); err != nil {
			return err
		}
		args[7] = strconv.Itoa(tail.From)
		for _, e := range tail.Events {
			args = append(args, string(e))
		}
	}
	ok, err := completeScript.Exec(ctx, s.rdb, []string{s.key(r.ID), s.cfg.Stream.Key, s.jobKey(r.ID), s.dueKey(), s.logKey(r.ID)}, args).AsInt64()
	s.opts.Metrics.op("complete", store.TierRedis, err)
	if err != nil {
		return fmt.Errorf("complete %s: %w", r.ID, err)
	}
	if ok == 0 {
		return fmt.Errorf("%w: %s", store.ErrNotHeld, r.ID)
	}
	return appendResult(r.ID, ok)
}

// appendResult is the error of appendLua's answer n (nil for a length).
func appendResult(id string, n int64) error {
	switch n {
	case -2:
		return fmt.Errorf("%w: the event log of %s is shorter than the append's index", store.ErrConflict, id)
	case -3:
		return fmt.Errorf("%w: the event log of %s would pass %d events", store.ErrTooLarge, id, store.MaxEvents)
	}
	return nil
}

var _ store.Events = (*Store)(nil)

// AppendEvents implements store.Events.
func (s *Store) AppendEvents(ctx context.Context, id, token string, from int, events [][]byte) (int, error) {
	if from < 0 {
		return 0, fmt.Errorf("%w: index %d", store.ErrConflict, from)
	}
	if err := store.CheckEvents(from, events); err != nil {
		return 0, err
	}
	args := make([]string, 0, 3+len(events))
	args = append(args, token, strconv.Itoa(from), strconv.Itoa(store.MaxEvents))
	for _, e := range events {
		args = append(args, string(e))
	}
	n, err := appendEventsScript.Exec(ctx, s.rdb, []string{s.jobKey(id), s.logKey(id)}, args).AsInt64()
	s.opts.Metrics.op("append_events", store.TierRedis, err)
	switch {
	case err != nil:
		return 0, fmt.Errorf("append events to %s: %w", id, err)
	case n == -1:
		return 0, fmt.Errorf("%w: %s", store.ErrNotHeld, id)
	}
	return int(n), appendResult(id, n)
}

// ReadEvents implements store.Events.
func (s *Store) ReadEvents(ctx context.Context, id string, from, limit int) ([][]byte, error) {
	if from < 0 || limit <= 0 {
		return nil, nil
	}
	vs, err := s.rdb.Do(ctx, s.rdb.B().Lrange().Key(s.logKey(id)).Start(int64(from)).Stop(int64(from+limit-1)).Build()).AsStrSlice()
	s.opts.Metrics.op("read_events", store.TierRedis, err)
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", id, err)
	}
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = []byte(v)
	}
	return out, nil
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
