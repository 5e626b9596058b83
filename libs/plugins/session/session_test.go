package session_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/session"
	_ "github.com/hermod/hermod/libs/plugins/standard" // the other plugin types
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const tol = 1e-9

func approx(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

func checkScores(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d scores %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if !approx(got[i], want[i], tol) {
			t.Errorf("score[%d] = %v, want %v (all: %v, want %v)", i, got[i], want[i], got, want)
		}
	}
}

func req() *scheduling.Request { return schedulingtest.Completion("r1", "m", "hello") }

// recorder is a slog.Handler keeping every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.records...)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestSessionAffinityScorer(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    []float64
		wantLog bool
	}{
		{"token for pod-1", map[string]string{session.TokenHeader: b64("pod-1")}, []float64{0, 1, 0}, false},
		{"token for pod-0", map[string]string{session.TokenHeader: b64("pod-0")}, []float64{1, 0, 0}, false},
		{"token for pod-2", map[string]string{session.TokenHeader: "cG9kLTI="}, []float64{0, 0, 1}, false},
		{"no header", nil, []float64{0, 0, 0}, false},
		{"other headers only", map[string]string{"x-other": b64("pod-1")}, []float64{0, 0, 0}, false},
		{"token for unknown endpoint", map[string]string{session.TokenHeader: b64("pod-9")}, []float64{0, 0, 0}, false},
		{"token is the plain name, not base64", map[string]string{session.TokenHeader: "pod-1"}, []float64{0, 0, 0}, true},
		{"bad token", map[string]string{session.TokenHeader: "!!!not base64!!!"}, []float64{0, 0, 0}, true},
		{"unpadded is not standard base64", map[string]string{session.TokenHeader: "cG9kLTE"}, []float64{0, 0, 0}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			h := schedulingtest.NewHandle()
			h.Log = slog.New(rec)
			s := schedulingtest.New[*session.Scorer](t, h, session.ScorerType, "", "")
			r := req()
			r.Headers = tc.headers
			got := schedulingtest.Score(s, schedulingtest.CycleState(1), r, schedulingtest.Endpoints(3))
			checkScores(t, got, tc.want)
			if tc.wantLog {
				logged := false
				for _, l := range rec.all() {
					if l.Level <= slog.LevelDebug {
						logged = true
					}
				}
				if !logged {
					t.Errorf("bad token: no debug log record (got %d records)", len(rec.all()))
				}
			}
			for _, l := range rec.all() {
				if l.Level > slog.LevelDebug {
					t.Errorf("session token handling logged above debug: %v %q", l.Level, l.Message)
				}
			}
		})
	}
}

func TestSessionAffinityStandardAlphabet(t *testing.T) {
	// "pod~~~" encodes to "cG9kfn5+" in the standard alphabet and
	// "cG9kfn5-" in the URL alphabet; only the standard one is a token.
	eps := []*scheduling.Endpoint{schedulingtest.Endpoint("pod-a", nil, nil), schedulingtest.Endpoint("pod~~~", nil, nil)}
	s := schedulingtest.New[*session.Scorer](t, schedulingtest.NewHandle(), session.ScorerType, "", "")
	for _, tc := range []struct {
		token string
		want  []float64
	}{
		{"cG9kfn5+", []float64{0, 1}},
		{"cG9kfn5-", []float64{0, 0}},
	} {
		r := req()
		r.Headers = map[string]string{session.TokenHeader: tc.token}
		got := schedulingtest.Score(s, schedulingtest.CycleState(1), r, eps)
		for i := range tc.want {
			if !approx(got[i], tc.want[i], tol) {
				t.Errorf("token %q: scores %v, want %v", tc.token, got, tc.want)
				break
			}
		}
	}
}

