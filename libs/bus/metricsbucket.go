package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// PutLatestMetrics stores m as its endpoint's latest metrics in the
// HERMOD_METRICS bucket.
func PutLatestMetrics(ctx context.Context, kv jetstream.KeyValue, m *eventsv1.PodMetrics) error {
	key, err := MetricsKey(m.GetPool(), m.GetEndpoint())
	if err != nil {
		return err
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode metrics of %s: %w", key, err)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("put %s in %s: %w", key, MetricsBucket, err)
	}
	return nil
}

// LatestMetrics reads the latest metrics of every endpoint of a pool from
// the HERMOD_METRICS bucket (entries that do not decode are skipped and
// counted in skipped). ctx bounds the whole read.
func LatestMetrics(ctx context.Context, js jetstream.JetStream, pool string) (ms []*eventsv1.PodMetrics, skipped int, err error) {
	filter, err := MetricsKeyFilter(pool)
	if err != nil {
		return nil, 0, err
	}
	kv, err := js.KeyValue(ctx, MetricsBucket)
	if err != nil {
		return nil, 0, fmt.Errorf("open bucket %s: %w", MetricsBucket, err)
	}
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, 0, fmt.Errorf("read bucket %s: %w", MetricsBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ms, skipped, fmt.Errorf("read bucket %s: %w", MetricsBucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return ms, skipped, fmt.Errorf("read bucket %s: watcher stopped", MetricsBucket)
			}
			if e == nil { // every current value delivered
				return ms, skipped, nil
			}
			m := &eventsv1.PodMetrics{}
			if err := proto.Unmarshal(e.Value(), m); err != nil {
				skipped++
				continue
			}
			ms = append(ms, m)
		}
	}
}
