package tiered

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/retry"
)

// Worker moves the sync stream into MongoDB as one consumer of the group.
// Every replica runs one; entries a dead consumer left pending longer
// than claimAge are claimed by the others.
type Worker struct {
	s        *Store
	consumer string
	// afterWrite, when set, runs after a batch is in MongoDB and before
	// it is acknowledged (tests stop a worker there).
	afterWrite func(ids []string)
	retryOwn   bool
}

// NewWorker returns a sync worker named consumer.
func (s *Store) NewWorker(consumer string) *Worker {
	return &Worker{s: s, consumer: consumer, retryOwn: true}
}

const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
	statsInterval = 2 * time.Second
)

// Run syncs until ctx ends. Failures (Redis/Valkey or MongoDB down) leave
// the entries pending and are retried with backoff.
func (w *Worker) Run(ctx context.Context) {
	s := w.s
	bo := retry.Backoff(minBackoff, maxBackoff)
	lastClaim, lastStats := time.Time{}, time.Time{}
	for ctx.Err() == nil {
		if err := w.ensureGroup(ctx); err != nil {
			w.fail(ctx, "create consumer group", err, bo.NextBackOff())
			continue
		}
		now := time.Now()
		if now.Sub(lastStats) >= statsInterval {
			lastStats = now
			w.stats(ctx)
		}
		var n int
		var err error
		switch {
		case w.retryOwn:
			// this consumer's own pending entries first (after a failure
			// or a restart under the same name)
			n, err = w.batch(ctx, "0")
			if err == nil && n == 0 {
				w.retryOwn = false
			}
		case now.Sub(lastClaim) >= time.Duration(s.cfg.Stream.ClaimAge)/2:
			lastClaim = now
			if n, err = w.claim(ctx); err == nil && n == 0 {
				_, err = w.batch(ctx, ">")
			}
		default:
			_, err = w.batch(ctx, ">")
		}
		if err != nil {
			w.retryOwn = true
			w.fail(ctx, "sync", err, bo.NextBackOff())
			continue
		}
		bo.Reset()
	}
}

func (w *Worker) fail(ctx context.Context, what string, err error, wait time.Duration) {
	if ctx.Err() != nil {
		return
	}
	w.s.opts.Metrics.syncErrors.Inc()
	w.s.opts.Log.Warn("responses: mongodb sync failed, retrying", "step", what, "err", err, "retry_in", wait)
	retry.Sleep(ctx, wait)
}

func (w *Worker) ensureGroup(ctx context.Context) error {
	s := w.s
	err := s.rdb.Do(ctx, s.rdb.B().XgroupCreate().Key(s.cfg.Stream.Key).Group(s.cfg.Stream.ConsumerGroup).Id("0").Mkstream().Build()).Error()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// batch reads entries (">": new ones, blocking up to blockTimeout; "0":
// this consumer's pending ones) and applies them.
func (w *Worker) batch(ctx context.Context, from string) (int, error) {
	s := w.s
	cmd := s.rdb.B().Xreadgroup().Group(s.cfg.Stream.ConsumerGroup, w.consumer).Count(int64(s.cfg.Stream.BatchSize))
	var res valkey.ValkeyResult
	if from == ">" {
		res = s.rdb.Do(ctx, cmd.Block(time.Duration(s.cfg.Stream.BlockTimeout).Milliseconds()).Streams().Key(s.cfg.Stream.Key).Id(from).Build())
	} else {
		res = s.rdb.Do(ctx, cmd.Streams().Key(s.cfg.Stream.Key).Id(from).Build())
	}
	streams, err := res.AsXRead()
	if valkey.IsValkeyNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the stream: %w", err)
	}
	entries := streams[s.cfg.Stream.Key]
	return len(entries), w.applyAndAck(ctx, entries)
}

