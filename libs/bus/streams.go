package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/libs/retry"
)

// Names of the streams and of the metrics KV bucket.
const (
	KVStream          = "HERMOD_KV"
	DecisionsStream   = "HERMOD_DECISIONS"
	CompletionsStream = "HERMOD_COMPLETIONS"
	ScalingStream     = "HERMOD_SCALING"
	MetricsBucket     = "HERMOD_METRICS"
)

// Default limits (see DefaultLimits).
const (
	gib = 1 << 30
	mib = 1 << 20

	DefaultDecisionsMaxAge     = 24 * time.Hour
	DefaultDecisionsMaxBytes   = 1 * gib
	DefaultCompletionsMaxAge   = 24 * time.Hour
	DefaultCompletionsMaxBytes = 1 * gib
	DefaultKVMaxAge            = time.Hour
	DefaultKVMaxBytes          = 1 * gib
	DefaultScalingMaxAge       = 30 * 24 * time.Hour
	DefaultScalingMaxBytes     = 64 * mib
	DefaultMetricsTTL          = time.Minute
	DefaultMetricsMaxBytes     = 64 * mib
	DefaultDuplicateWindow     = 2 * time.Minute
	// DefaultReplicas is the replica count of a stream EnsureStreams
	// creates when Limits.Replicas is 0.
	DefaultReplicas = 1
	// MaxReplicas is the largest replica count JetStream allows.
	MaxReplicas = 5
)

// StreamLimits bound one stream: the oldest messages are discarded when
// either limit is reached.
type StreamLimits struct {
	// MaxAge is how long a message is kept.
	MaxAge time.Duration
	// MaxBytes is the size of the stream.
	MaxBytes int64
}

// Limits are the limits of Hermod's streams and metrics bucket. A zero field
// takes its default (DefaultLimits):
//
//	HERMOD_DECISIONS    24h, 1 GiB   (audit and picker projections)
//	HERMOD_COMPLETIONS  24h, 1 GiB
//	HERMOD_KV           1h, 1 GiB    (KV-cache events; the index is rebuilt from the tail)
//	HERMOD_SCALING      30 days, 64 MiB
//	HERMOD_METRICS      TTL 1m, 64 MiB, history 1 (latest PodMetrics per endpoint)
//	replicas: kept (1 when created), duplicate window 2m, file storage
//
// Replicas and placement: with Replicas R, every stream and the bucket are
// stored on R JetStream servers of the cluster (R ≤ the number of
// servers, at most MaxReplicas; JetStream picks the servers and one of
// them leads). A publish is acknowledged once a majority of the R replicas
// stored it, so an acknowledged event survives the loss of a minority: an
// R3 stream keeps serving with 2 of its 3 servers (a new leader is elected
// within seconds when the leader goes, and the publishers retry
// meanwhile), and a server that comes back catches up before it counts
// again. With 1 of 3 left the stream refuses writes (no quorum) until
// another returns; nothing acknowledged is lost. R1 streams are lost while
// their one server is down. Consumers of the bus are ordered consumers:
// ephemeral, R1 in memory, and recreated by the client from the last
// delivered sequence when their server goes, so they need no replicas.
type Limits struct {
	Decisions   StreamLimits
	Completions StreamLimits
	KV          StreamLimits
	Scaling     StreamLimits

	// MetricsTTL is how long an endpoint's latest metrics stay in the
	// HERMOD_METRICS bucket without being replaced, so that dead endpoints
	// age out. MetricsMaxBytes bounds the bucket.
	MetricsTTL      time.Duration
	MetricsMaxBytes int64

	// Replicas of every stream and of the bucket (clustered JetStream,
	// 1..MaxReplicas). 0 keeps the replica count of the streams that exist
	// and creates missing ones with DefaultReplicas, so that a service
	// started without the setting does not undo it; any other value
	// scales the streams up or down in place.
	Replicas int
	// DuplicateWindow is how long a stream remembers the Nats-Msg-Id of the
	// messages it stored, so that a republished event is dropped (capped at
	// each stream's MaxAge).
	DuplicateWindow time.Duration
	// Storage of the streams and the bucket: jetstream.FileStorage (the
	// zero value, the default) or jetstream.MemoryStorage.
	Storage jetstream.StorageType
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	def := func(s *StreamLimits, age time.Duration, bytes int64) {
		if s.MaxAge <= 0 {
			s.MaxAge = age
		}
		if s.MaxBytes <= 0 {
			s.MaxBytes = bytes
		}
	}
	def(&l.Decisions, DefaultDecisionsMaxAge, DefaultDecisionsMaxBytes)
	def(&l.Completions, DefaultCompletionsMaxAge, DefaultCompletionsMaxBytes)
	def(&l.KV, DefaultKVMaxAge, DefaultKVMaxBytes)
	def(&l.Scaling, DefaultScalingMaxAge, DefaultScalingMaxBytes)
	if l.MetricsTTL <= 0 {
		l.MetricsTTL = DefaultMetricsTTL
	}
	if l.MetricsMaxBytes <= 0 {
		l.MetricsMaxBytes = DefaultMetricsMaxBytes
	}
	if l.DuplicateWindow <= 0 {
		l.DuplicateWindow = DefaultDuplicateWindow
	}
	return l
}

