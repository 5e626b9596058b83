package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// stopPod stops a pod's ingest and returns its state (to read its
// sequencer's counts).
func stopPod(t *testing.T, mg *Manager, name string) *pod {
	t.Helper()
	mg.mu.RLock()
	p := mg.pods[name]
	mg.mu.RUnlock()
	if p == nil {
		t.Fatalf("no ingest of %s", name)
	}
	stopAll([]*pod{p})
	return p
}

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the lines at level whose attributes include every one of
// match.
func (b *logBuffer) lines(t *testing.T, level string, match map[string]string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.buf.String()
	b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] != level {
			continue
		}
		ok := true
		for k, v := range match {
			if fmt.Sprint(rec[k]) != v {
				ok = false
			}
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// metricValue reads a metric's value from reg: the series whose labels
// include labels (nil name and label pairs: the one series); ok is false
// when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s)", what, d, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runCentral runs a centralized ingest on a free port until the test
// ends (or stop is called) and returns its endpoint.
func runCentral(t *testing.T, mg *Manager) (endpoint string, c *Central, stop func()) {
	t.Helper()
	endpoint = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	c = mg.NewCentral(endpoint, "")
	return endpoint, c, startCentral(t, c)
}

// startCentral runs c until the returned stop is called (at the latest
// when the test ends). A bind that fails is tried again for a while: a
// port just closed (an indexer restarting in the test) takes libzmq a
// moment to let go of.
func startCentral(t *testing.T, c *Central) func() {
	t.Helper()
	var (
		ctx    context.Context
		cancel context.CancelFunc
		done   chan error
	)
	for deadline := time.Now().Add(3 * time.Second); ; {
		ctx, cancel = context.WithCancel(context.Background())
		bound := make(chan error, 1)
		done = make(chan error, 1)
		go func() { done <- c.Run(ctx, bound) }()
		err := <-bound
		if err == nil {
			break
		}
		if runErr := <-done; runErr != nil {
			err = runErr
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// connectPod is a pod in centralized mode: its PUB connects to endpoint
// with topic kv@<name>@m, and it serves replays on a port of its own
// (replay is "" when it offers none).
func connectPod(t *testing.T, endpoint, name string, withReplay bool) (pub *kvzmq.Publisher, replay string) {
	t.Helper()
	cfg := kvzmq.PublisherConfig{Endpoint: endpoint, Topic: "kv@" + name + "@" + model}
	if withReplay {
		port := freePort(t)
		cfg.ReplayEndpoint, replay = fmt.Sprintf("tcp://*:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port)
	}
	pub, err := kvzmq.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub, replay
}

// seqsOf returns the sequence numbers the sink got for pod, "R" marking a
// reset.
func seqsOf(s *gatedSink, pod string) []string {
	var out []string
	for _, b := range s.batches() {
		if b.GetPod() != pod {
			continue
		}
		mark := ""
		if b.GetClearPod() {
			mark = "R"
		}
		out = append(out, fmt.Sprintf("%s%d", mark, b.GetSeq()))
	}
	return out
}

// seqRange is the seqsOf of batches from..to, the first reset if reset.
func seqRange(from, to uint64, reset bool) []string {
	var out []string
	for s := from; s <= to; s++ {
		mark := ""
		if reset && s == from {
			mark = "R"
		}
		out = append(out, fmt.Sprintf("%s%d", mark, s))
	}
	return out
}

func openSink() *gatedSink {
	s := newGatedSink()
	close(s.gate)
	return s
}
