package service

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/activerequest"
	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type sink struct {
	mu     sync.Mutex
	events []*eventsv1.RoutingDecision
	ids    []string
	subj   []string
}

func (s *sink) Publish(subject, msgID string, msg proto.Message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, msg.(*eventsv1.RoutingDecision))
	s.ids = append(s.ids, msgID)
	s.subj = append(s.subj, subject)
	return true
}

type fixture struct {
	srv    *Server
	client pickerv1.PickerServiceClient
	folder *projection.Folder
	set    *endpoints.Set
	loader *schedconfig.Loader
	sink   *sink
}

const testConfig = `
plugins:
- {type: active-request-scorer}
- {type: session-affinity-scorer}
- {type: response-header-handler}
- {type: by-label, parameters: {label: zone, validValues: [a], allowsNoLabel: true}}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: by-label}
  - {pluginRef: active-request-scorer}
  - {pluginRef: session-affinity-scorer, weight: 10}
`

func newFixture(t testing.TB, eps ...*registryv1.Endpoint) *fixture {
	return newFixtureWith(t, nil, eps...)
}

func newFixtureWith(t testing.TB, edit func(*Options), eps ...*registryv1.Endpoint) *fixture {
	t.Helper()
	set := endpoints.New(endpoints.Options{})
	t.Cleanup(set.Close)
	byName := map[string]*registryv1.Endpoint{}
	for _, e := range eps {
		byName[e.GetName()] = e
	}
	set.SetRegistry(1, byName)
	loader, err := schedconfig.New(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte(testConfig)},
		schedconfig.Options{Pool: "pool", Replica: "r1", Logger: quiet, SchedulerOptions: []scheduling.Option{scheduling.WithLogger(quiet)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loader.Close() })
	folder := projection.New(loader, projection.Options{Pool: "pool", Replica: "r1", Logger: quiet,
		Lookup: func(n string) (*scheduling.Endpoint, bool) { return set.View().Lookup(n) }})
	sk := &sink{}
	o := Options{Pool: "pool", Replica: "r1", Endpoints: set, Loader: loader, Folder: folder, Decisions: sk,
		Subject: "hermod.decisions.pool", Fallbacks: DefaultFallbacks, Logger: quiet}
	if edit != nil {
		edit(&o)
	}
	srv := New(o)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pickerv1.RegisterPickerServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &fixture{srv: srv, client: pickerv1.NewPickerServiceClient(conn), folder: folder, set: set, loader: loader, sink: sk}
}

func ep(name, addr string, served ...string) *registryv1.Endpoint {
	return &registryv1.Endpoint{Name: name, Pool: "pool", Address: addr, Port: 8000, Model: "llama", ServedModels: served}
}

func (f *fixture) inFlight(name string) int {
	lease := f.loader.Acquire()
	defer lease.Release()
	for _, p := range lease.Scheduler().Plugins() {
		if s, ok := p.(*activerequest.Scorer); ok {
			return s.Tracker().InFlight(name)
		}
	}
	return -1
}

func pick(body string) *pickerv1.PickRequest {
	return &pickerv1.PickRequest{RequestId: "req-1", Api: pickerv1.Api_API_COMPLETIONS, Body: []byte(body)}
}