// replicas returns the replica count of the streams EnsureStreams creates.
func (l Limits) replicas() int {
	if l.Replicas <= 0 {
		return DefaultReplicas
	}
	return l.Replicas
}

// StreamConfigs returns the configurations EnsureStreams gives the streams
// it creates, in a fixed order.
func StreamConfigs(l Limits) []jetstream.StreamConfig {
	l = l.withDefaults()
	cfg := func(name, desc, subjects string, s StreamLimits) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subjects},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      s.MaxAge,
			MaxBytes:    s.MaxBytes,
			MaxMsgs:     -1,
			Storage:     l.Storage,
			Replicas:    l.replicas(),
			Duplicates:  min(l.DuplicateWindow, s.MaxAge),
			AllowDirect: true,
		}
	}
	return []jetstream.StreamConfig{
		cfg(KVStream, "Hermod: KV-cache events per pod", KVPrefix+">", l.KV),
		cfg(DecisionsStream, "Hermod: routing decisions per pool", DecisionsPrefix+">", l.Decisions),
		cfg(CompletionsStream, "Hermod: completed requests per pool", CompletionsPrefix+">", l.Completions),
		cfg(ScalingStream, "Hermod: scaling decisions per pool", ScalingPrefix+">", l.Scaling),
	}
}

// MetricsBucketConfig returns the configuration EnsureStreams gives the
// metrics bucket when it creates it.
func MetricsBucketConfig(l Limits) jetstream.KeyValueConfig {
	l = l.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      MetricsBucket,
		Description: "Hermod: latest PodMetrics per endpoint",
		History:     1,
		TTL:         l.MetricsTTL,
		MaxBytes:    l.MetricsMaxBytes,
		Storage:     l.Storage,
		Replicas:    l.replicas(),
	}
}

// ensureAttempts bounds the create/update rounds of one stream when other
// services race to create it with other limits.
const ensureAttempts = 5

// lookupTimeout bounds one request of Lookup. A JetStream API request sent
// while the stream (or JetStream's meta layer) has no leader, as when a
// cluster has just restarted or a stream was just created, gets no answer,
// not an error: it is sent again, until the caller's context ends, rather
// than waited on.
var lookupTimeout = 2 * time.Second

// Lookup runs get, a JetStream request that is safe to repeat (a stream's
// or bucket's info, a listing), with a 2 s bound, and again after a short
// backoff while it gets no answer (a timeout or no responders), until ctx
// ends. Other errors return at once.
func Lookup[T any](ctx context.Context, get func(context.Context) (T, error)) (T, error) {
	bo := retry.Backoff(50*time.Millisecond, time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, lookupTimeout)
		v, err := get(actx)
		cancel()
		unanswered := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
		if err == nil || !unanswered || ctx.Err() != nil || !retry.Sleep(ctx, bo.NextBackOff()) {
			return v, err
		}
	}
}

