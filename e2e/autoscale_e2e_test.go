package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
)

// scalingLog collects the pool's scaling decisions.
type scalingLog struct {
	mu  sync.Mutex
	evs []*eventsv1.ScalingDecision
}

func (l *scalingLog) all() []*eventsv1.ScalingDecision {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*eventsv1.ScalingDecision(nil), l.evs...)
}

func (s *devstack) followScaling(t *testing.T) *scalingLog {
	t.Helper()
	ctx := context.Background()
	nc := s.connectNATS(t, "e2e-scaling")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := bus.ScalingSubject(s.state.Pool)
	l := &scalingLog{}
	c, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.ScalingStream, FilterSubject: subj}, func(d *eventsv1.ScalingDecision, _ bus.Meta) {
		l.mu.Lock()
		l.evs = append(l.evs, d)
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return l
}

// replicaTargets returns the local actuator's targets per variant.
func (s *devstack) replicaTargets(t *testing.T) map[string]string {
	t.Helper()
	cli := s.etcdClient(t)
	resp, err := cli.Get(context.Background(), coord.ReplicaTargetsPrefix(s.state.Pool), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), coord.ReplicaTargetsPrefix(s.state.Pool))] = string(kv.Value)
	}
	return out
}

// total returns the replicas a decision leaves the model with.
func total(d *eventsv1.ScalingDecision) (n int) {
	for _, v := range d.GetVariants() {
		n += int(v.GetDesired())
	}
	return n
}