func TestSessionAffinityResponseReceived(t *testing.T) {
	s := schedulingtest.New[*session.Scorer](t, schedulingtest.NewHandle(), session.ScorerType, "", "")
	var _ scheduling.ResponseReceived = s

	eps := schedulingtest.Endpoints(3)
	resp := &scheduling.Response{RequestID: "r1", Target: scheduling.Target{Endpoint: eps[2], Port: 8000}}
	s.ResponseReceived(context.Background(), req(), resp)
	tok, ok := resp.Headers[session.TokenHeader]
	if !ok {
		t.Fatalf("response headers %v lack %s", resp.Headers, session.TokenHeader)
	}
	if want := base64.StdEncoding.EncodeToString([]byte("pod-2")); tok != want {
		t.Errorf("%s = %q, want %q", session.TokenHeader, tok, want)
	}
	if tok != session.Token("pod-2") {
		t.Errorf("SessionToken(pod-2) = %q, response carries %q", session.Token("pod-2"), tok)
	}

	// The token from the response pins the next request to the same endpoint.
	next := req()
	next.Headers = map[string]string{session.TokenHeader: tok}
	checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), next, eps), []float64{0, 0, 1})

	t.Run("existing headers kept, token overwritten", func(t *testing.T) {
		resp := &scheduling.Response{Target: scheduling.Target{Endpoint: eps[0]},
			Headers: map[string]string{"x-other": "v", session.TokenHeader: "stale"}}
		s.ResponseReceived(context.Background(), req(), resp)
		if resp.Headers["x-other"] != "v" || resp.Headers[session.TokenHeader] != b64("pod-0") {
			t.Errorf("headers = %v", resp.Headers)
		}
	})
	t.Run("no target endpoint sets no token", func(t *testing.T) {
		resp := &scheduling.Response{RequestID: "r2"}
		s.ResponseReceived(context.Background(), req(), resp)
		if _, ok := resp.Headers[session.TokenHeader]; ok {
			t.Errorf("headers = %v, want no session token", resp.Headers)
		}
	})
}

func TestSessionToken(t *testing.T) {
	for _, name := range []string{"pod-1", "vllm-7f9c-0", "pod~~~", ""} {
		if got, want := session.Token(name), base64.StdEncoding.EncodeToString([]byte(name)); got != want {
			t.Errorf("SessionToken(%q) = %q, want %q", name, got, want)
		}
	}
}

// session-affinity-filter pins a request to its session's endpoint while
// it is a candidate, and keeps every candidate otherwise.
func TestFilterPins(t *testing.T) {
	f := schedulingtest.New[*session.Filter](t, schedulingtest.NewHandle(), session.FilterType, "", "")
	eps := schedulingtest.Endpoints(3)
	r := req()
	r.Headers = map[string]string{session.TokenHeader: session.Token("pod-1")}
	if got := schedulingtest.Names(f.Filter(context.Background(), schedulingtest.CycleState(1), r, eps, nil)); len(got) != 1 || got[0] != "pod-1" {
		t.Errorf("kept %v, want pod-1", got)
	}
	r.Headers = map[string]string{session.TokenHeader: session.Token("pod-9")}
	if got := f.Filter(context.Background(), schedulingtest.CycleState(1), r, eps, nil); len(got) != 3 {
		t.Errorf("gone endpoint: kept %d, want all", len(got))
	}
}

// The header is configurable (encodedEndpointHeaderConfig, or v0.9's
// headerName with a deprecation); with profileName naming the prefill
// profile, the token names the prefill pick.
func TestEncodedHeaderConfig(t *testing.T) {
	h := schedulingtest.NewHandle()
	s := schedulingtest.New[*session.Scorer](t, h, session.ScorerType, "", `{"headerName": "X-Sticky"}`)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "headerName is deprecated") {
		t.Errorf("warnings %q", h.Warnings)
	}
	eps := schedulingtest.Endpoints(2)
	r := req()
	r.Headers = map[string]string{"x-sticky": session.Token("pod-1")}
	checkScores(t, schedulingtest.Score(s, schedulingtest.CycleState(1), r, eps), []float64{0, 1})
	p := schedulingtest.New[*session.Filter](t, schedulingtest.NewHandle(), session.FilterType, "",
		`{"profileName": "prefill", "encodedEndpointHeaderConfig": {"header": "x-session-token-prefill"}}`)
	resp := &scheduling.Response{Target: scheduling.Target{Endpoint: eps[0]}, Prefill: scheduling.Target{Endpoint: eps[1]}, PrefillProfile: "prefill"}
	p.ResponseReceived(context.Background(), req(), resp)
	if got := resp.Headers["x-session-token-prefill"]; got != session.Token("pod-1") {
		t.Errorf("prefill token %q, want pod-1's", got)
	}
}