// EnsureStreams creates Hermod's streams and metrics bucket, or updates
// those whose configuration differs from the one the limits give. It is
// idempotent and safe when several services call it at once. A stream's
// storage type cannot change in place: that fails with the server's error;
// so do more replicas than the cluster has JetStream servers.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, l Limits) error {
	if js == nil {
		return errors.New("ensure streams: nil JetStream")
	}
	if l.Replicas < 0 || l.Replicas > MaxReplicas {
		return fmt.Errorf("ensure streams: replicas %d: %w", l.Replicas, ErrInvalidReplicas)
	}
	keep := l.Replicas == 0
	for _, cfg := range StreamConfigs(l) {
		if err := ensureStream(ctx, js, cfg, keep); err != nil {
			return err
		}
	}
	return ensureBucket(ctx, js, MetricsBucketConfig(l), keep)
}

// ErrInvalidReplicas reports a replica count outside 0..MaxReplicas.
var ErrInvalidReplicas = errors.New("stream replicas must be 1 to 5, or 0 to keep them")

// ensureStream creates or updates a stream; keepReplicas leaves an
// existing stream's replica count as it is.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, keepReplicas bool) error {
	_, err := createOrUpdate(ctx, ensureOps[jetstream.Stream]{
		what:     "stream " + want.Name,
		replicas: &want.Replicas,
		notFound: jetstream.ErrStreamNotFound,
		exists:   jetstream.ErrStreamNameAlreadyInUse,
		get:      func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, want.Name) },
		create:   func(ctx context.Context) (jetstream.Stream, error) { return js.CreateStream(ctx, want) },
		update:   func(ctx context.Context) (jetstream.Stream, error) { return js.UpdateStream(ctx, want) },
		current: func(_ context.Context, s jetstream.Stream) (int, bool, error) {
			have := s.CachedInfo().Config
			if keepReplicas {
				want.Replicas = have.Replicas
			}
			return have.Replicas, streamMatches(have, want), nil
		},
	})
	return err
}

// streamMatches says whether a stream's configuration has every setting
// EnsureStreams manages as wanted.
func streamMatches(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) &&
		have.Description == want.Description &&
		have.Retention == want.Retention &&
		have.Discard == want.Discard &&
		have.MaxAge == want.MaxAge &&
		have.MaxBytes == want.MaxBytes &&
		have.MaxMsgs == want.MaxMsgs &&
		have.Storage == want.Storage &&
		have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates &&
		have.AllowDirect == want.AllowDirect
}

// ensureBucket creates or updates the bucket; keepReplicas leaves an
// existing bucket's replica count as it is.
func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, keepReplicas bool) error {
	_, err := createOrUpdate(ctx, ensureOps[jetstream.KeyValue]{
		what:     "bucket " + want.Bucket,
		replicas: &want.Replicas,
		notFound: jetstream.ErrBucketNotFound,
		exists:   jetstream.ErrBucketExists,
		get:      func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, want.Bucket) },
		create:   func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateKeyValue(ctx, want) },
		update:   func(ctx context.Context) (jetstream.KeyValue, error) { return js.UpdateKeyValue(ctx, want) },
		current: func(ctx context.Context, kv jetstream.KeyValue) (int, bool, error) {
			st, err := Lookup(ctx, kv.Status)
			if err != nil {
				return 0, false, err
			}
			bs, ok := st.(*jetstream.KeyValueBucketStatus)
			if !ok || bs.StreamInfo() == nil {
				return 0, false, nil
			}
			have := bs.StreamInfo().Config.Replicas
			if keepReplicas {
				want.Replicas = have
			}
			return have, bucketMatches(st, want), nil
		},
	})
	return err
}

func bucketMatches(st jetstream.KeyValueStatus, want jetstream.KeyValueConfig) bool {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return false
	}
	have := bs.StreamInfo().Config
	return have.Description == want.Description &&
		have.MaxMsgsPerSubject == int64(want.History) &&
		have.MaxAge == want.TTL &&
		have.MaxBytes == want.MaxBytes &&
		have.Storage == want.Storage &&
		have.Replicas == want.Replicas
}