func TestPickReturnsTargetFallbacksHeadersAndPublishes(t *testing.T) {
	f := newFixture(t, ep("pod-a", "10.0.0.1", "llama", "sql-lora"), ep("pod-b", "10.0.0.2"), ep("pod-c", "10.0.0.3"))
	ctx := context.Background()
	in := pick(`{"model": "llama", "prompt": "hi"}`)
	in.Headers = map[string]string{"X-Session-Token": base64.StdEncoding.EncodeToString([]byte("pod-b"))}
	out, err := f.client.Pick(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.GetTargets()) != 3 || out.GetTargets()[0].GetName() != "pod-b" || out.GetTargets()[0].GetAddress() != "10.0.0.2:8000" {
		t.Fatalf("targets %v", out.GetTargets())
	}
	for _, tg := range out.GetTargets() {
		h := tg.GetResponseHeaders()
		if h["x-decoder-host-port"] != tg.GetAddress() || h["x-session-token"] != base64.StdEncoding.EncodeToString([]byte(tg.GetName())) {
			t.Errorf("response headers of %s: %v", tg.GetName(), h)
		}
	}
	if f.inFlight("pod-b") != 1 {
		t.Errorf("pod-b in flight %d", f.inFlight("pod-b"))
	}
	if len(f.sink.events) != 1 {
		t.Fatalf("%d decision events", len(f.sink.events))
	}
	d := f.sink.events[0]
	if d.GetDecisionId() != out.GetDecisionId() || f.sink.ids[0] != d.GetDecisionId() || f.sink.subj[0] != "hermod.decisions.pool" ||
		d.GetReplica() != "r1" || d.GetRequestId() != "req-1" || d.GetPrimaryName() != "pod-b" || len(d.GetFallbackEndpoints()) != 2 ||
		len(d.GetEffects()) != 1 || d.GetEffects()[0].GetType() != "active-request-scorer" {
		t.Errorf("decision event %v", d)
	}

	// The completion frees pod-b, once.
	c := &eventsv1.RequestCompleted{DecisionId: out.GetDecisionId(), Pool: "pool", EndpointName: "pod-b", StatusCode: 200}
	for range 2 {
		if _, err := f.client.Complete(ctx, &pickerv1.CompleteRequest{Completion: c}); err != nil {
			t.Fatal(err)
		}
	}
	if f.inFlight("pod-b") != 0 {
		t.Errorf("pod-b in flight %d after completion", f.inFlight("pod-b"))
	}
	if _, err := f.client.Complete(ctx, &pickerv1.CompleteRequest{Completion: &eventsv1.RequestCompleted{DecisionId: "x"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad completion: %v", err)
	}
}

// TestPickHandsTheDecisionToACallerThatPublishesIt: asked to, the picker
// returns the decision event in its answer and does not publish it.
func TestPickHandsTheDecisionToACallerThatPublishesIt(t *testing.T) {
	f := newFixture(t, ep("pod-a", "10.0.0.1"), ep("pod-b", "10.0.0.2"))
	in := pick(`{"model": "llama", "prompt": "hi"}`)
	in.CallerPublishesDecision = true
	out, err := f.client.Pick(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.sink.events); n != 0 {
		t.Fatalf("the picker published %d decision events", n)
	}
	var d eventsv1.RoutingDecision
	if err := proto.Unmarshal(out.GetDecisionEvent(), &d); err != nil {
		t.Fatalf("decision event: %v", err)
	}
	if d.GetDecisionId() != out.GetDecisionId() || d.GetReplica() != "r1" || d.GetRequestId() != "req-1" ||
		d.GetPrimaryEndpoint() != out.GetTargets()[0].GetAddress() || len(d.GetFallbackEndpoints()) != 1 || len(d.GetEffects()) != 1 {
		t.Errorf("decision event %v", &d)
	}
	// Its effects are applied here as when the picker publishes.
	if got := f.inFlight(out.GetTargets()[0].GetName()); got != 1 {
		t.Errorf("in flight %d", got)
	}

	// A caller that does not ask gets no event: the picker publishes it.
	out, err = f.client.Pick(context.Background(), pick(`{"model": "llama", "prompt": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.GetDecisionEvent()) != 0 || len(f.sink.events) != 1 || f.sink.ids[0] != out.GetDecisionId() {
		t.Errorf("event in answer %d bytes, %d published", len(out.GetDecisionEvent()), len(f.sink.events))
	}
}

// A caller that asked to publish the decision and gave up before the
// answer gets none: the picker releases what the decision took, so that
// its projection does not count a request its peers never hear of.
func TestPickAbandonedByItsCallerIsReleased(t *testing.T) {
	f := newFixture(t, ep("pod-a", "10.0.0.1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // gone before the answer
	in := pick(`{"model": "llama", "prompt": "hi"}`)
	in.CallerPublishesDecision = true
	if _, err := f.srv.Pick(ctx, in); status.Code(err) != codes.Canceled {
		t.Fatalf("abandoned pick: %v, want Canceled", err)
	}
	if got := f.inFlight("pod-a"); got != 0 || len(f.sink.events) != 0 {
		t.Errorf("after an abandoned pick: pod-a in flight %d, %d events published", got, len(f.sink.events))
	}
	// A caller that left the publishing to the picker: the decision stands
	// and is published, for the stream's completion to end it.
	out, err := f.srv.Pick(ctx, pick(`{"model": "llama", "prompt": "hi"}`))
	if err != nil || f.inFlight("pod-a") != 1 || len(f.sink.events) != 1 || f.sink.ids[0] != out.GetDecisionId() {
		t.Errorf("picker-published pick with a gone caller: %v, in flight %d, %d events", err, f.inFlight("pod-a"), len(f.sink.events))
	}
}

func TestPickErrorsMapToCodes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, ep("pod-a", "10.0.0.1", "llama", "sql-lora"))
	zoned := &registryv1.Endpoint{Name: "pod-z", Pool: "pool", Address: "10.0.0.9", Port: 8000, Model: "zmodel", Labels: map[string]string{"zone": "b"}}
	f.set.SetRegistry(2, map[string]*registryv1.Endpoint{"pod-a": ep("pod-a", "10.0.0.1", "llama", "sql-lora"), "pod-z": zoned})
	cases := []struct {
		name string
		in   *pickerv1.PickRequest
		code codes.Code
	}{
		{"unknown model", pick(`{"model": "gpt-9", "prompt": "hi"}`), codes.NotFound},
		{"not json", pick(`{"model": `), codes.InvalidArgument},
		{"no prompt", pick(`{"model": "llama"}`), codes.InvalidArgument},
		{"empty body", pick(``), codes.InvalidArgument},
		{"other pool", &pickerv1.PickRequest{Pool: "other", Api: pickerv1.Api_API_COMPLETIONS, Body: []byte(`{"prompt":"x"}`)}, codes.FailedPrecondition},
		{"no api", &pickerv1.PickRequest{Body: []byte(`{"prompt":"x"}`)}, codes.InvalidArgument},
		{"every endpoint filtered", pick(`{"model": "zmodel", "prompt": "hi"}`), codes.Unavailable},
		{"subset excludes all", &pickerv1.PickRequest{Api: pickerv1.Api_API_COMPLETIONS, Body: []byte(`{"model":"llama","prompt":"x"}`), Subset: []string{"10.9.9.9:1"}}, codes.Unavailable},
	}
	for _, c := range cases {
		_, err := f.client.Pick(ctx, c.in)
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	// Filters that leave no endpoint are not shedding: UNAVAILABLE with
	// reason NO_MATCH (a 503 that names the filter), not RESOURCE_EXHAUSTED.
	_, err := f.client.Pick(ctx, pick(`{"model": "zmodel", "prompt": "hi"}`))
	if reason := pickReason(err); reason != pickerv1.PickFailure_PICK_FAILURE_NO_MATCH.String() || !strings.Contains(err.Error(), "no endpoint matched: filter") {
		t.Errorf("every endpoint filtered: %v (reason %q)", err, reason)
	}
	if rej := openai.PickRejection(err, false); rej.Status != http.StatusServiceUnavailable || rej.Code != openai.CodeNoEndpointMatched {
		t.Errorf("every endpoint filtered answers %+v", rej)
	}
	out, err := f.client.Pick(ctx, pick(`{"model": "sql-lora", "prompt": "hi"}`))
	if err != nil || out.GetTargets()[0].GetName() != "pod-a" || f.sink.events[len(f.sink.events)-1].GetAdapter() != "sql-lora" {
		t.Errorf("adapter request: %v %v", out, err)
	}
	f.set.SetRegistry(3, nil)
	if _, err := f.client.Pick(ctx, pick(`{"model": "llama", "prompt": "hi"}`)); status.Code(err) != codes.Unavailable {
		t.Errorf("empty pool: %v", err)
	}
}

func TestNotReadyIsUnavailable(t *testing.T) {
	f := newFixtureWith(t, func(o *Options) { o.Ready = func() error { return errors.New("projections not rebuilt") } }, ep("pod-a", "10.0.0.1"))
	if _, err := f.client.Pick(context.Background(), pick(`{"model":"llama","prompt":"x"}`)); status.Code(err) != codes.Unavailable {
		t.Errorf("not ready: %v", err)
	}
}

func TestSubsetHintRestrictsCandidates(t *testing.T) {
	f := newFixture(t, ep("pod-a", "10.0.0.1"), ep("pod-b", "10.0.0.2"), ep("pod-c", "10.0.0.3"))
	in := pick(`{"model": "llama", "prompt": "hi"}`)
	in.Subset = []string{"10.0.0.3:8000"}
	for range 5 {
		out, err := f.client.Pick(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.GetTargets()) != 1 || out.GetTargets()[0].GetName() != "pod-c" {
			t.Fatalf("targets %v", out.GetTargets())
		}
	}
}

// pickReason is the PickFailure name of a Pick error's ErrorInfo.
func pickReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
