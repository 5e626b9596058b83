// Package tiered is the Redis/Valkey responses backend with an optional
// MongoDB tier 2 (tieredConfig). A write stores the record in Redis/Valkey
// with its ttl and appends it to the sync stream in one script, so a
// write that was acknowledged is always on its way to MongoDB; sync
// workers (one per replica, one consumer group) upsert stream batches
// into MongoDB and acknowledge them only once MongoDB has them. Reads try
// Redis/Valkey, then MongoDB, and warm Redis/Valkey again with what
// MongoDB had.
//
// Keys carry the stream key as a hash tag ("{<stream key>}:<id>"), so a
// record and its stream entry live in one Cluster slot and the write
// script is atomic in every mode.
package tiered

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// Options are the store's collaborators besides its configuration.
type Options struct {
	// Consumer is this replica's name in the consumer group.
	Consumer string
	Log      *slog.Logger
	Metrics  *Metrics
	// Now is the clock (tests replace it); nil is time.Now.
	Now func() time.Time
	// NoSync leaves the sync worker off (tests run their own).
	NoSync bool
}

// Store is the tiered backend.
type Store struct {
	cfg      *responsestore.TieredConfig
	rdb      valkey.Client
	mongo    *mongoTier // nil without tier 2
	opts     Options
	cancel   context.CancelFunc
	done     chan struct{}
	ttlMilli string
}

// putScript stores a record and, with tier 2, appends it to the sync
// stream, in one step. KEYS: record, stream. ARGV: value, ttl ms, id,
// "1" to append, stream maxLen.
var putScript = valkey.NewLuaScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'op', 'put', 'id', ARGV[3], 'v', ARGV[1])
end
return 1
`)

// deleteScript removes a record. With tier 2 it leaves a tombstone (so
// that reads do not find the record in MongoDB before the deletion
// reaches it) and appends the deletion to the stream; when the key is
// empty it does so only if ARGV[4] is "1" (Delete asks MongoDB first),
// and a tombstone (a deletion already on its way) is left as it is.
// KEYS: record, stream. ARGV: id, "1" for tier 2, maxLen, "1" to queue
// the deletion of a record Redis/Valkey does not have. Returns
// deleteLive, deleteAbsent or deleteTombstone.
var deleteScript = valkey.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if ARGV[2] ~= '1' then
  redis.call('DEL', KEYS[1])
  if v and v ~= '\0' then return 1 end
  return 0
end
if v == '\0' then return 2 end
if not v and ARGV[4] ~= '1' then return 0 end
redis.call('SET', KEYS[1], '\0')
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'op', 'delete', 'id', ARGV[1])
if v then return 1 end
return 0
`)

// What deleteScript found under the key.
const (
	deleteAbsent    = 0
	deleteLive      = 1
	deleteTombstone = 2
)

