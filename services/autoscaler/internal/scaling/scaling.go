// Package scaling holds the types the autoscaler's pipeline stages share:
// the observed state of a model's variants and replicas (the analyzers'
// input), the analyzers' capacity signals (the optimizer's input) and the
// per-variant targets the optimizer and enforcer produce.
package scaling

import "time"

// Role is a replica's role under prefill/decode disaggregation.
type Role string

// The roles; RoleBoth is a replica that does prefill and decode.
const (
	RoleBoth    Role = ""
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

// Replica is one ready model-server replica of a variant, with the windowed
// inputs the analyzers read.
type Replica struct {
	Name    string
	Variant string
	Role    Role

	// KVUsage is the KV-cache usage 0..1, the max over the last minute.
	KVUsage float64
	// Queue is the number of waiting requests, the max over the last minute.
	Queue float64
	// Running is the number of running requests (latest).
	Running float64
	// KVCapacityTokens is num_gpu_blocks x block_size (0 when unknown).
	KVCapacityTokens float64
	// TokensInUse is the KV tokens in use (latest usage x capacity).
	TokensInUse float64
	// AvgInputTokens and AvgOutputTokens are per request, over 5 minutes
	// (0 when no request completed).
	AvgInputTokens  float64
	AvgOutputTokens float64
	// PrefixHitRate is the prefix-cache hit ratio over 5 minutes.
	PrefixHitRate float64
	// ArrivalRate is requests routed to the replica per second (1 minute).
	ArrivalRate float64
	// AvgTTFT and AvgITL are milliseconds over the last minute (0 when no
	// request completed).
	AvgTTFT float64
	AvgITL  float64
}

// Variant is one VariantAutoscaling target with its observed state.
type Variant struct {
	Name      string
	Namespace string
	ModelID   string
	// Cost is the cost of one replica (variantCost).
	Cost        float64
	MinReplicas int
	MaxReplicas int
	// Accelerator is the replica's accelerator type and GPUsPerReplica its
	// count (the GPU budget of the greedy optimizer).
	Accelerator    string
	GPUsPerReplica int
	// MaxNumBatchedTokens and MaxNumSeqs are the engine's batching limits
	// (0: the defaults 8192 and 256).
	MaxNumBatchedTokens int
	MaxNumSeqs          int

	// Current is the replica count the target is set to; Ready the
	// replicas serving (Replicas holds them). Current - Ready (when
	// positive) are pending.
	Current  int
	Ready    int
	Replicas []Replica
}

// Pending returns the replicas the target asks for that do not serve yet.
func (v *Variant) Pending() int { return max(0, v.Current-v.Ready) }

// Model is a variant group: the variants serving one modelID, optimized
// together, with the model-level inputs.
type Model struct {
	ID        string
	Namespace string
	Variants  []*Variant
	// GatewayQueue is the requests for the model held by the gateways'
	// flow control (upstream demand), summed over the gateway replicas.
	GatewayQueue float64
	// SuccessInRetention is the successful requests over the scale-to-zero
	// retention period; RetentionObserved is false until the autoscaler has
	// watched the model for a whole retention period.
	SuccessInRetention float64
	RetentionObserved  bool
	Now                time.Time
}

// Transitioning reports whether any variant's replicas differ from its
// target or has pending replicas.
func (m *Model) Transitioning() bool {
	for _, v := range m.Variants {
		if v.Pending() > 0 || v.Ready > v.Current {
			return true
		}
	}
	return false
}

// Analysis is an analyzer's capacity signal for one model (or one role of
// it). Capacities are in the analyzer's unit (replicas for the percentage
// analyzer, KV tokens for the token analyzer, requests per second for the
// SLO analyzer); VariantCapacity gives one replica's capacity per variant in
// the same unit.
type Analysis struct {
	ModelID  string
	Role     Role
	Analyzer string
	// Required > 0 asks for that much more capacity; Spare > 0 says that
	// much can be removed. At most one of them is positive.
	Required float64
	Spare    float64
	// VariantCapacity is one replica's capacity per variant name.
	VariantCapacity map[string]float64
	// Demand and Supply are the totals behind the signal (for the event).
	Demand float64
	Supply float64
	// Priority orders models for the greedy optimizer (default 1).
	Priority float64
	// SkipPending: a scale-up skips variants with pending replicas.
	SkipPending bool
	// ScaleDownMinCurrent: a scale-down only takes from a variant with more
	// than this many replicas (the percentage analyzer's "> 1 replica").
	ScaleDownMinCurrent int
	// Hold: the analyzer asks for no change (a variant in transition).
	Hold bool
	// Reasons explain the signal in words, for the decision event.
	Reasons []string
}

// Target is the replica count chosen for one variant, with why.
type Target struct {
	Variant string
	Current int
	Desired int
	Reason  string
}
