package leastrequest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/leastrequest"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	_ "github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/testkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const config = `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: valkey-least-request-picker
  parameters:
    maxInflightPerEndpoint: 2
    maxNumOfEndpoints: 2
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: valkey-least-request-picker
`

func newScheduler(t *testing.T, c leastrequest.Counter) *scheduling.Scheduler {
	t.Helper()
	cfg, err := scheduling.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduling.New(cfg, leastrequest.StoreService.Provide(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func fleet(waiting ...int) []*scheduling.Endpoint {
	var eps []*scheduling.Endpoint
	for i, w := range waiting {
		e := scheduling.NewEndpoint(fmt.Sprintf("pod-%d", i), "10.0.0.1", 8000+i, nil)
		eps = append(eps, e.WithMetrics(&scheduling.Metrics{WaitingRequests: w}))
	}
	return eps
}

func schedule(t *testing.T, s *scheduling.Scheduler, id string, eps []*scheduling.Endpoint) (*scheduling.Result, error) {
	t.Helper()
	req, err := schedulingtest.ParseRequest(openai.APICompletions, []byte(`{"model":"m","prompt":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.ID = id
	return s.Schedule(context.Background(), req, eps)
}

func TestPicksThroughTheServerAndFallsBackWithoutIt(t *testing.T) {
	srv := redistest.Start(t)
	opt, _ := valkey.ParseURL(srv.URL())
	opt.DisableCache = true
	c, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := inflight.New(c, "p", 0)
	s := newScheduler(t, store)
	eps := fleet(0, 3, 0) // pod-1 queues: scores order pod-0, pod-2 first
	var picks []string
	for i := range 6 {
		res, err := schedule(t, s, fmt.Sprint("r", i), eps)
		if err != nil {
			t.Fatal(err)
		}
		picks = append(picks, res.Target().Endpoint.Name)
		if len(res.Primary.Targets) != 2 {
			t.Fatalf("targets %v: want a fallback", res.Primary.Targets)
		}
		res.Release()
	}
	// least in flight first, score order on ties; at most 2 each
	if fmt.Sprint(picks) != "[pod-0 pod-2 pod-1 pod-0 pod-2 pod-1]" {
		t.Fatalf("picks %v", picks)
	}
	if _, err := schedule(t, s, "r6", eps); err == nil {
		t.Fatal("every pod at maxInflightPerEndpoint: the request must be shed")
	}
	// completions release (a second report counts once)
	for _, id := range []string{"r0", "r0", "r3"} {
		s.ResponseComplete(context.Background(), &scheduling.Response{RequestID: id})
	}
	// sent by the releaser, off the caller's path
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m, _ := store.Counts(context.Background())
		if m["pod-0"] == 0 && m["pod-1"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %v", m)
		}
	}
	// the server goes away: picks keep coming, from scores
	srv.Stop()
	start := time.Now()
	for i := range 5 {
		res, err := schedule(t, s, fmt.Sprint("down", i), eps)
		if err != nil {
			t.Fatalf("pick without the server: %v", err)
		}
		if name := res.Target().Endpoint.Name; name == "pod-1" {
			t.Fatalf("fallback picked %s, want the best score", name)
		}
		res.Release()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("5 picks without the server took %v", d)
	}
	// it comes back (empty): picks go through it again after retryInterval
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := schedule(t, s, fmt.Sprint("back", time.Now().UnixNano()), eps)
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
		if m, _ := store.Counts(context.Background()); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("picks did not return to the server")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestValidatesOffline(t *testing.T) {
	s := newScheduler(t, leastrequest.Offline{})
	res, err := schedule(t, s, "r", fleet(1, 0))
	if err != nil || res.Target().Endpoint.Name != "pod-1" {
		t.Fatalf("offline: %v %v", res, err)
	}
	res.Release()
	cfg, _ := scheduling.ParseConfig([]byte(config))
	if _, err := scheduling.New(cfg); err == nil {
		t.Fatal("loaded without the in-flight service")
	}
}

// stalled is an in-flight server that answers every pick after delay.
type stalled struct {
	delay time.Duration
	n     atomic.Int64
}

func (s *stalled) Pick(ctx context.Context, _ string, candidates []string, _ int) (string, int64, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return "", 0, ctx.Err()
	}
	return candidates[int(s.n.Add(1))%len(candidates)], 1, nil
}

func (s *stalled) Release(context.Context, ...string) (int, error) { return 0, nil }

// Picks through a slow in-flight server (2 ms a round trip) from many
// goroutines: the round trip waits outside the scheduler's lock, so picks
// overlap instead of queueing behind one another (held inside it, the
// pool managed one pick per round trip: about 500 picks/s).
func BenchmarkPickStalledServer(b *testing.B) {
	cfg, err := scheduling.ParseConfig([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	s, err := scheduling.New(cfg, leastrequest.StoreService.Provide(&stalled{delay: 2 * time.Millisecond}))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	eps := fleet(0, 1, 2, 3)
	body := []byte(`{"model":"m","prompt":"hello"}`)
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := schedulingtest.ParseRequest(openai.APICompletions, body)
			if err != nil {
				b.Error(err)
				return
			}
			req.ID = fmt.Sprint("r", seq.Add(1))
			res, err := s.Schedule(context.Background(), req, eps)
			if err != nil {
				b.Error(err)
				return
			}
			res.Release()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "picks/s")
}

// gated holds the pick of request "slow" until released.
type gated struct {
	arrived, release chan struct{}
}

func (g *gated) Pick(ctx context.Context, id string, candidates []string, _ int) (string, int64, error) {
	if id == "slow" {
		close(g.arrived)
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", 0, ctx.Err()
		}
	}
	return candidates[0], 1, nil
}

func (g *gated) Release(context.Context, ...string) (int, error) { return 0, nil }

// While one pick waits on the in-flight server, other picks of the pool
// are decided: the round trip is outside the scheduler's lock.
func TestPickWaitsOutsideTheLock(t *testing.T) {
	cfg, err := scheduling.ParseConfig([]byte(strings.Replace(config, "maxNumOfEndpoints: 2", "maxNumOfEndpoints: 2\n    timeout: 10s", 1)))
	if err != nil {
		t.Fatal(err)
	}
	g := &gated{arrived: make(chan struct{}), release: make(chan struct{})}
	s, err := scheduling.New(cfg, leastrequest.StoreService.Provide(g))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	eps := fleet(0, 0)
	slow := make(chan error, 1)
	go func() {
		res, err := schedule(t, s, "slow", eps)
		if err == nil {
			res.Release()
		}
		slow <- err
	}()
	<-g.arrived
	fast := make(chan error, 1)
	go func() {
		res, err := schedule(t, s, "fast", eps)
		if err == nil {
			res.Release()
		}
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(g.release)
		t.Fatal("a pick waited for another pick's round trip to the in-flight server")
	}
	close(g.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}
