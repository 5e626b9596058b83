package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
)

// events collects the pool's decisions and completions from the streams.
type events struct {
	mu          sync.Mutex
	decisions   map[string][]*eventsv1.RoutingDecision // by request id
	completions map[string][]*eventsv1.RequestCompleted
}

func (s *devstack) follow(t *testing.T) *events {
	t.Helper()
	ctx := context.Background()
	nc := s.connectNATS(t, "e2e")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{decisions: map[string][]*eventsv1.RoutingDecision{}, completions: map[string][]*eventsv1.RequestCompleted{}}
	dsubj, _ := bus.DecisionsSubject(s.state.Pool)
	csubj, _ := bus.CompletionsSubject(s.state.Pool)
	dc, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: dsubj}, func(d *eventsv1.RoutingDecision, _ bus.Meta) {
		ev.mu.Lock()
		ev.decisions[d.GetRequestId()] = append(ev.decisions[d.GetRequestId()], d)
		ev.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dc.Close)
	cc, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: csubj}, func(c *eventsv1.RequestCompleted, _ bus.Meta) {
		ev.mu.Lock()
		ev.completions[c.GetRequestId()] = append(ev.completions[c.GetRequestId()], c)
		ev.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Close)
	return ev
}

// counts returns how many decisions and completions a request has.
func (e *events) counts(requestID string) (int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.decisions[requestID]), len(e.completions[requestID])
}

func (e *events) decision(requestID string) *eventsv1.RoutingDecision {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ds := e.decisions[requestID]; len(ds) > 0 {
		return ds[len(ds)-1]
	}
	return nil
}

func (e *events) total() (int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, c := 0, 0
	for _, v := range e.decisions {
		d += len(v)
	}
	for _, v := range e.completions {
		c += len(v)
	}
	return d, c
}

// load sends n requests of the mixed workload, conc at a time; onDone is
// called after each (with the number done so far).
func (s *devstack) load(ctx context.Context, n, conc int, pick func(i int) (string, string, bool), onDone func(done int)) []result {
	results := make([]result, n)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				path, body, stream := pick(i)
				results[i] = s.send(ctx, path, body, stream)
				if onDone != nil {
					onDone(int(done.Add(1)))
				}
			}
		}()
	}
	wg.Wait()
	return results
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type projection struct {
	Replica        string `json:"replica"`
	ConfigRevision int64  `json:"config_revision"`
	InFlight       int    `json:"in_flight"`
	Endpoints      map[string]struct {
		InFlight     int `json:"in_flight"`
		PrefixBlocks int `json:"prefix_blocks"`
	} `json:"endpoints"`
	LatencyModel *struct {
		Samples int                   `json:"samples"`
		Speeds  map[string][2]float64 `json:"speeds"`
	} `json:"latency_model"`
}

