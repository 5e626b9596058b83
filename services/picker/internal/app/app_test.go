package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

var etcdSrv *coordtest.Server

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if etcdSrv, err = coordtest.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	etcdSrv.Close()
	// Every service stopped: nothing it started may still run.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
		code = 1
	}
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	t    *testing.T
	pool string
	etcd *clientv3.Client
	nats string
	nc   *nats.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	ns := bustest.Start(t)
	nc, _ := bustest.Connect(t, ns)
	return &env{t: t, pool: coordtest.PoolName(t), etcd: etcdSrv.Client(t), nats: ns.ClientURL(), nc: nc}
}

func (e *env) register(name string, port int32) {
	e.t.Helper()
	key := coord.EndpointKey(e.pool, name)
	val, err := coord.EncodeEndpoint(&registryv1.Endpoint{Name: name, Pool: e.pool, Address: "127.0.0.1", Port: port, Model: "llama"})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.etcd.Put(context.Background(), key, string(val)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deregister(name string) {
	if _, err := e.etcd.Delete(context.Background(), coord.EndpointKey(e.pool, name)); err != nil {
		e.t.Fatal(err)
	}
}

type picker struct {
	client  pickerv1.PickerServiceClient
	conn    *grpc.ClientConn
	ops     string
	stop    func()
	replica string
}

// start runs a picker replica until the test ends (or stop).
func (e *env) start(replica string) *picker {
	e.t.Helper()
	return e.startWith(replica, quiet)
}

func (e *env) startWith(replica string, log *slog.Logger) *picker {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type addrs struct{ grpc, ops string }
	ready := make(chan addrs, 1)
	done := make(chan error, 1)
	cfg := Config{Config: bootstrap.Config{Pool: e.pool, EtcdEndpoints: etcdSrv.Endpoints(), NATSURL: e.nats, Replica: replica}, Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Fallbacks: 2, ReplayWindow: time.Minute,
		Ready: func(g, o string) { ready <- addrs{g, o} }}
	go func() { done <- Run(ctx, cfg, log) }()
	var a addrs
	select {
	case a = <-ready:
	case err := <-done:
		cancel()
		e.t.Fatalf("picker %s stopped: %v", replica, err)
	case <-time.After(20 * time.Second):
		cancel()
		e.t.Fatalf("picker %s not ready", replica)
	}
	conn, err := grpc.NewClient(a.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = conn.Close()
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("picker %s: %v", replica, err)
			}
		})
	}
	e.t.Cleanup(stop)
	return &picker{client: pickerv1.NewPickerServiceClient(conn), conn: conn, ops: a.ops, stop: stop, replica: replica}
}