// EnsureObjectStore opens an object store, creating it with want when it
// does not exist and updating it when its description, storage or replica
// count differ. want.Replicas 0 keeps an existing store's replica count
// (DefaultReplicas when created), as Limits.Replicas does for the streams.
// Its look-ups are asked again while unanswered, as EnsureStreams' are.
func EnsureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if js == nil {
		return nil, errors.New("ensure object store: nil JetStream")
	}
	if want.Replicas < 0 || want.Replicas > MaxReplicas {
		return nil, fmt.Errorf("ensure object store %s: replicas %d: %w", want.Bucket, want.Replicas, ErrInvalidReplicas)
	}
	keep := want.Replicas == 0
	if keep {
		want.Replicas = DefaultReplicas
	}
	return createOrUpdate(ctx, ensureOps[jetstream.ObjectStore]{
		what:     "object store " + want.Bucket,
		replicas: &want.Replicas,
		notFound: jetstream.ErrBucketNotFound,
		exists:   jetstream.ErrBucketExists,
		get:      func(ctx context.Context) (jetstream.ObjectStore, error) { return js.ObjectStore(ctx, want.Bucket) },
		create:   func(ctx context.Context) (jetstream.ObjectStore, error) { return js.CreateObjectStore(ctx, want) },
		update:   func(ctx context.Context) (jetstream.ObjectStore, error) { return js.UpdateObjectStore(ctx, want) },
		current: func(ctx context.Context, obs jetstream.ObjectStore) (int, bool, error) {
			st, err := Lookup(ctx, obs.Status)
			if err != nil {
				return 0, false, err
			}
			if keep {
				want.Replicas = st.Replicas()
			}
			return st.Replicas(), st.Description() == want.Description && st.Storage() == want.Storage && st.Replicas() == want.Replicas, nil
		},
	})
}

// ensureOps are the requests that create or update one stream or bucket
// of type T.
type ensureOps[T any] struct {
	// what names it in errors ("stream HERMOD_KV").
	what string
	// replicas is the replica count of the configuration create and
	// update ask for (current may change it).
	replicas *int
	// notFound is get's and update's error when it does not exist, exists
	// create's when it was created meanwhile.
	notFound, exists error
	get              func(context.Context) (T, error)
	create, update   func(context.Context) (T, error)
	// current returns the existing one's replica count and whether its
	// configuration is the wanted one; it may adjust the configuration
	// update asks for (to keep the replica count).
	current func(context.Context, T) (replicas int, matches bool, err error)
}

// createOrUpdate creates the stream or bucket when get does not find it,
// and updates it when its configuration differs, again (up to
// ensureAttempts rounds) while others create or delete it meanwhile. Its
// look-up is asked again while unanswered (Lookup).
func createOrUpdate[T any](ctx context.Context, o ensureOps[T]) (T, error) {
	var zero T
	for range ensureAttempts {
		v, err := Lookup(ctx, o.get)
		switch {
		case errors.Is(err, o.notFound):
			v, err = o.create(ctx)
			if errors.Is(err, o.exists) {
				continue // created meanwhile: compare again
			}
			if err != nil {
				return zero, fmt.Errorf("create %s with %d replicas: %w", o.what, *o.replicas, err)
			}
			return v, nil
		case err != nil:
			return zero, fmt.Errorf("look up %s: %w", o.what, err)
		}
		have, matches, err := o.current(ctx, v)
		if err != nil {
			return zero, fmt.Errorf("read %s: %w", o.what, err)
		}
		if matches {
			return v, nil
		}
		v, err = o.update(ctx)
		if errors.Is(err, o.notFound) {
			continue // deleted meanwhile
		}
		if err != nil && have != *o.replicas {
			return zero, fmt.Errorf("update %s (replicas %d to %d): %w", o.what, have, *o.replicas, err)
		}
		if err != nil {
			return zero, fmt.Errorf("update %s: %w", o.what, err)
		}
		return v, nil
	}
	return zero, fmt.Errorf("ensure %s: still changing after %d attempts", o.what, ensureAttempts)
}
