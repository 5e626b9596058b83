package scrape

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermod/hermod/libs/enginemetrics"
)

// BenchmarkScrape runs one whole scrape of a pod serving a captured
// vllm-sim exposition over a real loopback connection: request, body,
// parse, PodMetrics, publish.
func BenchmarkScrape(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "enginemetrics", "testdata", "vllm-sim.prom"))
	if err != nil {
		b.Fatal(err)
	}
	p := newPod(b, string(body))
	s, err := New(Config{Sink: discard, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tg, err := newTarget(p.endpoint("pool", "pod"))
	if err != nil {
		b.Fatal(err)
	}
	l := &metricsLoop{s: s, t: tg, parser: enginemetrics.NewParser(), streak: streak{log: s.log, kind: kindMetrics}}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		l.scrape(ctx)
	}
	if l.failures > 0 {
		b.Fatalf("%d failed scrapes", l.failures)
	}
}