func (p *picker) pick(t *testing.T, prompt string) *pickerv1.PickResponse {
	t.Helper()
	out, err := p.client.Pick(context.Background(), &pickerv1.PickRequest{RequestId: "r", Api: pickerv1.Api_API_COMPLETIONS,
		Body: []byte(`{"model":"llama","prompt":` + fmt.Sprintf("%q", prompt) + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *picker) state(t *testing.T) ProjectionState {
	t.Helper()
	resp, err := http.Get("http://" + p.ops + "/debug/projection")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st ProjectionState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const loadAware = `
plugins:
- {type: queue-scorer}
- {type: active-request-scorer}
- {type: prefix-cache-scorer, parameters: {autoTune: false}}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: queue-scorer, weight: 1}
  - {pluginRef: active-request-scorer, weight: 1}
  - {pluginRef: prefix-cache-scorer, weight: 1}
`

func TestPickerRoutesPublishesAndReloads(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.register(fmt.Sprintf("pod-%d", i), int32(8000+i))
	}
	v1, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(`plugins: [{type: queue-scorer}]`))
	if err != nil {
		t.Fatal(err)
	}
	statuses := make(chan *eventsv1.ConfigStatus, 16)
	subj, _ := bus.ConfigSubject(e.pool)
	sub, err := bus.Subscribe(e.nc, subj, func(s *eventsv1.ConfigStatus, _ string) { statuses <- s })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()

	p := e.start("p1")
	if st := p.state(t); st.ConfigRevision != v1.Revision || st.ConfigSource != "etcd" || len(st.Endpoints) != 3 {
		t.Fatalf("state %+v", st)
	}

	// Metrics arrive over NATS: the queue scorer prefers the idle pod.
	for i, w := range []int64{5, 0, 9} {
		msubj, _ := bus.MetricsSubject(e.pool, fmt.Sprintf("pod-%d", i))
		if err := bus.PublishCore(e.nc, msubj, &eventsv1.PodMetrics{Pool: e.pool, Endpoint: fmt.Sprintf("pod-%d", i), Time: timestamppb.Now(), WaitingRequests: w}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "metrics to steer the pick", func() bool { return p.pick(t, "x").GetTargets()[0].GetName() == "pod-1" })
	out := p.pick(t, "hello")
	if len(out.GetTargets()) != 3 || out.GetReplica() != "p1" {
		t.Errorf("pick %v", out)
	}

	// The decision is on the audit stream.
	found := make(chan *eventsv1.RoutingDecision, 64)
	dsubj, _ := bus.DecisionsSubject(e.pool)
	js, _ := jetstreamOf(e.nc)
	c, err := bus.Consume(context.Background(), js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: dsubj},
		func(d *eventsv1.RoutingDecision, _ bus.Meta) { found <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, "the decision on the stream", func() bool {
		for {
			select {
			case d := <-found:
				if d.GetDecisionId() == out.GetDecisionId() {
					return d.GetReplica() == "p1" && len(d.GetFallbackEndpoints()) == 2 && len(d.GetProfiles()[0].GetEndpoints()) == 3
				}
			default:
				return false
			}
		}
	})

	// Hot reload, then a refused version.
	v2, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(loadAware))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new config", func() bool { return p.state(t).ConfigRevision == v2.Revision })
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte("plugins: [{type: no-such-scorer}]")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rejection status", func() bool {
		for {
			select {
			case s := <-statuses:
				if !s.GetAccepted() {
					return s.GetReplica() == "p1" && s.GetError() != ""
				}
			default:
				return false
			}
		}
	})
	if st := p.state(t); st.ConfigRevision != v2.Revision {
		t.Errorf("in force after a rejection: revision %d, want %d", st.ConfigRevision, v2.Revision)
	}

	// An endpoint that leaves the registry leaves routing.
	e.deregister("pod-1")
	eventually(t, "pod-1 to leave", func() bool { _, ok := p.state(t).Endpoints["pod-1"]; return !ok })
	for range 10 {
		for _, tg := range p.pick(t, "x").GetTargets() {
			if tg.GetName() == "pod-1" {
				t.Fatal("a deregistered endpoint was picked")
			}
		}
	}
}

