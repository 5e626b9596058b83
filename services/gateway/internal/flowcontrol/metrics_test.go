package flowcontrol

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// A request's way through flow control in GIE's family: counted and sized
// while queued, then its time by outcome; the pool saturation gauge.
func TestFlowControlMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, "pool-a", func() float64 { return 0.75 })
	c := full(t, Config{Queueing: true, Metrics: m})
	done := make(chan error, 1)
	go func() {
		done <- c.Acquire(context.Background(), Request{Priority: 2, Flow: "tenant-a", Model: "llama", Bytes: 300, TTL: 30 * time.Millisecond})
	}()
	waitQueued(t, c, 1)
	if got := testutil.ToFloat64(m.queueSize.WithLabelValues("tenant-a", "2", "pool-a", "llama", "llama")); got != 1 {
		t.Errorf("queue size %v while queued", got)
	}
	if got := testutil.ToFloat64(m.queueBytes.WithLabelValues("tenant-a", "2", "pool-a", "llama", "llama")); got != 300 {
		t.Errorf("queue bytes %v while queued", got)
	}
	if err := <-done; err == nil {
		t.Fatal("no TTL eviction")
	}
	if got := testutil.ToFloat64(m.queueSize.WithLabelValues("tenant-a", "2", "pool-a", "llama", "llama")); got != 0 {
		t.Errorf("queue size %v after the eviction", got)
	}
	_ = c.Acquire(context.Background(), Request{Priority: -1, Model: "llama"}) // shed at once
	want := `
# HELP inference_extension_flow_control_pool_saturation [ALPHA] Current saturation level of the inference pool.
# TYPE inference_extension_flow_control_pool_saturation gauge
inference_extension_flow_control_pool_saturation{inference_pool="pool-a"} 0.75
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inference_extension_flow_control_pool_saturation"); err != nil {
		t.Error(err)
	}
	count := func(labels ...string) uint64 {
		var d dto.Metric
		if err := m.queueDuration.WithLabelValues(labels...).(prometheus.Histogram).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount()
	}
	if n := count("tenant-a", "2", OutcomeEvictedTTL, "pool-a", "llama", "llama"); n != 1 {
		t.Errorf("EvictedTTL observations %d", n)
	}
	if n := count(DefaultFlow, "-1", OutcomeRejectedCapacity, "pool-a", "llama", "llama"); n != 1 {
		t.Errorf("RejectedCapacity observations %d", n)
	}
	if n := testutil.CollectAndCount(m.dispatchCycle); n != 1 {
		t.Errorf("dispatch cycle series %d", n)
	}
}

// Labels a client chooses are bounded: past giemetrics.MaxLabelValues
// fairness ids, the rest share "other".
func TestFlowControlMetricLabelsAreBounded(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), "pool-a", nil)
	c := full(t, Config{Queueing: true, QueueSheddable: true, Metrics: m, MaxQueued: 5000})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1100)
	for i := range 1100 {
		go func() {
			done <- c.Acquire(ctx, Request{Flow: fmt.Sprint("tenant-", i), Priority: i, Model: fmt.Sprint("m", i)})
		}()
	}
	waitQueued(t, c, 1100)
	// each label keeps at most 1000 values besides "other"
	values := map[string]map[string]bool{}
	ch := make(chan prometheus.Metric, 4096)
	go func() { m.queueSize.Collect(ch); close(ch) }()
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if values[l.GetName()] == nil {
				values[l.GetName()] = map[string]bool{}
			}
			values[l.GetName()][l.GetValue()] = true
		}
	}
	for _, name := range []string{"fairness_id", "priority", "model_name"} {
		if n := len(values[name]); n > 1001 || n < 1000 {
			t.Errorf("label %s has %d values for 1100 clients' choices, want 1000 and other", name, n)
		}
	}
	cancel()
	for range 1100 {
		if err := <-done; err == nil {
			t.Fatal("a waiter of a saturated pool was dispatched")
		}
	}
	if n := testutil.CollectAndCount(m.queueSize); n != maxIdleSeries {
		t.Errorf("%d queue-size series once the queue is empty, want the %d most recent kept at 0", n, maxIdleSeries)
	}
	if n := testutil.CollectAndCount(m.enqueueDuration); n > 1001*2 {
		t.Errorf("%d enqueue-duration series", n)
	}
}
