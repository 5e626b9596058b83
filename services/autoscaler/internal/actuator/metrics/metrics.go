// Package metrics is the "metrics" actuator, for clusters where an HPA or
// KEDA owns the replica count: instead of scaling anything it publishes
// each variant's target as the WVA-compatible gauge
// wva_desired_replicas{variant_name,namespace}, which the HPA or KEDA
// scaler reads back through Prometheus.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
)

// Name is the actuator's kind.
const Name = "metrics"

// DesiredReplicasMetric is the gauge's name, kept as WVA's so existing
// HPA and KEDA objects work unchanged.
const DesiredReplicasMetric = "wva_desired_replicas"

// Label names of the gauge.
const (
	LabelVariant   = "variant_name"
	LabelNamespace = "namespace"
)

// Errors callers branch on.
var (
	// ErrNotSet: State of a variant this actuator has set no count for
	// since it started (or since Forget).
	ErrNotSet = fmt.Errorf("no desired replicas published for the variant: %w", actuator.ErrNoState)
	// ErrInvalidTarget: the Target lacks its variant or namespace, or the
	// replica count is negative.
	ErrInvalidTarget = errors.New("invalid target")
)

type variantKey struct {
	namespace, variant string
}

// Actuator publishes desired replica counts as a gauge. It is safe for
// concurrent use.
type Actuator struct {
	log     *slog.Logger
	desired *prometheus.GaugeVec

	// mu orders gauge changes with last so that a Forget racing a Scale
	// never leaves a series without its entry or the reverse.
	mu   sync.Mutex
	last map[variantKey]int
}

var _ actuator.Actuator = (*Actuator)(nil)

// New registers the wva_desired_replicas gauge on reg and returns the
// actuator that sets it. log may be nil (slog.Default()). Registering
// twice on one registry fails with a prometheus.AlreadyRegisteredError in
// the chain.
func New(reg prometheus.Registerer, log *slog.Logger) (*Actuator, error) {
	if reg == nil {
		return nil, errors.New("metrics actuator: nil prometheus.Registerer")
	}
	if log == nil {
		log = slog.Default()
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: DesiredReplicasMetric,
		Help: "Replica count the autoscaler wants for a variant; read by an HPA or KEDA that does the scaling.",
	}, []string{LabelVariant, LabelNamespace})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("metrics actuator: register %s: %w", DesiredReplicasMetric, err)
	}
	return &Actuator{log: log, desired: g, last: map[variantKey]int{}}, nil
}

// Name implements actuator.Actuator.
func (a *Actuator) Name() string { return Name }

// Scale sets the variant's gauge to replicas. Only t.Variant and
// t.Namespace are used.
func (a *Actuator) Scale(ctx context.Context, t actuator.Target, replicas int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish desired replicas of %s/%s: %w", t.Namespace, t.Variant, err)
	}
	k, err := keyOf(t)
	if err != nil {
		return fmt.Errorf("publish desired replicas: %w", err)
	}
	if replicas < 0 {
		return fmt.Errorf("publish desired replicas of %s/%s: %w: replicas %d < 0", t.Namespace, t.Variant, ErrInvalidTarget, replicas)
	}
	a.mu.Lock()
	prev, had := a.last[k]
	a.last[k] = replicas
	a.desired.WithLabelValues(k.variant, k.namespace).Set(float64(replicas))
	a.mu.Unlock()
	if !had || prev != replicas {
		a.log.InfoContext(ctx, "published desired replicas",
			"variant", t.Variant, "namespace", t.Namespace, "replicas", replicas)
	}
	return nil
}

// State returns the count last published for the variant as Desired; Ready
// is -1 because the actuator does not see the workload. It fails with
// ErrNotSet for a variant it has published nothing for.
func (a *Actuator) State(ctx context.Context, t actuator.Target) (actuator.State, error) {
	if err := ctx.Err(); err != nil {
		return actuator.State{}, fmt.Errorf("state of %s/%s: %w", t.Namespace, t.Variant, err)
	}
	k, err := keyOf(t)
	if err != nil {
		return actuator.State{}, fmt.Errorf("state: %w", err)
	}
	a.mu.Lock()
	n, ok := a.last[k]
	a.mu.Unlock()
	if !ok {
		return actuator.State{}, fmt.Errorf("state of %s/%s: %w", t.Namespace, t.Variant, ErrNotSet)
	}
	return actuator.State{Desired: n, Ready: -1}, nil
}

// Forget removes the variant's series (for a deleted VariantAutoscaling),
// so the HPA or KEDA stops seeing a target for it. Forgetting an unknown
// variant does nothing.
func (a *Actuator) Forget(t actuator.Target) {
	k := variantKey{namespace: t.Namespace, variant: t.Variant}
	a.mu.Lock()
	delete(a.last, k)
	a.desired.DeleteLabelValues(k.variant, k.namespace)
	a.mu.Unlock()
}

func keyOf(t actuator.Target) (variantKey, error) {
	if t.Variant == "" || t.Namespace == "" {
		return variantKey{}, fmt.Errorf("%w: variant %q in namespace %q: both are required", ErrInvalidTarget, t.Variant, t.Namespace)
	}
	return variantKey{namespace: t.Namespace, variant: t.Variant}, nil
}