// Two replicas fold each other's decisions and the completions: their
// in-flight counts and prefix indexes agree. A replica started later
// rebuilds the same state from the streams.
func TestReplicasShareProjections(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.register(fmt.Sprintf("pod-%d", i), int32(8000+i))
	}
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(loadAware)); err != nil {
		t.Fatal(err)
	}
	a, b := e.start("a"), e.start("b")
	var decided []*pickerv1.PickResponse
	for i := range 40 {
		p := []*picker{a, b}[i%2]
		decided = append(decided, p.pick(t, fmt.Sprintf("conversation %d: %s", i%5, strings.Repeat("some shared text ", 20))))
	}
	// Complete half of them, each through the replica that did not decide.
	for i, d := range decided[:20] {
		p := []*picker{b, a}[i%2]
		if _, err := p.client.Complete(context.Background(), &pickerv1.CompleteRequest{Completion: &eventsv1.RequestCompleted{DecisionId: d.GetDecisionId(), Pool: e.pool}}); err != nil {
			t.Fatal(err)
		}
	}
	// The completions reach the other replica through the stream only if
	// the gateway publishes them; here they travel by RPC, so publish them
	// as the gateway does.
	csubj, _ := bus.CompletionsSubject(e.pool)
	pub, err := bus.NewPublisher(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decided[:20] {
		pub.Publish(csubj, d.GetDecisionId(), &eventsv1.RequestCompleted{DecisionId: d.GetDecisionId(), Pool: e.pool})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	same := func(x, y ProjectionState) bool {
		if x.InFlight != y.InFlight || len(x.Endpoints) != len(y.Endpoints) {
			return false
		}
		for n, s := range x.Endpoints {
			if y.Endpoints[n].InFlight != s.InFlight || y.Endpoints[n].PrefixBlocks != s.PrefixBlocks {
				return false
			}
		}
		return true
	}
	eventually(t, "both replicas to hold 20 in flight and the same state", func() bool {
		sa, sb := a.state(t), b.state(t)
		return sa.InFlight == 20 && same(sa, sb)
	})
	// Every completion reached the other replica live too, over core NATS,
	// as well as through the stream; it was applied once, whichever way
	// came first.
	eventually(t, "replica b to see every completion live", func() bool {
		m := scrape(t, b.ops)
		live := m[`hermod_picker_projection_completions_total{result="applied",source="live"}`] +
			m[`hermod_picker_projection_completions_total{result="duplicate",source="live"}`]
		applied := m[`hermod_picker_projection_completions_total{result="applied",source="live"}`] +
			m[`hermod_picker_projection_completions_total{result="applied",source="stream"}`] +
			m[`hermod_picker_projection_completions_total{result="applied",source="rpc"}`]
		return live == 20 && applied == 20 && m["hermod_picker_projection_decision_lag_seconds_count"] == 20
	})
	// Spread: 40 requests over 4 pods with in-flight counts shared.
	for n, s := range a.state(t).Endpoints {
		if s.InFlight == 0 || s.PrefixBlocks == 0 {
			t.Errorf("%s: %+v (the replicas did not see each other's load)", n, s)
		}
	}

	// A new replica rebuilds the same state from the streams.
	c := e.start("c")
	converge := func(what string, ps ...*picker) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok := true
			for _, p := range ps[1:] {
				ok = ok && same(ps[0].state(t), p.state(t))
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				var states []string
				for _, p := range ps {
					states = append(states, fmt.Sprintf("%+v", p.state(t)))
				}
				t.Fatalf("%s: the replicas do not agree:\n%s", what, strings.Join(states, "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	converge("a new replica", a, c)

	// A replica restarted under the same name replays its own decisions too.
	a.stop()
	a2 := e.start("a")
	converge("a replica restarted under its old name", a2, b, c)

	// A reload that changes how the prefix index is kept rebuilds it from
	// the streams on every replica, as a replica started later builds it.
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(strings.Replace(loadAware, "autoTune: false", "autoTune: false, blockSizeTokens: 8", 1))); err != nil {
		t.Fatal(err)
	}
	d := e.start("d")
	converge("after a block size change", a2, b, c, d)
	if st := d.state(t); st.InFlight != 20 {
		t.Errorf("after the reload: %d in flight, want 20", st.InFlight)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With -v=4 every scorer logs "Running scorer" for every request, as JSON
// lines that reference/000's jq filter selects.
func TestVerbosity4LogsEveryScorer(t *testing.T) {
	e := newEnv(t)
	e.register("pod-0", 8000)
	if _, err := coord.PutConfig(context.Background(), e.etcd, e.pool, []byte(loadAware)); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	log, err := telemetry.NewLogger(&out, telemetry.FormatJSON, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := e.startWith("v4", log)
	p.pick(t, "hello")
	seen := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		var rec struct{ Msg, Scorer, Level string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "Running scorer" {
			seen[rec.Scorer] = true
		}
	}
	for _, s := range []string{"queue-scorer", "active-request-scorer", "prefix-cache-scorer"} {
		if !seen[s] {
			t.Errorf("no \"Running scorer\" line for %s in:\n%s", s, out.String())
		}
	}
}

// scrape returns the samples of a picker's /metrics by series (name and
// labels as exposed).
func scrape(t *testing.T, ops string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