// claim takes over entries other consumers left pending past claimAge.
func (w *Worker) claim(ctx context.Context) (int, error) {
	s := w.s
	total := 0
	for start := "0-0"; ; {
		arr, err := s.rdb.Do(ctx, s.rdb.B().Xautoclaim().Key(s.cfg.Stream.Key).Group(s.cfg.Stream.ConsumerGroup).
			Consumer(w.consumer).MinIdleTime(strconv.FormatInt(time.Duration(s.cfg.Stream.ClaimAge).Milliseconds(), 10)).
			Start(start).Count(int64(s.cfg.Stream.BatchSize)).Build()).ToArray()
		if err != nil {
			return total, fmt.Errorf("claim idle entries: %w", err)
		}
		if len(arr) < 2 {
			return total, errors.New("claim idle entries: short XAUTOCLAIM reply")
		}
		next, _ := arr[0].ToString()
		entries, err := arr[1].AsXRange()
		if err != nil {
			return total, fmt.Errorf("claim idle entries: %w", err)
		}
		if len(arr) > 2 {
			if gone, _ := arr[2].AsStrSlice(); len(gone) > 0 {
				// trimmed by maxLen before they were synced
				s.opts.Metrics.dropped.Add(float64(len(gone)))
				s.opts.Log.Error("responses: stream entries trimmed before mongodb had them (raise stream.maxLen)", "count", len(gone))
			}
		}
		if len(entries) > 0 {
			s.opts.Metrics.claimed.Add(float64(len(entries)))
			if err := w.applyAndAck(ctx, entries); err != nil {
				return total, err
			}
			total += len(entries)
		}
		if next == "0-0" || next == "" {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		start = next
	}
}

// applyAndAck writes the entries to MongoDB and acknowledges them once it
// has them.
func (w *Worker) applyAndAck(ctx context.Context, entries []valkey.XRangeEntry) error {
	if len(entries) == 0 {
		return nil
	}
	s := w.s
	ops := make([]op, 0, len(entries))
	ids := make([]string, 0, len(entries))
	var tombstones []string
	var oldest time.Time
	for _, e := range entries {
		ids = append(ids, e.ID)
		if e.FieldValues == nil {
			// trimmed while pending: nothing left to sync
			s.opts.Metrics.dropped.Inc()
			continue
		}
		o, err := decodeEntry(e.FieldValues)
		o.seq = entrySeq(e.ID)
		if err != nil {
			s.opts.Metrics.malformed.Inc()
			s.opts.Log.Error("responses: malformed sync stream entry dropped", "entry", e.ID, "err", err)
			continue
		}
		if o.delete {
			tombstones = append(tombstones, o.id)
		}
		ops = append(ops, o)
		if t := entryTime(e.ID); oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if err := s.mongo.apply(ctx, ops, s.opts.Now(), time.Duration(s.cfg.Mongo.TTL)); err != nil {
		return err
	}
	if w.afterWrite != nil {
		w.afterWrite(ids)
	}
	if err := s.rdb.Do(ctx, s.rdb.B().Xack().Key(s.cfg.Stream.Key).Group(s.cfg.Stream.ConsumerGroup).Id(ids...).Build()).Error(); err != nil {
		return fmt.Errorf("acknowledge %d entries: %w", len(ids), err)
	}
	for _, id := range tombstones {
		if err := clearTombstoneScript.Exec(ctx, s.rdb, []string{s.key(id)}, nil).Error(); err != nil {
			s.opts.Log.Warn("responses: tombstone left in redis", "id", id, "err", err)
		}
	}
	s.opts.Metrics.synced.Add(float64(len(ops)))
	if !oldest.IsZero() {
		s.opts.Metrics.lastSyncLag.Set(time.Since(oldest).Seconds())
	}
	return nil
}

func decodeEntry(fv map[string]string) (op, error) {
	id := fv["id"]
	if id == "" {
		return op{}, errors.New("no id")
	}
	switch fv["op"] {
	case "delete":
		return op{id: id, delete: true}, nil
	case "put", "swap":
		v, err := decodeValue([]byte(fv["v"]))
		if err != nil {
			return op{}, err
		}
		if v.ID != id {
			return op{}, fmt.Errorf("value of %s holds %s", id, v.ID)
		}
		return op{id: id, v: v, swap: fv["op"] == "swap"}, nil
	default:
		return op{}, fmt.Errorf("unknown op %q", fv["op"])
	}
}

// entryTime is when a stream entry was added (its id's milliseconds).
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// entrySeq is a stream entry's place as one number (milliseconds times
// 2^20 plus the sequence within the millisecond), for ordering the
// versions of a record in MongoDB; 0 when the id is not a stream id.
func entrySeq(id string) int64 {
	ms, n, _ := strings.Cut(id, "-")
	m, err1 := strconv.ParseInt(ms, 10, 64)
	k, err2 := strconv.ParseInt(n, 10, 64)
	if err1 != nil || err2 != nil || m < 0 || k < 0 {
		return 0
	}
	return m<<20 | min(k, 1<<20-1)
}

// stats measures the backlog (entries not yet in MongoDB: pending plus
// not yet delivered) and the age of its oldest entry, and trims entries
// every consumer has acknowledged.
func (w *Worker) stats(ctx context.Context) {
	s := w.s
	b, err := s.Backlog(ctx)
	if err != nil {
		s.opts.Log.Debug("responses: stream stats", "err", err)
		return
	}
	s.opts.Metrics.backlog.Set(float64(b.Entries))
	if b.Entries > 0 && !b.Oldest.IsZero() {
		s.opts.Metrics.lag.Set(time.Since(b.Oldest).Seconds())
	} else {
		s.opts.Metrics.lag.Set(0)
	}
	if b.Entries > s.cfg.Stream.MaxLen*9/10 {
		s.opts.Log.Error("responses: sync backlog near stream.maxLen: older entries will be trimmed before mongodb has them", "backlog", b.Entries, "maxLen", s.cfg.Stream.MaxLen)
	}
	if b.TrimBelow != "" {
		_ = s.rdb.Do(ctx, s.rdb.B().Xtrim().Key(s.cfg.Stream.Key).Minid().Almost().Threshold(b.TrimBelow).Build()).Error()
	}
}

// Backlog is the sync stream's state.
type Backlog struct {
	// Entries not yet in MongoDB (pending or never delivered).
	Entries int64
	// Oldest is when the oldest of them was written.
	Oldest time.Time
	// TrimBelow is the id below which every entry is acknowledged.
	TrimBelow string
}

// Backlog reads the consumer group's pending count, lag and oldest entry.
func (s *Store) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	groups, err := s.rdb.Do(ctx, s.rdb.B().XinfoGroups().Key(s.cfg.Stream.Key).Build()).ToArray()
	if err != nil {
		return b, err
	}
	var lastDelivered string
	found := false
	for _, g := range groups {
		m, err := g.AsMap()
		if err != nil {
			return b, err
		}
		name, pend, lg, ld := m["name"], m["pending"], m["lag"], m["last-delivered-id"]
		if n, _ := name.ToString(); n != s.cfg.Stream.ConsumerGroup {
			continue
		}
		found = true
		pending, _ := pend.AsInt64()
		lag, lerr := lg.AsInt64()
		if lerr != nil {
			lag = 0 // unknown after a deletion in the stream; counted below
		}
		b.Entries = pending + lag
		lastDelivered, _ = ld.ToString()
	}
	if !found {
		return b, errors.New("no consumer group yet")
	}
	// the oldest pending entry, else the first undelivered one
	sum, err := s.rdb.Do(ctx, s.rdb.B().Xpending().Key(s.cfg.Stream.Key).Group(s.cfg.Stream.ConsumerGroup).Build()).ToArray()
	if err == nil && len(sum) >= 2 {
		if n, _ := sum[0].AsInt64(); n > 0 {
			first, _ := sum[1].ToString()
			b.Oldest, b.TrimBelow = entryTime(first), first
			return b, nil
		}
	}
	b.TrimBelow = lastDelivered
	if lastDelivered == "" || lastDelivered == "0-0" {
		b.TrimBelow = ""
	}
	next, err := s.rdb.Do(ctx, s.rdb.B().Xrange().Key(s.cfg.Stream.Key).Start("("+lastDelivered).End("+").Count(1).Build()).AsXRange()
	if err == nil && len(next) > 0 {
		b.Oldest = entryTime(next[0].ID)
		if b.Entries == 0 {
			b.Entries = 1 // lag unknown: at least this one
		}
	}
	return b, nil
}
