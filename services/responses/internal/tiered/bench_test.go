package tiered

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/mongotest"
	"github.com/hermod/hermod/testkit/redistest"
)

// BenchmarkPutGet: a 4 KiB response stored and read back against a
// loopback redis-server (tier 1, with the stream append of tier 2).
// Reports p50/p99 of each call.
func BenchmarkPutGet(b *testing.B) {
	rs, ms := redistest.Start(b), mongotest.Run(b)
	cfg := config(b, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q}}}`, rs.URL(), ms.URI()))
	s, err := New(context.Background(), cfg, Options{Consumer: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	body := strings.Repeat("x", 4096)
	puts, gets := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("resp_%d", i)
		t0 := time.Now()
		if err := s.Put(ctx, rec(id, "", body)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := s.Get(ctx, id); err != nil {
			b.Fatal(err)
		}
		puts, gets = append(puts, t1.Sub(t0)), append(gets, time.Since(t1))
	}
	b.StopTimer()
	report(b, "put", puts)
	report(b, "get", gets)
}

func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-µs")
}

// BenchmarkSync: documents per second from the stream into MongoDB
// (FerretDB on SQLite), and the lag of the last document.
func BenchmarkSync(b *testing.B) {
	rs, ms := redistest.Start(b), mongotest.Run(b)
	cfg := config(b, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q,"timeout":"5s"},"stream":{"blockTimeout":"20ms"}}}`, rs.URL(), ms.URI()))
	s, err := New(context.Background(), cfg, Options{Consumer: "bench", NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	for i := range b.N {
		if err := s.Put(ctx, rec(fmt.Sprintf("resp_%d", i), "", strings.Repeat("x", 1024))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.NewWorker("w").Run(wctx) }()
	for {
		n, err := s.mongo.count(ctx)
		if err == nil && n == int64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "docs/s")
}

// BenchmarkSyncLagSteady: writes at a steady 1000/s while a worker syncs;
// reports the sync lag (age of the oldest entry not yet in MongoDB)
// sampled every 50 ms: its p50 and maximum.
func BenchmarkSyncLagSteady(b *testing.B) {
	rs, ms := redistest.Start(b), mongotest.Run(b)
	cfg := config(b, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q,"timeout":"5s"},"stream":{"blockTimeout":"20ms"}}}`, rs.URL(), ms.URI()))
	s, err := New(context.Background(), cfg, Options{Consumer: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	var lags []time.Duration
	b.ResetTimer()
	for range b.N {
		tick := time.NewTicker(time.Millisecond)
		sample := time.NewTicker(50 * time.Millisecond)
		end := time.Now().Add(3 * time.Second)
		for i := 0; time.Now().Before(end); {
			select {
			case <-tick.C:
				if err := s.Put(ctx, rec(fmt.Sprintf("resp_%d_%d", time.Now().UnixNano(), i), "", strings.Repeat("x", 1024))); err != nil {
					b.Fatal(err)
				}
				i++
			case <-sample.C:
				if bl, err := s.Backlog(ctx); err == nil {
					lag := time.Duration(0)
					if bl.Entries > 0 && !bl.Oldest.IsZero() {
						lag = time.Since(bl.Oldest)
					}
					lags = append(lags, lag)
				}
			}
		}
		tick.Stop()
		sample.Stop()
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Milliseconds()), "lag-p50-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Milliseconds()), "lag-max-ms")
}
