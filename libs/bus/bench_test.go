package bus

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// benchDecision is a decision of realistic size: two profiles that scored
// eight endpoints with four scorers each (about 1 KiB encoded).
func benchDecision() *eventsv1.RoutingDecision {
	d := decision("bench", 0)
	for _, name := range []string{"prefill", "decode"} {
		pd := &eventsv1.ProfileDecision{Profile: name, Role: eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY}
		for _, s := range []string{"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "lora-affinity-scorer"} {
			pd.Scorers = append(pd.Scorers, &eventsv1.Scorer{Name: s, Type: s, Weight: 1})
		}
		for i := range 8 {
			pd.Endpoints = append(pd.Endpoints, &eventsv1.EndpointScores{
				Name: "vllm-" + strconv.Itoa(i), Address: "10.0.0." + strconv.Itoa(i) + ":8000",
				Scores: []float64{0.1, 0.5, 0.9, 0}, Total: 1.5,
			})
		}
		pd.Targets = []string{"10.0.0.3:8000"}
		d.Profiles = append(d.Profiles, pd)
	}
	return d
}

// BenchmarkPublisher measures events per second through the Publisher into
// the file-backed decisions stream, acks included (the clock stops when the
// last event is acknowledged).
func BenchmarkPublisher(b *testing.B) {
	e := integration(b)
	p, err := NewPublisher(e.nc, WithLogger(quietLogger()), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	subject, _ := DecisionsSubject("bench")
	d := benchDecision()
	b.SetBytes(int64(proto.Size(d)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for !p.Publish(subject, "bench-"+strconv.Itoa(i), d) {
			runtime.Gosched() // queue full: the benchmark measures sustained throughput
		}
	}
	if err := p.Close(testContext(b)); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if st := p.Stats(); st.Published != uint64(b.N) {
		b.Fatalf("published %d of %d (%+v)", st.Published, b.N, st)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkPublisherParallel is BenchmarkPublisher with callers on every
// CPU, as on a busy request path.
func BenchmarkPublisherParallel(b *testing.B) {
	e := integration(b)
	p, err := NewPublisher(e.nc, WithLogger(quietLogger()), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	subject, _ := DecisionsSubject("bench")
	d := benchDecision()
	var next atomic.Int64
	b.SetBytes(int64(proto.Size(d)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "bench-" + strconv.FormatInt(next.Add(1), 10)
			for !p.Publish(subject, id, d) {
				runtime.Gosched()
			}
		}
	})
	if err := p.Close(testContext(b)); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkPublishSync is the baseline the Publisher is measured against:
// one synchronous JetStream publish (a round trip) per event.
func BenchmarkPublishSync(b *testing.B) {
	e := integration(b)
	subject, _ := DecisionsSubject("bench")
	data, err := proto.Marshal(benchDecision())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := e.js.Publish(ctx, subject, data); err != nil {
			b.Fatal(err, i)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkConsume measures events per second replayed from the file-backed
// decisions stream through Consume (decode included) until CaughtUp.
func BenchmarkConsume(b *testing.B) {
	e := integration(b)
	p, err := NewPublisher(e.nc, WithLogger(quietLogger()), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	subject, _ := DecisionsSubject("bench")
	d := benchDecision()
	for i := range b.N {
		for !p.Publish(subject, "bench-"+strconv.Itoa(i), d) {
			runtime.Gosched()
		}
	}
	if err := p.Close(testContext(b)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(proto.Size(d)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var n atomic.Int64
	c, err := Consume(testContext(b), e.js, ConsumeOptions{Stream: DecisionsStream, Logger: quietLogger()},
		func(*eventsv1.RoutingDecision, Meta) { n.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	<-c.CaughtUp()
	elapsed := time.Since(start)
	b.StopTimer()
	c.Close()
	if got := n.Load(); got != int64(b.N) {
		b.Fatalf("consumed %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
