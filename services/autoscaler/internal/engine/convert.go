package engine

import (
	"context"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// variantOf returns a variant's settings (its observed state is filled
// later).
func variantOf(va *config.VariantAutoscaling) *scaling.Variant {
	return &scaling.Variant{
		Name: va.Metadata.Name, Namespace: va.Metadata.Namespace, ModelID: va.Spec.ModelID, Cost: va.Cost(),
		MinReplicas: va.Min(), MaxReplicas: va.Max(), Accelerator: va.Accelerator(), GPUsPerReplica: va.GPUsPerReplica(),
		MaxNumBatchedTokens: va.MaxNumBatchedTokens(), MaxNumSeqs: va.MaxNumSeqs(),
	}
}

// targetOf returns the actuator's target of a variant.
func targetOf(va *config.VariantAutoscaling) actuator.Target {
	r := va.Spec.ScaleTargetRef
	return actuator.Target{Variant: va.Metadata.Name, Namespace: va.Metadata.Namespace, APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
}

// inputsOf returns a decision's inputs.
func inputsOf(m *scaling.Model) *eventsv1.ModelInputs {
	in := &eventsv1.ModelInputs{GatewayQueue: m.GatewayQueue, SuccessInRetention: m.SuccessInRetention}
	for _, v := range m.Variants {
		for _, r := range v.Replicas {
			in.ArrivalRate += r.ArrivalRate
			in.Replicas = append(in.Replicas, &eventsv1.ReplicaInputs{
				Name: r.Name, Variant: r.Variant, KvUsage: r.KVUsage, Queue: r.Queue, Running: r.Running,
				KvCapacityTokens: r.KVCapacityTokens, TokensInUse: r.TokensInUse, AvgInputTokens: r.AvgInputTokens,
				AvgOutputTokens: r.AvgOutputTokens, PrefixHitRate: r.PrefixHitRate, ArrivalRate: r.ArrivalRate,
				AvgTtftMs: r.AvgTTFT, AvgItlMs: r.AvgITL,
			})
		}
	}
	return in
}

// Status is a variant's status as the autoscaler records it in etcd: the
// VariantAutoscaling status of reference/004.
type Status = config.VariantAutoscalingStatus

// writeStatus records each variant's status after a decision, in etcd
// and with the status sink.
func (t *term) writeStatus(ctx context.Context, ev *eventsv1.ScalingDecision) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := ev.GetTime().AsTime()
	set := t.e.config()
	for _, v := range ev.GetVariants() {
		st := variantStatus(v, ev.GetAnalyzer(), ev.GetOptimizer(), nil, accelerator(set, v.GetNamespace(), v.GetVariant()), now)
		if _, err := store.PutJSON(ctx, t.e.o.Client, store.StatusKey(t.e.o.Pool, v.GetVariant()), st, t.fence); err != nil {
			t.log.Warn("writing the status failed", "variant", v.GetVariant(), "error", err)
		}
		if t.e.o.Status != nil {
			t.e.o.Status.SetStatus(v.GetNamespace(), v.GetVariant(), st)
		}
	}
}
