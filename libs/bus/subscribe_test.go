package bus

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

func TestSubscribeDecodesAndCountsErrors(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	filter, err := MetricsFilter("pool.a")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		pool, endpoint string
		waiting        int64
	}
	var (
		mu   sync.Mutex
		msgs []got
	)
	sub, err := Subscribe(e.nc, filter, func(m *eventsv1.PodMetrics, subject string) {
		pool, ep, err := ParseMetricsSubject(subject)
		if err != nil {
			t.Errorf("parse %s: %v", subject, err)
		}
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, got{pool, ep, m.GetWaitingRequests()})
	}, WithRegisterer(reg), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sub.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := e.nc.Flush(); err != nil { // the subscription is live on the server
		t.Fatal(err)
	}
	for i, ep := range []string{"10.0.0.5:8000", "vllm-1"} {
		subject, err := MetricsSubject("pool.a", ep)
		if err != nil {
			t.Fatal(err)
		}
		if err := PublishCore(e.nc, subject, &eventsv1.PodMetrics{Pool: "pool.a", Endpoint: ep, WaitingRequests: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// Another pool, and a payload that does not decode.
	other, _ := MetricsSubject("pool.b", "x")
	if err := PublishCore(e.nc, other, &eventsv1.PodMetrics{}); err != nil {
		t.Fatal(err)
	}
	bad, _ := MetricsSubject("pool.a", "bad")
	if err := e.nc.Publish(bad, []byte("not a protobuf")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "decode error not counted", func() bool {
		return metricValue(t, reg, "hermod_bus_decode_errors_total", "stream", filter) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	want := []got{{"pool.a", "10.0.0.5:8000", 1}, {"pool.a", "vllm-1", 2}}
	if len(msgs) != len(want) || msgs[0] != want[0] || msgs[1] != want[1] {
		t.Fatalf("got %v, want %v", msgs, want)
	}
}

func TestSubscribeCloseStopsHandler(t *testing.T) {
	t.Parallel()
	e := integration(t)
	subject, _ := ConfigSubject("p")
	var (
		mu    sync.Mutex
		calls int
	)
	sub, err := Subscribe(e.nc, subject, func(*eventsv1.ConfigStatus, string) {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := PublishCore(e.nc, subject, &eventsv1.ConfigStatus{Pool: "p", Accepted: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no message", func() bool { mu.Lock(); defer mu.Unlock(); return calls == 1 })
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := PublishCore(e.nc, subject, &eventsv1.ConfigStatus{Pool: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d calls after Close", calls-1)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestSubscribeStopsWithConnection(t *testing.T) {
	t.Parallel()
	e := integration(t)
	sub, err := Subscribe(e.nc, "hermod.config.>", func(*eventsv1.ConfigStatus, string) {})
	if err != nil {
		t.Fatal(err)
	}
	e.nc.Close()
	waitClosed(t, sub.done, "subscription done")
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSubscribeRejectsBadArguments(t *testing.T) {
	if _, err := Subscribe[*eventsv1.ConfigStatus](nil, "x", func(*eventsv1.ConfigStatus, string) {}); err == nil {
		t.Fatal("nil connection accepted")
	}
}
