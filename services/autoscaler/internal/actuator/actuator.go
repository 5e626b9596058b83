// Package actuator applies the autoscaler's per-variant replica targets:
// an Actuator scales one kind of target (a Kubernetes scale subresource,
// the devstack's local fleet, or a gauge for HPA/KEDA).
package actuator

import (
	"context"
	"errors"
)

// ErrNoState is returned (wrapped) by State when the actuator does not
// know the target's replicas (a gauge never set): the caller takes the
// replicas it observes serving.
var ErrNoState = errors.New("the actuator does not know the target's replicas")

// Target names the scalable resource behind a VariantAutoscaling
// (scaleTargetRef plus the variant's namespace).
type Target struct {
	// Variant is the VariantAutoscaling's name.
	Variant    string
	Namespace  string
	APIVersion string
	Kind       string
	Name       string
}

// State is a target's replicas as the actuator sees them.
type State struct {
	// Desired is the replica count the target is set to (spec.replicas).
	Desired int
	// Ready is how many of them serve (status.replicas for a scale
	// subresource); -1 when the actuator cannot tell.
	Ready int
}

// Actuator reads and sets a target's replica count. Scale must be
// idempotent: setting the count it already has is not an error.
type Actuator interface {
	// Name is the actuator's kind: "kubernetes", "local" or "metrics".
	Name() string
	State(ctx context.Context, t Target) (State, error)
	Scale(ctx context.Context, t Target, replicas int) error
}
