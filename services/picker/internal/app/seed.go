package app

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
)

// seedMetrics gives the view the latest metrics the bucket holds, so that a
// starting picker does not route blind until the next scrapes arrive.
func seedMetrics(ctx context.Context, js jetstream.JetStream, pool string, set *endpoints.Set) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ms, _, err := bus.LatestMetrics(ctx, js, pool)
	for _, m := range ms {
		set.UpdateMetrics(m)
	}
	set.Flush()
	return len(ms), err
}
