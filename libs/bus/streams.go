package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	DefaultReplicas            = 1
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
//	replicas 1, duplicate window 2m, file storage
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

	// Replicas of every stream and of the bucket (clustered JetStream).
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
	if l.Replicas <= 0 {
		l.Replicas = DefaultReplicas
	}
	if l.DuplicateWindow <= 0 {
		l.DuplicateWindow = DefaultDuplicateWindow
	}
	return l
}

// StreamConfigs returns the configurations EnsureStreams gives the streams,
// in a fixed order.
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
			Replicas:    l.Replicas,
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
// metrics bucket.
func MetricsBucketConfig(l Limits) jetstream.KeyValueConfig {
	l = l.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      MetricsBucket,
		Description: "Hermod: latest PodMetrics per endpoint",
		History:     1,
		TTL:         l.MetricsTTL,
		MaxBytes:    l.MetricsMaxBytes,
		Storage:     l.Storage,
		Replicas:    l.Replicas,
	}
}

// ensureAttempts bounds the create/update rounds of one stream when other
// services race to create it with other limits.
const ensureAttempts = 5

// EnsureStreams creates Hermod's streams and metrics bucket, or updates
// those whose configuration differs from the one the limits give. It is
// idempotent and safe when several services call it at once. A stream's
// storage type cannot change in place: that fails with the server's error.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, l Limits) error {
	if js == nil {
		return errors.New("ensure streams: nil JetStream")
	}
	for _, cfg := range StreamConfigs(l) {
		if err := ensureStream(ctx, js, cfg); err != nil {
			return err
		}
	}
	return ensureBucket(ctx, js, MetricsBucketConfig(l))
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	for range ensureAttempts {
		s, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // created meanwhile with another config: compare again
			}
			if err != nil {
				return fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("look up stream %s: %w", want.Name, err)
		}
		if streamMatches(s.CachedInfo().Config, want) {
			return nil
		}
		_, err = js.UpdateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("update stream %s: %w", want.Name, err)
		}
		return nil
	}
	return fmt.Errorf("ensure stream %s: still changing after %d attempts", want.Name, ensureAttempts)
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

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	for range ensureAttempts {
		kv, err := js.KeyValue(ctx, want.Bucket)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			_, err = js.CreateKeyValue(ctx, want)
			if errors.Is(err, jetstream.ErrBucketExists) {
				continue
			}
			if err != nil {
				return fmt.Errorf("create bucket %s: %w", want.Bucket, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("read bucket %s: %w", want.Bucket, err)
		}
		if bucketMatches(st, want) {
			return nil
		}
		_, err = js.UpdateKeyValue(ctx, want)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update bucket %s: %w", want.Bucket, err)
		}
		return nil
	}
	return fmt.Errorf("ensure bucket %s: still changing after %d attempts", want.Bucket, ensureAttempts)
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