// An autoscaled fleet of two variants (cheap at cost 5, dear at 15, at
// most 4 pods each) under a load step from one pod's worth of requests to
// eight: the autoscaler scales out on the cheap variant first, then the
// dear one, until the queues are under the thresholds, and back in after
// the load drops (to one replica per variant), the dear variant first,
// without oscillating (the total
// only rises, then only falls). Idle past the retention period the model
// goes to zero, and the first request brings one pod back, the decision
// taken on the gateway's queue event.
func TestAutoscaleLoadStepScaleToZeroAndBack(t *testing.T) {
	s := startStack(t, "--variants", "cheap:5:0:4:1,dear:15:0:4:0", "--speed", "2", "--pickers", "1",
		"--sim-args", "--max-num-seqs,4", "--autoscaler-args", "--interval,100ms,--resync,1s")
	decisions := s.followScaling(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, d := range decisions.all() {
			t.Logf("decision %s trigger=%s analyzer=%s variants=%v reasons=%v queue=%v", d.GetTime().AsTime().Format("15:04:05.000"),
				d.GetTrigger(), d.GetAnalyzer(), d.GetVariants(), d.GetReasons(), d.GetInputs().GetGatewayQueue())
		}
		t.Logf("targets %v\nautoscaler log:\n%s", s.replicaTargets(t), grepLines(s.logs.String(), "autoscaler", 40))
	})
	cli := s.etcdClient(t)
	const retention = 8 * time.Second
	stz := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wva-model-scale-to-zero-config\ndata:\n  default: |\n    enable_scale_to_zero: true\n    retention_period: %q\n", retention.String())
	if _, err := cli.Put(context.Background(), coord.AutoscalerConfigMapsPrefix(s.state.Pool)+"wva-model-scale-to-zero-config", stz); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"model":%q,"prompt":"a load step","max_tokens":50}`, s.state.Model)
	var sent, failed atomic.Int64
	// run sends with conc clients until stop is closed; the clients start
	// gap apart (a burst of simultaneous first requests would queue behind
	// one another for a step, and the minute's max would keep it).
	run := func(conc int, gap time.Duration, stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		for i := range conc {
			wg.Add(1)
			go func() {
				time.Sleep(time.Duration(i) * gap)
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					r := s.send(ctx, "/v1/completions", body, false)
					cancel()
					sent.Add(1)
					if !r.ok() {
						failed.Add(1)
					}
				}
			}()
		}
		return &wg
	}
	serving := func() int {
		n := 0
		for _, v := range s.replicaTargets(t) {
			var k int
			_, _ = fmt.Sscan(v, &k)
			n += k
		}
		return n
	}
	// one pod's worth: 4 clients on one pod of max-num-seqs 4
	low := make(chan struct{})
	lowWG := run(4, 250*time.Millisecond, low)
	time.Sleep(4 * time.Second)
	if n := serving(); n != 1 {
		t.Fatalf("one pod's worth of load: %d replicas, want 1 (decisions %v)", n, decisions.all())
	}
	// eight pods' worth
	high := make(chan struct{})
	stepAt := time.Now()
	highWG := run(28, 20*time.Millisecond, high)
	waitFor(t, 60*time.Second, "scale out to 6 replicas", func() bool { return serving() >= 6 })
	outTook := time.Since(stepAt)
	time.Sleep(5 * time.Second) // settle under load
	peak := serving()
	close(high)
	highWG.Wait()
	dropAt := time.Now()
	// the one-minute max window holds the fleet for a minute after the
	// drop; then it shrinks, the dear variant first. The percentage
	// analyzer takes only from a variant with more than one replica, so
	// each variant keeps one until the model is idle (scale to zero).
	waitFor(t, 150*time.Second, "scale in to one replica per variant", func() bool {
		tg := s.replicaTargets(t)
		return tg["cheap"] == "1" && tg["dear"] == "1"
	})
	inTook := time.Since(dropAt)
	close(low)
	lowWG.Wait()
	idleAt := time.Now()
	waitFor(t, retention+20*time.Second, "scale to zero", func() bool { return serving() == 0 })
	zeroTook := time.Since(idleAt)
	// the pods stop (a stopping pod may still serve while registered)
	waitFor(t, 30*time.Second, "the pods leave the registry", func() bool {
		eps, _, err := coord.ListEndpoints(context.Background(), cli, s.state.Pool)
		return err == nil && len(eps) == 0
	})
	// and the gateway has seen it (its model list and its flow control
	// follow the same registry watch)
	waitFor(t, 10*time.Second, "the gateway sees the pool empty", func() bool {
		resp, err := http.Get(s.url("/v1/models"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return !strings.Contains(string(b), s.state.Model)
	})
	time.Sleep(50 * time.Millisecond)
	// the first request brings one pod back
	before := len(decisions.all())
	reqAt := time.Now()
	r := s.send(context.Background(), "/v1/completions", body, false)
	firstTook := time.Since(reqAt)
	if !r.ok() {
		t.Fatalf("the first request after scale to zero: %d %v %s", r.status, r.err, r.body)
	}
	var fromZero *eventsv1.ScalingDecision
	waitFor(t, 10*time.Second, "the scale-from-zero decision", func() bool {
		for _, d := range decisions.all()[before:] {
			if d.GetAnalyzer() == "scale-from-zero" {
				fromZero = d
				return true
			}
		}
		return false
	})
	reaction := fromZero.GetTime().AsTime().Sub(reqAt)
	evs := decisions.all()
	// the table of decisions, and the shape: up, then down, no reversal
	var rows []string
	phase, prev, reversals := "up", 1, 0
	var firstUp, firstDown []string
	for _, d := range evs {
		var parts []string
		for _, v := range d.GetVariants() {
			if v.GetCurrent() != v.GetDesired() {
				parts = append(parts, fmt.Sprintf("%s %d->%d", v.GetVariant(), v.GetCurrent(), v.GetDesired()))
				if v.GetDesired() > v.GetCurrent() && len(firstUp) < 8 {
					firstUp = append(firstUp, v.GetVariant())
				}
				if v.GetDesired() < v.GetCurrent() && len(firstDown) < 8 {
					firstDown = append(firstDown, v.GetVariant())
				}
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d |", d.GetTime().AsTime().Sub(stepAt).Round(10*time.Millisecond),
			d.GetTrigger(), d.GetAnalyzer(), strings.Join(parts, ", "), total(d)))
		n := total(d)
		switch {
		case d.GetAnalyzer() == "scale-from-zero":
		case phase == "up" && n < prev:
			phase = "down"
		case phase == "down" && n > prev:
			reversals++
		}
		prev = n
	}
	t.Logf("decisions (time from the load step):\n| t | trigger | analyzer | change | replicas |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
	t.Logf("scale out to >=6 in %v (peak %d), scale in to one per variant in %v, to zero %v after the load stopped (retention %v); first request after zero answered in %v, request -> scale-from-zero decision %v; %d requests, %d failed",
		outTook.Round(10*time.Millisecond), peak, inTook.Round(10*time.Millisecond), zeroTook.Round(10*time.Millisecond), retention,
		firstTook.Round(time.Millisecond), reaction.Round(time.Millisecond), sent.Load(), failed.Load())
	if reversals > 0 {
		t.Fatalf("the fleet oscillated: %d increases after it started shrinking", reversals)
	}
	if len(firstUp) < 4 || firstUp[0] != "cheap" || firstUp[1] != "cheap" || firstUp[2] != "cheap" || firstUp[3] != "dear" {
		t.Fatalf("scale-out order %v: the cheap variant must grow to its max (4) before the dear one", firstUp)
	}
	if len(firstDown) == 0 || firstDown[0] != "dear" {
		t.Fatalf("scale-in order %v: the dear variant shrinks first", firstDown)
	}
	if zeroTook < retention {
		t.Fatalf("scaled to zero %v after the load stopped, before the %v retention", zeroTook, retention)
	}
	if reaction > 2*time.Second {
		t.Fatalf("request -> scale-from-zero decision took %v", reaction)
	}
}

// grepLines returns the last n lines of s that contain sub.
func grepLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}
