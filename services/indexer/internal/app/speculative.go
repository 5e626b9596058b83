package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/telemetry"
)

// followSpeculation adds the speculative entries precise-prefix-cache-
// scorer records on routing decisions (speculativeIndexing): the targets
// will hold the prompt's blocks once they prefill it, a moment before
// their events say so. Only new decisions matter (the entries live
// seconds), so the consumer starts at the stream's end.
func followSpeculation(ctx context.Context, js jetstream.JetStream, pool string, idx *index.Index, reg prometheus.Registerer, log *slog.Logger) (*bus.Consumer, error) {
	subject, err := bus.DecisionsSubject(pool)
	if err != nil {
		return nil, err
	}
	added := telemetry.NewCounter("hermod_indexer_speculative_blocks_total", "Blocks added to the index speculatively from routing decisions.")
	if err := reg.Register(added); err != nil {
		return nil, err
	}
	var keys []blockkey.Key
	return bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: subject, DeliverNew: true, Logger: log},
		func(d *eventsv1.RoutingDecision, _ bus.Meta) {
			for _, e := range d.GetEffects() {
				if !preciseprefix.Records(e.GetType()) || len(e.GetBlocks()) == 0 || e.GetCapacity() <= 0 {
					continue
				}
				keys = keys[:0]
				for _, b := range e.GetBlocks() {
					keys = append(keys, blockkey.Key(b))
				}
				now := time.Now()
				at := d.GetTime().AsTime()
				if at.IsZero() || at.After(now) {
					at = now
				}
				expires := at.Add(time.Duration(e.GetCapacity()) * time.Millisecond).UnixNano()
				for _, pod := range e.GetEndpoints() {
					added.Add(float64(idx.AddSpeculative(pod, keys, now.UnixNano(), expires)))
				}
			}
		})
}
