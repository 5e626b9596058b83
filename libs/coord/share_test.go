package coord

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/testkit/coordtest"
)

// shareRecorder keeps the last share Assign handed a replica.
type shareRecorder struct {
	mu   sync.Mutex
	mine []string
	seen int // snapshots OnEndpoints got
}

func (r *shareRecorder) assign(eps []*registryv1.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mine = r.mine[:0]
	for _, ep := range eps {
		r.mine = append(r.mine, ep.GetName())
	}
}

func (r *shareRecorder) get() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mine), r.seen
}

// Two replicas split the pool's endpoints between them, every endpoint
// to one; when one leaves, the other takes them all.
func TestShare(t *testing.T) {
	cli, _ := coordtest.Start(t)
	ctx := context.Background()
	const pool = "share"
	var names []string
	for i := range 8 {
		ep := testEndpoint(pool, fmt.Sprintf("vllm-%d", i))
		if _, err := Register(ctx, cli, ep, longTTL, WithLogger(testLogger(t))); err != nil {
			t.Fatal(err)
		}
		names = append(names, ep.GetName())
	}
	recs := []*shareRecorder{{}, {}}
	shares := make([]*Sharing, 2)
	for i, r := range recs {
		s, err := Share(ctx, cli, ShareOptions{Pool: pool, Group: "test-" + pool, Replica: fmt.Sprintf("r%d", i), TTL: longTTL, Assign: r.assign,
			OnEndpoints: func(Snapshot) { r.mu.Lock(); r.seen++; r.mu.Unlock() }}, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		shares[i] = s
	}
	eventually(t, 10*time.Second, "the endpoints split between two replicas", func() bool {
		a, sa := recs[0].get()
		b, sb := recs[1].get()
		all := append(a, b...)
		slices.Sort(all)
		return len(a) > 0 && len(b) > 0 && slices.Equal(all, names) && sa > 0 && sb > 0
	})
	if err := shares[0].Ready(); err != nil {
		t.Errorf("ready: %v", err)
	}
	shares[1].Close()
	eventually(t, 10*time.Second, "the remaining replica takes every endpoint", func() bool {
		a, _ := recs[0].get()
		return slices.Equal(a, names)
	})
	shares[0].Close()
}