func (s *devstack) projection(t *testing.T, picker int) projection {
	t.Helper()
	resp, err := http.Get("http://" + s.state.Pickers[picker].Ops + "/debug/projection")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p projection
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStack runs the stack `make run` runs (two picker replicas here) and
// holds it to the contract of the running control plane: every request
// served and accounted once, replicas that agree, live config, and a pod
// crash that loses no non-streamed request.
func TestStack(t *testing.T) {
	// the pod killed below must stay down to leave routing
	s := startStack(t, "--pods", "4", "--slow-pods", "1", "--pickers", "2", "--speed", "10", "--no-restart", "vllm-sim-0")
	ev := s.follow(t)
	model := s.state.Model

	t.Run("mixed requests are served and accounted once", func(t *testing.T) {
		results := s.load(context.Background(), 300, 16, func(i int) (string, string, bool) { return mixedRequest(model, i) }, nil)
		served := map[string]int{}
		for i, r := range results {
			if !r.ok() {
				t.Fatalf("request %d (stream %t): status %d, %v: %s\n%s", i, r.streamed, r.status, r.err, r.body, tail(s.logs.String(), 40))
			}
			served[r.servedBy]++
		}
		if len(served) < 3 {
			t.Errorf("300 requests went to %d pods: %v", len(served), served)
		}
		waitFor(t, 10*time.Second, "one decision and one completion per request", func() bool {
			for _, r := range results {
				if d, c := ev.counts(r.requestID); d != 1 || c != 1 {
					return false
				}
			}
			return true
		})
		for _, r := range results {
			d := ev.decision(r.requestID)
			if d.GetPrimaryEndpoint() != r.servedBy {
				t.Errorf("request %s: decided %s, served by %s", r.requestID, d.GetPrimaryEndpoint(), r.servedBy)
			}
		}
		if d, c := ev.total(); d != 300 || c != 300 {
			t.Errorf("streams hold %d decisions and %d completions, want 300 each", d, c)
		}
		t.Logf("served per pod: %v", served)
	})

	t.Run("picker replicas agree on in-flight requests", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var bodies []io.Closer
		for i := range 8 {
			body := fmt.Sprintf(`{"model":%q,"prompt":"hold %d","max_tokens":4000,"ignore_eos":true,"stream":true}`, model, i)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/completions"), strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // held open, closed below
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %d: %v %v", i, err, resp)
			}
			if _, err := readFirstEvent(resp.Body); err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, resp.Body)
		}
		agree := func(want int) func() bool {
			return func() bool {
				a, b := s.projection(t, 0), s.projection(t, 1)
				if a.InFlight != want || b.InFlight != want {
					return false
				}
				for name, e := range a.Endpoints {
					if b.Endpoints[name].InFlight != e.InFlight {
						return false
					}
				}
				return true
			}
		}
		waitFor(t, 10*time.Second, "both replicas to count 8 in flight, endpoint by endpoint", agree(8))
		cancel()
		for _, b := range bodies {
			_ = b.Close()
		}
		waitFor(t, 10*time.Second, "both replicas to count 0 in flight", agree(0))
	})

	t.Run("a pushed config takes effect and an invalid one is refused", func(t *testing.T) {
		dir := t.TempDir()
		queueOnly := writeFile(t, dir, "queue.yaml", "plugins:\n- {type: queue-scorer}\n- {type: response-header-handler}\n")
		out, errs, code := hermodctl(t, append(append([]string{"config", "set"}, s.ctlFlags()...), queueOnly)...)
		if code != 0 || !strings.Contains(out, "picker-0: loaded") || !strings.Contains(out, "picker-1: loaded") {
			t.Fatalf("config set: %d\n%s\n%s", code, out, errs)
		}
		r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"after the push","max_tokens":2}`, model), false)
		if !r.ok() {
			t.Fatal(r.err, r.status, r.body)
		}
		waitFor(t, 5*time.Second, "the decision", func() bool { return ev.decision(r.requestID) != nil })
		scorers := ev.decision(r.requestID).GetProfiles()[0].GetScorers()
		if len(scorers) != 1 || scorers[0].GetName() != "queue-scorer" {
			t.Errorf("decision after the push scored with %v", scorers)
		}

		bad := writeFile(t, dir, "bad.yaml", "plugins:\n- {type: queue-scorer, parameters: {threshold: 3}}\nprofiles: []\n")
		_, errs, code = hermodctl(t, append(append([]string{"config", "set"}, s.ctlFlags()...), bad)...)
		if code != 1 || !strings.Contains(errs, "nothing was written") {
			t.Errorf("invalid config set: %d %s", code, errs)
		}
		// Written behind hermodctl's back, the pickers refuse it and keep
		// the queue-only config.
		cli := s.etcdClient(t)
		v, err := coord.PutConfig(context.Background(), cli, s.state.Pool, []byte("plugins: [{type: no-such-scorer}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		for i := range s.state.Pickers {
			if p := s.projection(t, i); p.ConfigRevision == v.Revision {
				t.Errorf("picker %d runs the invalid revision %d", i, v.Revision)
			}
		}
		r = s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"after the bad push","max_tokens":2}`, model), false)
		waitFor(t, 5*time.Second, "the decision", func() bool { return ev.decision(r.requestID) != nil })
		if sc := ev.decision(r.requestID).GetProfiles()[0].GetScorers(); !r.ok() || len(sc) != 1 || sc[0].GetName() != "queue-scorer" {
			t.Errorf("after a refused config: %v %v", r.err, sc)
		}
	})

	t.Run("a killed pod loses no non-streamed request and leaves routing", func(t *testing.T) {
		victim := s.state.Pods[0]
		var killedAt time.Time
		var once sync.Once
		results := s.load(context.Background(), 300, 16, func(i int) (string, string, bool) {
			return "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"request %d after a while","max_tokens":16}`, model, i), false
		}, func(done int) {
			if done == 60 {
				once.Do(func() {
					killedAt = time.Now()
					_ = syscall.Kill(victim.PID, syscall.SIGKILL)
				})
			}
		})
		for i, r := range results {
			if !r.ok() {
				t.Errorf("request %d lost: status %d, %v: %s", i, r.status, r.err, r.body)
			}
		}
		waitFor(t, 15*time.Second, victim.Name+" to leave both pickers", func() bool {
			for i := range s.state.Pickers {
				if _, ok := s.projection(t, i).Endpoints[victim.Name]; ok {
					return false
				}
			}
			return true
		})
		left := time.Since(killedAt)
		t.Logf("%s left routing %s after SIGKILL (registration TTL 5s)", victim.Name, left.Round(10*time.Millisecond))
		if left > 5*time.Second+3*time.Second {
			t.Errorf("the killed pod left routing after %s, more than its 5s lease TTL (+3s of etcd lease checks and watch delivery)", left)
		}
		for i := range 40 {
			r := s.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"later %d","max_tokens":2}`, model, i), false)
			if !r.ok() || r.servedBy == victim.Address {
				t.Fatalf("after the pod left: %v %d served by %s", r.err, r.status, r.servedBy)
			}
		}
	})
}