// session_id: the first decision of a session binds it to its endpoint
// on every replica (the effect travels on the decision stream); later
// requests of the session go there, whatever else scores, until
// evictionTtlSeconds after the last; sessions come from a header or a
// coding agent's session headers (agent-identity).
func TestSessionIDStrategy(t *testing.T) {
	clock := schedulingtest.NewClock()
	cfg := `
plugins:
- type: session-affinity-filter
  parameters:
    strategy: session_id
    sessionIdConfig:
      sources: [{header: x-session-id}, {attribute: agent-identity}]
      evictionTtlSeconds: 60
- type: random-picker
`
	a := schedulingtest.Scheduler(t, cfg, scheduling.WithClock(clock.Now))
	b := schedulingtest.Scheduler(t, cfg, scheduling.WithClock(clock.Now))
	ctx := context.Background()
	eps := schedulingtest.Endpoints(8)
	ask := func(s *scheduling.Scheduler, headers map[string]string) *scheduling.Result {
		t.Helper()
		r := req()
		r.Headers = headers
		res, err := s.Schedule(ctx, r, eps)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := ask(a, map[string]string{"x-session-id": "conv-1"})
	pod := first.Target().Endpoint.Name
	// replica b folds replica a's decision
	for i := range first.Effects {
		b.ApplyEffects(first.DecisionID, clock.Now(), first.Effects[i:i+1])
	}
	first.Release()
	for i := range 10 {
		s := []*scheduling.Scheduler{a, b}[i%2]
		res := ask(s, map[string]string{"x-session-id": "conv-1"})
		if got := res.Target().Endpoint.Name; got != pod {
			t.Fatalf("request %d of the session went to %s, its endpoint is %s", i, got, pod)
		}
		res.Release()
	}
	// a Claude Code session is its own session
	res := ask(a, map[string]string{"x-claude-code-session-id": "cc-7"})
	cc := res.Target().Endpoint.Name
	res.Release()
	for range 5 {
		res := ask(a, map[string]string{"x-claude-code-session-id": "cc-7"})
		if got := res.Target().Endpoint.Name; got != cc {
			t.Fatalf("agent session went to %s, then %s", cc, got)
		}
		res.Release()
	}
	// past the TTL the binding is gone: the session may go anywhere
	clock.Advance(61 * time.Second)
	moved := false
	for range 40 {
		res := ask(a, map[string]string{"x-session-id": "conv-2"})
		next := ask(a, map[string]string{"x-session-id": "conv-2"})
		was := next.Target().Endpoint.Name
		if res.Target().Endpoint.Name != was {
			t.Fatal("a fresh session was not pinned")
		}
		res.Release()
		next.Release()
		clock.Advance(61 * time.Second)
		r := ask(a, map[string]string{"x-session-id": "conv-2"})
		moved = moved || r.Target().Endpoint.Name != was
		r.Release()
		if moved {
			break
		}
	}
	if !moved {
		t.Error("an expired session stayed pinned over 40 tries")
	}
}

func TestParamErrors(t *testing.T) {
	for params, want := range map[string]string{
		`{"strategy": "sticky"}`: `"sticky" is not encoded_endpoint_header or session_id`,
		`{"strategy": "session_id", "sessionIdConfig": {"sources": [{"attribute": "user"}]}}`: "a session is read from agent-identity (a coding agent's session headers) or a session-id-producer declared earlier",
		`{"strategy": "session_id", "sessionIdConfig": {"sources": [{}]}}`:                    "set one of header or attribute",
		`{"sessionIdConfig": {}}`: "is the session_id strategy's",
		`{"strategy": "session_id", "encodedEndpointHeaderConfig": {"header": "x"}}`: "is the encoded_endpoint_header strategy's",
	} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), session.FilterType, "", params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}

