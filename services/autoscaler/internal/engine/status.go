package engine

import (
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// StatusSink receives each variant's status after every evaluation of its
// model by the leader, whether or not it changed anything (the
// VariantAutoscaling status subresource writer of the Kubernetes API).
// SetStatus must not block: the evaluation loop calls it.
type StatusSink interface {
	SetStatus(namespace, name string, st Status)
}

// The condition reasons of a variant's status (WVA's).
const (
	ReasonTargetFound           = "TargetFound"
	ReasonTargetNotFound        = "TargetNotFound"
	ReasonMetricsFound          = "MetricsFound"
	ReasonMetricsMissing        = "MetricsMissing"
	ReasonOptimizationSucceeded = "OptimizationSucceeded"
	ReasonOptimizationFailed    = "OptimizationFailed"
)

// variantStatus is a variant's status after an evaluation: the decision
// for it (vd), the analyzer and optimizer that made it, the analyzer's
// error if it failed, the variant's accelerator and the time.
func variantStatus(vd *eventsv1.VariantDecision, analyzer, optimizer string, analyzeErr error, accelerator string, now time.Time) Status {
	targetOK := vd.GetError() == ""
	targetMsg := "the scale target was read and set"
	if !targetOK {
		targetMsg = vd.GetError()
	}
	metricsOK := vd.GetReady() > 0 || vd.GetDesired() == 0
	metricsMsg := "ready replicas with fresh metrics"
	if !metricsOK {
		metricsMsg = "no ready replica with fresh metrics"
	}
	optMsg := analyzer + " / " + optimizer
	if analyzeErr != nil {
		optMsg = analyzeErr.Error()
	}
	return Status{
		DesiredOptimizedAlloc: config.OptimizedAlloc{NumReplicas: vd.GetDesired(), LastRunTime: now, Accelerator: accelerator},
		Actuation:             config.Actuation{Applied: vd.GetApplied()},
		Conditions: []config.Condition{
			condition(config.ConditionTargetResolved, targetOK, ReasonTargetFound, ReasonTargetNotFound, targetMsg, now),
			condition(config.ConditionMetricsAvailable, metricsOK, ReasonMetricsFound, ReasonMetricsMissing, metricsMsg, now),
			condition(config.ConditionOptimizationReady, analyzeErr == nil, ReasonOptimizationSucceeded, ReasonOptimizationFailed, optMsg, now),
		},
	}
}

func condition(typ config.ConditionType, ok bool, reasonTrue, reasonFalse, msg string, at time.Time) config.Condition {
	c := config.Condition{Type: typ, Status: config.ConditionTrue, Reason: reasonTrue, Message: msg, LastTransitionTime: at}
	if !ok {
		c.Status, c.Reason = config.ConditionFalse, reasonFalse
	}
	return c
}

// accelerator returns a variant's accelerator type ("" when unknown).
func accelerator(set *config.Set, namespace, name string) string {
	if va, ok := set.Variant(namespace, name); ok {
		return va.Accelerator()
	}
	return ""
}

// reportHeld hands the sink the status of a model whose evaluation changed
// nothing: every target stays as it is.
func (t *term) reportHeld(a *analyzed) {
	sink := t.e.o.Status
	if sink == nil {
		return
	}
	set := t.e.config()
	now := t.e.o.Now()
	ready := map[string]int{}
	for _, v := range a.m.Variants {
		ready[v.Name] = v.Ready
	}
	for _, tg := range a.d.Targets {
		vd := &eventsv1.VariantDecision{Variant: tg.Variant, Current: int32(tg.Current), Desired: int32(tg.Desired), //nolint:gosec // replica counts
			Ready: int32(ready[tg.Variant]), Applied: true} //nolint:gosec // replica counts
		sink.SetStatus(a.m.Namespace, tg.Variant, variantStatus(vd, a.d.Analyzer, a.d.Optimizer, a.analyzeEr,
			accelerator(set, a.m.Namespace, tg.Variant), now))
	}
}
