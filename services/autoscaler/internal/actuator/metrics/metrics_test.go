package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
)

const header = `# HELP wva_desired_replicas Replica count the autoscaler wants for a variant; read by an HPA or KEDA that does the scaling.
# TYPE wva_desired_replicas gauge
`

func newActuator(t *testing.T) (*Actuator, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := New(reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a, reg
}

func target(ns, variant string) actuator.Target {
	return actuator.Target{Variant: variant, Namespace: ns, APIVersion: "apps/v1", Kind: "Deployment", Name: variant + "-deploy"}
}

func expect(t *testing.T, reg *prometheus.Registry, series string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(header+series), DesiredReplicasMetric); err != nil {
		t.Fatal(err)
	}
}

func TestScaleSetsGaugeWithLabels(t *testing.T) {
	a, reg := newActuator(t)
	ctx := context.Background()

	steps := []struct {
		tgt      actuator.Target
		replicas int
	}{
		{target("llm", "llama-a10g"), 2},
		{target("llm", "llama-a100"), 1},
		{target("team-b", "llama-a10g"), 4}, // same variant name, other namespace
		{target("llm", "llama-a10g"), 0},    // scale to zero keeps the series at 0
		{target("llm", "llama-a100"), 1},    // idempotent
	}
	for _, s := range steps {
		if err := a.Scale(ctx, s.tgt, s.replicas); err != nil {
			t.Fatalf("Scale(%v, %d): %v", s.tgt, s.replicas, err)
		}
	}
	expect(t, reg, `wva_desired_replicas{namespace="llm",variant_name="llama-a100"} 1
wva_desired_replicas{namespace="llm",variant_name="llama-a10g"} 0
wva_desired_replicas{namespace="team-b",variant_name="llama-a10g"} 4
`)
	if got := testutil.ToFloat64(a.desired.WithLabelValues("llama-a10g", "team-b")); got != 4 {
		t.Fatalf("team-b/llama-a10g = %v, want 4", got)
	}
}

func TestStateReturnsLastValue(t *testing.T) {
	a, _ := newActuator(t)
	ctx := context.Background()
	tgt := target("llm", "v1")

	if _, err := a.State(ctx, tgt); !errors.Is(err, ErrNotSet) {
		t.Fatalf("State before Scale: err = %v, want ErrNotSet", err)
	}
	for _, n := range []int{3, 5, 0} {
		if err := a.Scale(ctx, tgt, n); err != nil {
			t.Fatal(err)
		}
		st, err := a.State(ctx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		if st != (actuator.State{Desired: n, Ready: -1}) {
			t.Fatalf("State after Scale(%d) = %+v, want Desired %d Ready -1", n, st, n)
		}
	}
	if _, err := a.State(ctx, target("other-ns", "v1")); !errors.Is(err, ErrNotSet) {
		t.Fatalf("State of the same variant in another namespace: err = %v, want ErrNotSet", err)
	}
}

func TestForgetRemovesSeries(t *testing.T) {
	a, reg := newActuator(t)
	ctx := context.Background()
	for _, v := range []string{"keep", "drop"} {
		if err := a.Scale(ctx, target("llm", v), 2); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.CollectAndCount(a.desired); n != 2 {
		t.Fatalf("series = %d, want 2", n)
	}

	a.Forget(target("llm", "drop"))
	a.Forget(target("llm", "never-set")) // no-op

	expect(t, reg, `wva_desired_replicas{namespace="llm",variant_name="keep"} 2
`)
	if _, err := a.State(ctx, target("llm", "drop")); !errors.Is(err, ErrNotSet) {
		t.Fatalf("State after Forget: err = %v, want ErrNotSet", err)
	}

	// A forgotten variant can come back.
	if err := a.Scale(ctx, target("llm", "drop"), 1); err != nil {
		t.Fatal(err)
	}
	expect(t, reg, `wva_desired_replicas{namespace="llm",variant_name="drop"} 1
wva_desired_replicas{namespace="llm",variant_name="keep"} 2
`)
}

func TestScaleRejectsInvalidInput(t *testing.T) {
	a, reg := newActuator(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		tgt      actuator.Target
		replicas int
	}{
		{"negative replicas", target("llm", "v1"), -1},
		{"no variant", target("llm", ""), 1},
		{"no namespace", target("", "v1"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.Scale(ctx, tt.tgt, tt.replicas); !errors.Is(err, ErrInvalidTarget) {
				t.Fatalf("err = %v, want ErrInvalidTarget", err)
			}
		})
	}
	if n := testutil.CollectAndCount(a.desired); n != 0 {
		t.Fatalf("series = %d after invalid calls, want 0", n)
	}
	expect(t, reg, "")
}

func TestCancelledContext(t *testing.T) {
	a, _ := newActuator(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Scale(ctx, target("llm", "v1"), 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Scale err = %v, want context.Canceled", err)
	}
	if _, err := a.State(ctx, target("llm", "v1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("State err = %v, want context.Canceled", err)
	}
	if n := testutil.CollectAndCount(a.desired); n != 0 {
		t.Fatalf("series = %d, want 0", n)
	}
}

func TestNew(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "metrics" {
		t.Fatalf("Name() = %q", a.Name())
	}
	_, err = New(reg, nil)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("second New on one registry: err = %v, want AlreadyRegisteredError", err)
	}
	if _, err := New(nil, nil); err == nil {
		t.Fatal("New(nil registerer) succeeded")
	}
}

func TestConcurrentScaleAndForget(t *testing.T) {
	a, _ := newActuator(t)
	ctx := context.Background()
	tgt := target("llm", "v1")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				if i%2 == 0 {
					_ = a.Scale(ctx, tgt, j)
				} else {
					a.Forget(tgt)
				}
			}
		}()
	}
	wg.Wait()
	// The series and the remembered value agree whichever call came last.
	st, err := a.State(ctx, tgt)
	series := testutil.CollectAndCount(a.desired)
	switch {
	case errors.Is(err, ErrNotSet):
		if series != 0 {
			t.Fatalf("State says forgotten but %d series remain", series)
		}
	case err == nil:
		if series != 1 || testutil.ToFloat64(a.desired.WithLabelValues("v1", "llm")) != float64(st.Desired) {
			t.Fatalf("State %+v disagrees with the gauge (%d series)", st, series)
		}
	default:
		t.Fatal(err)
	}
}
