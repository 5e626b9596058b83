package bus

import (
	"errors"
	"testing"
	"time"
)

func TestSubjectBuilders(t *testing.T) {
	const pool, ep = "pool.a", "10.0.0.5:8000"
	for _, tc := range []struct {
		name  string
		build func() (string, error)
		want  string
	}{
		{"metrics", func() (string, error) { return MetricsSubject(pool, ep) }, "hermod.metrics.pool%2Ea.10%2E0%2E0%2E5:8000"},
		{"metrics filter", func() (string, error) { return MetricsFilter(pool) }, "hermod.metrics.pool%2Ea.*"},
		{"kv", func() (string, error) { return KVSubject(pool, "vllm-0") }, "hermod.kv.pool%2Ea.vllm-0"},
		{"decisions", func() (string, error) { return DecisionsSubject(pool) }, "hermod.decisions.pool%2Ea"},
		{"completions", func() (string, error) { return CompletionsSubject(pool) }, "hermod.completions.pool%2Ea"},
		{"scaling", func() (string, error) { return ScalingSubject(pool) }, "hermod.scaling.pool%2Ea"},
		{"config", func() (string, error) { return ConfigSubject(pool) }, "hermod.config.pool%2Ea"},
		{"flow control", func() (string, error) { return FlowControlSubject(pool, "gateway-1") }, "hermod.flowcontrol.pool%2Ea.gateway-1"},
		{"flow control filter", func() (string, error) { return FlowControlFilter(pool) }, "hermod.flowcontrol.pool%2Ea.*"},
		{"plain names", func() (string, error) { return MetricsSubject("default", "vllm-0") }, "hermod.metrics.default.vllm-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.build()
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestSubjectBuildersRejectEmptyNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() (string, error)
	}{
		{"metrics pool", func() (string, error) { return MetricsSubject("", "e") }},
		{"metrics endpoint", func() (string, error) { return MetricsSubject("p", "") }},
		{"metrics filter", func() (string, error) { return MetricsFilter("") }},
		{"kv pod", func() (string, error) { return KVSubject("p", "") }},
		{"decisions", func() (string, error) { return DecisionsSubject("") }},
		{"completions", func() (string, error) { return CompletionsSubject("") }},
		{"scaling", func() (string, error) { return ScalingSubject("") }},
		{"config", func() (string, error) { return ConfigSubject("") }},
		{"flow control replica", func() (string, error) { return FlowControlSubject("p", "") }},
		{"flow control filter", func() (string, error) { return FlowControlFilter("") }},
		{"metrics key pool", func() (string, error) { return MetricsKey("", "e") }},
		{"metrics key endpoint", func() (string, error) { return MetricsKey("p", "") }},
		{"metrics key filter", func() (string, error) { return MetricsKeyFilter("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := tc.build(); !errors.Is(err, ErrEmptyName) {
				t.Fatalf("got %q, %v, want ErrEmptyName", got, err)
			}
		})
	}
}

func TestParseEndpointSubjects(t *testing.T) {
	for _, tc := range []struct {
		name, subject string
		parse         func(string) (string, string, error)
		pool, ep      string
		wantErr       bool
	}{
		{name: "metrics", subject: "hermod.metrics.default.vllm-0", parse: ParseMetricsSubject, pool: "default", ep: "vllm-0"},
		{name: "metrics escaped", subject: "hermod.metrics.pool%2Ea.10%2E0%2E0%2E5:8000", parse: ParseMetricsSubject, pool: "pool.a", ep: "10.0.0.5:8000"},
		{name: "kv", subject: "hermod.kv.p.pod%20x", parse: ParseKVSubject, pool: "p", ep: "pod x"},
		{name: "kv subject as metrics", subject: "hermod.kv.p.pod", parse: ParseMetricsSubject, wantErr: true},
		{name: "metrics subject as kv", subject: "hermod.metrics.p.e", parse: ParseKVSubject, wantErr: true},
		{name: "no endpoint", subject: "hermod.metrics.p", parse: ParseMetricsSubject, wantErr: true},
		{name: "empty endpoint", subject: "hermod.metrics.p.", parse: ParseMetricsSubject, wantErr: true},
		{name: "empty pool", subject: "hermod.metrics..e", parse: ParseMetricsSubject, wantErr: true},
		{name: "extra token", subject: "hermod.metrics.p.e.x", parse: ParseMetricsSubject, wantErr: true},
		{name: "wildcard", subject: "hermod.metrics.p.*", parse: ParseMetricsSubject, wantErr: true},
		{name: "bad escape", subject: "hermod.metrics.p.e%2", parse: ParseMetricsSubject, wantErr: true},
		{name: "pool subject", subject: "hermod.decisions.p", parse: ParseMetricsSubject, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, ep, err := tc.parse(tc.subject)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("got %q, %q, %v, want ErrInvalidToken", pool, ep, err)
				}
				return
			}
			if err != nil || pool != tc.pool || ep != tc.ep {
				t.Fatalf("got %q, %q, %v, want %q, %q", pool, ep, err, tc.pool, tc.ep)
			}
		})
	}
}

func TestSubjectRoundTrip(t *testing.T) {
	names := []string{"default", "10.0.0.5:8000", "a.b.c", "*", ">", "%", "x y", "ünï.cödé", "[fd00::1]:8000"}
	for _, pool := range names {
		for _, ep := range names {
			for _, kind := range []struct {
				build func(string, string) (string, error)
				parse func(string) (string, string, error)
			}{{MetricsSubject, ParseMetricsSubject}, {KVSubject, ParseKVSubject}} {
				s, err := kind.build(pool, ep)
				if err != nil {
					t.Fatal(err)
				}
				p, e, err := kind.parse(s)
				if err != nil || p != pool || e != ep {
					t.Errorf("%q: got %q, %q, %v, want %q, %q", s, p, e, err, pool, ep)
				}
			}
		}
	}
}

// TestEscapedSubjectsOnServer checks that escaped names make subjects the
// server accepts, that a pool's filter matches exactly its endpoints, and
// that the streams capture them.
func TestEscapedSubjectsOnServer(t *testing.T) {
	t.Parallel()
	e := integration(t)
	names := []string{"10.0.0.5:8000", "a.b", "a*b", "a>b", "x y", "50%", "ünï", "\xff\xfe", "[fd00::1]:8000"}
	const pool = "pool.1:x"
	filter, err := MetricsFilter(pool)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.nc.SubscribeSync(filter)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	other, _ := MetricsSubject("pool", "1:x.e") // a different pool that shares a prefix
	if err := e.nc.Publish(other, nil); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	for _, ep := range names {
		subject, err := MetricsSubject(pool, ep)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.nc.Publish(subject, []byte(ep)); err != nil {
			t.Fatalf("publish %q: %v", subject, err)
		}
		kv, err := KVSubject(pool, ep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.Publish(ctx, kv, []byte(ep)); err != nil {
			t.Fatalf("stream publish %q: %v", kv, err)
		}
	}
	for _, ep := range names {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %q: %v", ep, err)
		}
		p, gotEp, err := ParseMetricsSubject(m.Subject)
		if err != nil || p != pool || gotEp != ep || string(m.Data) != ep {
			t.Fatalf("got %q on %q (%q, %q, %v), want %q", m.Data, m.Subject, p, gotEp, err, ep)
		}
	}
	if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("filter matched %q", m.Subject)
	}
	if n := streamMsgs(t, e.js, KVStream); n != uint64(len(names)) {
		t.Fatalf("HERMOD_KV holds %d messages, want %d", n, len(names))
	}
}