// A declared agent-identity's additionalSessionHeaders name sessions for
// the session_id strategy too.
func TestSessionIDFromADeclaredAgentIdentity(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: agent-identity, parameters: {additionalSessionHeaders: [x-team-session]}}
- type: session-affinity-filter
  parameters:
    strategy: session_id
    sessionIdConfig: {sources: [{attribute: agent-identity}]}
- type: random-picker
`)
	eps := schedulingtest.Endpoints(8)
	var pod string
	for i := range 10 {
		r := req()
		r.Headers = map[string]string{"x-team-session": "team-7", "session-id": fmt.Sprint("codex-", i)}
		res, err := s.Schedule(context.Background(), r, eps)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Target().Endpoint.Name
		res.Release()
		if i == 0 {
			pod = got
		} else if got != pod {
			t.Fatalf("request %d of session team-7 went to %s, its endpoint is %s", i, got, pod)
		}
	}
}

// session-id-producer reads a session from a header or a cookie; the
// session_id strategy names it as an attribute source.
func TestSessionIDProducer(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: session-id-producer, name: cookie-session, parameters: {cookieName: llm-d-session}}
- type: session-affinity-filter
  parameters:
    strategy: session_id
    sessionIdConfig: {sources: [{attribute: cookie-session}]}
- type: random-picker
`)
	eps := schedulingtest.Endpoints(8)
	var pod string
	for i := range 10 {
		r := req()
		r.Headers = map[string]string{"cookie": fmt.Sprintf("theme=dark%d; llm-d-session=conv-9", i)}
		res, err := s.Schedule(context.Background(), r, eps)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Target().Endpoint.Name
		res.Release()
		if i == 0 {
			pod = got
		} else if got != pod {
			t.Fatalf("request %d of cookie session conv-9 went to %s, its endpoint is %s", i, got, pod)
		}
	}
	for params, want := range map[string]string{
		`{}`: "exactly one of headerName and cookieName",
		`{"headerName": "x-s", "cookieName": "c"}`: "exactly one",
	} {
		if _, err := session.NewIDProducer("p", json.RawMessage(params), schedulingtest.NewHandle()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", params, err)
		}
	}
	p, _ := session.NewIDProducer("p", json.RawMessage(`{"headerName": "X-Session"}`), schedulingtest.NewHandle())
	if got := p.(*session.IDProducer).SessionID(&scheduling.Request{Headers: map[string]string{"x-session": " s-1 "}}); got != "s-1" {
		t.Errorf("header session %q", got)
	}
}

// multicluster-session-affinity-filter is the filter over clusters: a
// session's token names its cluster, which it stays on while it is a
// candidate.
func TestMultiClusterFilterPinsCluster(t *testing.T) {
	f := schedulingtest.New[*session.Filter](t, schedulingtest.NewHandle(), session.MultiClusterFilterType, "mc", "")
	if f.TypedName() != (scheduling.TypedName{Type: session.MultiClusterFilterType, Name: "mc"}) {
		t.Errorf("typed name %v", f.TypedName())
	}
	eps := []*scheduling.Endpoint{
		scheduling.NewEndpoint("us-east", "gw.us-east.example.com", 443, nil),
		scheduling.NewEndpoint("eu-west", "gw.eu-west.example.com", 443, nil),
	}
	r := req()
	r.Headers = map[string]string{session.TokenHeader: session.Token("eu-west")}
	if got := schedulingtest.Names(f.Filter(context.Background(), schedulingtest.CycleState(1), r, eps, nil)); len(got) != 1 || got[0] != "eu-west" {
		t.Errorf("kept %v, want eu-west", got)
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), session.MultiClusterFilterType, "mc", `{"strategy": "session_id", "encodedEndpointHeaderConfig": {}}`); err == nil {
		t.Error("the filter's parameters are not checked as session-affinity-filter's")
	}
}