// swapScript replaces a record that holds the expected revision (bytes 2
// to 9 of a version 2 value; a version 1 value is revision 0) and, with
// tier 2, appends the new version to the sync stream as a swap (tier 2
// replaces its copy, where a put keeps the first). KEYS: record, stream.
// ARGV: value, ttl ms, id, "1" to append, maxLen, expected revision (8
// bytes). Returns 1 (swapped), 0 (another revision) or -1 (no record:
// absent, or a tombstone).
var swapScript = valkey.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if not v or v == '\0' then return -1 end
local rev = '\0\0\0\0\0\0\0\0'
if string.byte(v, 1) == 2 then rev = string.sub(v, 2, 9) end
if rev ~= ARGV[6] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'op', 'swap', 'id', ARGV[3], 'v', ARGV[1])
end
return 1
`)

// What swapScript found.
const (
	swapAbsent  = -1
	swapOther   = 0
	swapSwapped = 1
)

// warmScript puts a record read from MongoDB back, unless the key holds
// something (a newer write or a tombstone). KEYS: record. ARGV: value, ttl ms.
var warmScript = valkey.NewLuaScript(`
return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') and 1 or 0
`)

// clearTombstoneScript drops a tombstone once tier 2 has the deletion.
var clearTombstoneScript = valkey.NewLuaScript(`
if redis.call('GET', KEYS[1]) == '\0' then return redis.call('DEL', KEYS[1]) end
return 0
`)

// New connects to Redis/Valkey (and MongoDB when configured) and starts
// the sync worker. MongoDB being down at start is not an error: the
// stream holds the writes until it is back.
func New(ctx context.Context, cfg *responsestore.TieredConfig, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Consumer == "" {
		return nil, errors.New("tiered store: no consumer name")
	}
	opt, err := clientOption(cfg.Redis)
	if err != nil {
		return nil, err
	}
	rdb, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to redis (%s): %w", cfg.Redis.Mode(), err)
	}
	s := &Store{cfg: cfg, rdb: rdb, opts: o, done: make(chan struct{}),
		ttlMilli: strconv.FormatInt(time.Duration(cfg.Redis.TTL).Milliseconds(), 10)}
	if cfg.Mongo != nil {
		if s.mongo, err = openMongo(ctx, cfg.Mongo, o.Log); err != nil {
			rdb.Close()
			return nil, err
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.mongo != nil && !o.NoSync {
		w := s.NewWorker(o.Consumer)
		go func() { defer close(s.done); w.Run(wctx) }()
	} else {
		close(s.done)
	}
	return s, nil
}

func (s *Store) key(id string) string { return "{" + s.cfg.Stream.Key + "}:" + id }

func (s *Store) tier2() string {
	if s.mongo != nil {
		return "1"
	}
	return "0"
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, r *store.Record) error {
	if err := store.CheckPut(r, s.cfg.Redis.MaxEntryBytes); err != nil {
		return err
	}
	v := s.value(r)
	err := putScript.Exec(ctx, s.rdb, []string{s.key(r.ID), s.cfg.Stream.Key},
		[]string{string(encodeValue(v)), s.ttlMilli, r.ID, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10)}).Error()
	s.opts.Metrics.op("put", store.TierRedis, err)
	if err != nil {
		return fmt.Errorf("put %s: %w", r.ID, err)
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id string) (*store.Record, store.Tier, error) {
	b, err := s.rdb.Do(ctx, s.rdb.B().Get().Key(s.key(id)).Build()).AsBytes()
	switch {
	case err == nil:
		v, derr := decodeValue(b)
		if errors.Is(derr, errTombstone) {
			s.opts.Metrics.op("get", store.TierRedis, store.ErrNotFound)
			return nil, "", fmt.Errorf("%w: %s (deleted)", store.ErrNotFound, id)
		}
		if derr != nil {
			s.opts.Metrics.op("get", store.TierRedis, derr)
			return nil, "", fmt.Errorf("get %s: %w", id, derr)
		}
		s.opts.Metrics.op("get", store.TierRedis, nil)
		return &v.Record, store.TierRedis, nil
	case valkey.IsValkeyNil(err):
		s.opts.Metrics.op("get", store.TierRedis, store.ErrNotFound)
	default:
		s.opts.Metrics.op("get", store.TierRedis, err)
		if s.mongo == nil {
			return nil, "", fmt.Errorf("get %s: %w", id, err)
		}
		s.opts.Log.Warn("responses: redis read failed, reading mongodb", "id", id, "err", err)
	}
	if s.mongo == nil {
		return nil, "", fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	v, err := s.mongo.get(ctx, id, s.opts.Now())
	s.opts.Metrics.op("get", store.TierMongo, err)
	if err != nil {
		return nil, "", err
	}
	s.warm(ctx, v)
	return &v.Record, store.TierMongo, nil
}

// Swap implements store.Store. A record Redis/Valkey does not hold (its
// copy expired) is read from MongoDB and warmed, and the swap tried once
// more against it.
func (s *Store) Swap(ctx context.Context, r *store.Record, want uint64) error {
	if err := store.CheckPut(r, s.cfg.Redis.MaxEntryBytes); err != nil {
		return err
	}
	var expected [8]byte
	binary.BigEndian.PutUint64(expected[:], want)
	keys := []string{s.key(r.ID), s.cfg.Stream.Key}
	args := []string{string(encodeValue(s.value(r))), s.ttlMilli, r.ID, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10), string(expected[:])}
	for attempt := 0; ; attempt++ {
		found, err := swapScript.Exec(ctx, s.rdb, keys, args).AsInt64()
		s.opts.Metrics.op("swap", store.TierRedis, err)
		if err != nil {
			return fmt.Errorf("swap %s: %w", r.ID, err)
		}
		switch {
		case found == swapSwapped:
			return nil
		case found == swapOther:
			return fmt.Errorf("%w: %s is at another revision", store.ErrConflict, r.ID)
		case s.mongo == nil || attempt > 0:
			return fmt.Errorf("%w: %s", store.ErrNotFound, r.ID)
		}
		v, err := s.mongo.get(ctx, r.ID, s.opts.Now())
		s.opts.Metrics.op("get", store.TierMongo, err)
		if err != nil {
			return err
		}
		if v.Revision != want {
			return fmt.Errorf("%w: %s is at another revision", store.ErrConflict, r.ID)
		}
		s.warm(ctx, v)
	}
}

// warm puts a record MongoDB had back into Redis/Valkey, for at most the
// redis ttl and never past its MongoDB expiry.
func (s *Store) warm(ctx context.Context, v *value) {
	ttl := time.Duration(s.cfg.Redis.TTL)
	if left := v.MongoExpires.Sub(s.opts.Now()); !v.MongoExpires.IsZero() && left < ttl {
		ttl = left
	}
	if ttl < time.Millisecond {
		return
	}
	err := warmScript.Exec(ctx, s.rdb, []string{s.key(v.ID)}, []string{string(encodeValue(v)), strconv.FormatInt(ttl.Milliseconds(), 10)}).Error()
	if err != nil {
		s.opts.Log.Warn("responses: could not warm redis", "id", v.ID, "err", err)
		return
	}
	s.opts.Metrics.rewarms.Inc()
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	found, err := s.deleteExec(ctx, id, false)
	s.opts.Metrics.op("delete", store.TierRedis, err)
	if err != nil {
		return err
	}
	if err := s.rdb.Do(ctx, s.rdb.B().Del().Key(s.logKey(id)).Build()).Error(); err != nil {
		s.opts.Log.Warn("responses: the event log of a deleted response is left to expire", "id", id, "err", err)
	}
	switch {
	case found == deleteLive:
		return nil
	case found == deleteTombstone:
		return fmt.Errorf("%w: %s (deleted)", store.ErrNotFound, id)
	case s.mongo == nil:
		return fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	// Not in Redis/Valkey: whether it exists is MongoDB's to say, and it
	// must say so before the deletion is on the stream. Once it is, a
	// sync worker may apply it at once, and MongoDB would answer
	// "deleted" for the response this call is deleting.
	_, exists := s.mongo.get(ctx, id, s.opts.Now())
	// The deletion is queued whatever MongoDB said: a put still on the
	// stream (its Redis/Valkey copy expired before the sync) is deleted
	// behind it.
	if _, err := s.deleteExec(ctx, id, true); err != nil {
		return err
	}
	return exists
}

// deleteExec runs deleteScript; absent queues the deletion of a record
// Redis/Valkey does not have.
func (s *Store) deleteExec(ctx context.Context, id string, absent bool) (int64, error) {
	queue := "0"
	if absent {
		queue = "1"
	}
	found, err := deleteScript.Exec(ctx, s.rdb, []string{s.key(id), s.cfg.Stream.Key},
		[]string{id, s.tier2(), strconv.FormatInt(s.cfg.Stream.MaxLen, 10), queue}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", id, err)
	}
	return found, nil
}

// Client is the store's Redis/Valkey client (tests and benchmarks).
func (s *Store) Client() valkey.Client { return s.rdb }

// Close stops the sync worker and closes the connections.
func (s *Store) Close() error {
	s.cancel()
	<-s.done
	s.rdb.Close()
	if s.mongo != nil {
		return s.mongo.close()
	}
	return nil
}
