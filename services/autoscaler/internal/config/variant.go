package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// API versions and kinds of the objects Parse accepts.
const (
	// VariantAutoscalingAPIVersion is the apiVersion of a VariantAutoscaling.
	VariantAutoscalingAPIVersion = "llmd.ai/v1alpha1"
	// VariantAutoscalingKind is the kind of a VariantAutoscaling.
	VariantAutoscalingKind = "VariantAutoscaling"
	// ConfigMapAPIVersion is the apiVersion of the configuration ConfigMaps.
	ConfigMapAPIVersion = "v1"
	// ConfigMapKind is the kind of the configuration ConfigMaps.
	ConfigMapKind = "ConfigMap"
)

// Defaults of a VariantAutoscaling's spec and labels.
const (
	DefaultMinReplicas = 1
	DefaultMaxReplicas = 2
	// DefaultVariantCost is the default spec.variantCost.
	DefaultVariantCost = "10.0"
	// DefaultGPUsPerReplica is the default of LabelGPUsPerReplica.
	DefaultGPUsPerReplica = 1
	// DefaultMaxNumBatchedTokens is the default of LabelMaxNumBatchedTokens
	// (vLLM's max_num_batched_tokens).
	DefaultMaxNumBatchedTokens = 8192
	// DefaultMaxNumSeqs is the default of LabelMaxNumSeqs (vLLM's
	// max_num_seqs).
	DefaultMaxNumSeqs = 256
)

// Metadata labels Hermod reads from a VariantAutoscaling.
const (
	// LabelAccelerator holds the variant's accelerator type (e.g. "A100"),
	// the key of the GPU budgets in acceleratorBudgets.
	LabelAccelerator = "inference.optimization/acceleratorName"
	// LabelGPUsPerReplica holds the GPUs one replica uses (a positive
	// integer, default 1).
	LabelGPUsPerReplica = "hermod.io/gpus-per-replica"
	// LabelMaxNumBatchedTokens holds the engine's max batched tokens per
	// iteration (a positive integer, default 8192).
	LabelMaxNumBatchedTokens = "hermod.io/max-num-batched-tokens"
	// LabelMaxNumSeqs holds the engine's max sequences per batch (a
	// positive integer, default 256).
	LabelMaxNumSeqs = "hermod.io/max-num-seqs"
)

// ConditionType is the type of a VariantAutoscaling status condition.
type ConditionType string

// The condition types of a VariantAutoscaling.
const (
	// ConditionTargetResolved: the scale target was found.
	ConditionTargetResolved ConditionType = "TargetResolved"
	// ConditionMetricsAvailable: the variant's metrics are available.
	ConditionMetricsAvailable ConditionType = "MetricsAvailable"
	// ConditionOptimizationReady: the optimization ran successfully.
	ConditionOptimizationReady ConditionType = "OptimizationReady"
)

// ConditionStatus is the status of a condition.
type ConditionStatus string

// The condition statuses (as Kubernetes conditions).
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// ObjectMeta is the metadata of an object.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VariantAutoscaling is the autoscaling configuration of one variant of a
// model: a scalable target serving modelID on one hardware configuration.
// Variants with the same modelID (and namespace) form a group optimized
// together.
type VariantAutoscaling struct {
	APIVersion string                   `json:"apiVersion"`
	Kind       string                   `json:"kind"`
	Metadata   ObjectMeta               `json:"metadata"`
	Spec       VariantAutoscalingSpec   `json:"spec"`
	Status     VariantAutoscalingStatus `json:"status,omitzero"`
}

// VariantAutoscalingSpec is the desired configuration of a variant.
// Optional fields are pointers or empty strings when unset; the accessors
// of VariantAutoscaling apply the defaults.
type VariantAutoscalingSpec struct {
	ScaleTargetRef ScaleTargetRef `json:"scaleTargetRef"`
	// ModelID links the variant to its model (InferencePool); required.
	ModelID string `json:"modelID"`
	// MinReplicas is the lower replica bound (default 1; 0 allows scale
	// to zero).
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper replica bound (default 2).
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// VariantCost is the cost of one replica as a decimal string (default
	// "10.0"); it must parse as a finite number >= 0.
	VariantCost string `json:"variantCost,omitempty"`
}

// ScaleTargetRef references the scalable resource of a variant.
type ScaleTargetRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is e.g. Deployment, StatefulSet or LeaderWorkerSet; required.
	Kind string `json:"kind"`
	// Name is the target's name, in the variant's namespace; required.
	Name string `json:"name"`
}

// VariantAutoscalingStatus is the observed state of a variant, written by
// the autoscaler.
type VariantAutoscalingStatus struct {
	DesiredOptimizedAlloc OptimizedAlloc `json:"desiredOptimizedAlloc,omitzero"`
	Actuation             Actuation      `json:"actuation,omitzero"`
	Conditions            []Condition    `json:"conditions,omitempty"`
}

// OptimizedAlloc is the optimizer's last decision for a variant.
type OptimizedAlloc struct {
	NumReplicas int32     `json:"numReplicas"`
	LastRunTime time.Time `json:"lastRunTime,omitzero"`
	// Accelerator is the accelerator type (deprecated in reference/004).
	Accelerator string `json:"accelerator,omitempty"`
}

// Actuation tells whether the last decision was applied to the target.
type Actuation struct {
	Applied bool `json:"applied"`
}

// Condition is one observable condition of a variant.
type Condition struct {
	Type               ConditionType   `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime,omitzero"`
}

// ObjectKind returns "VariantAutoscaling".
func (v *VariantAutoscaling) ObjectKind() string { return VariantAutoscalingKind }

// ObjectName returns metadata.name.
func (v *VariantAutoscaling) ObjectName() string { return v.Metadata.Name }

func (v *VariantAutoscaling) label() string {
	return objectLabel(VariantAutoscalingKind, v.Metadata.Name)
}

// Min returns spec.minReplicas, DefaultMinReplicas when unset.
func (v *VariantAutoscaling) Min() int {
	if v.Spec.MinReplicas == nil {
		return DefaultMinReplicas
	}
	return int(*v.Spec.MinReplicas)
}

// Max returns spec.maxReplicas, DefaultMaxReplicas when unset.
func (v *VariantAutoscaling) Max() int {
	if v.Spec.MaxReplicas == nil {
		return DefaultMaxReplicas
	}
	return int(*v.Spec.MaxReplicas)
}

// Cost returns spec.variantCost as a number: DefaultVariantCost (10) when
// unset, and also when it is invalid (Validate rejects that).
func (v *VariantAutoscaling) Cost() float64 {
	c, err := parseCost(v.Spec.VariantCost)
	if err != nil {
		c, _ = parseCost(DefaultVariantCost)
	}
	return c
}

// Accelerator returns the accelerator type from LabelAccelerator ("" when
// unset).
func (v *VariantAutoscaling) Accelerator() string { return v.Metadata.Labels[LabelAccelerator] }

// GPUsPerReplica returns LabelGPUsPerReplica, DefaultGPUsPerReplica when
// unset or invalid (Validate rejects invalid values).
func (v *VariantAutoscaling) GPUsPerReplica() int {
	return v.intLabel(LabelGPUsPerReplica, DefaultGPUsPerReplica)
}

// MaxNumBatchedTokens returns LabelMaxNumBatchedTokens,
// DefaultMaxNumBatchedTokens when unset or invalid.
func (v *VariantAutoscaling) MaxNumBatchedTokens() int {
	return v.intLabel(LabelMaxNumBatchedTokens, DefaultMaxNumBatchedTokens)
}

// MaxNumSeqs returns LabelMaxNumSeqs, DefaultMaxNumSeqs when unset or
// invalid.
func (v *VariantAutoscaling) MaxNumSeqs() int {
	return v.intLabel(LabelMaxNumSeqs, DefaultMaxNumSeqs)
}

func (v *VariantAutoscaling) intLabel(key string, def int) int {
	s, ok := v.Metadata.Labels[key]
	if !ok {
		return def
	}
	n, err := parsePositiveInt(s)
	if err != nil {
		return def
	}
	return n
}

// SetDefaults fills the unset optional spec fields with their defaults
// (minReplicas, maxReplicas, variantCost), so that the stored or printed
// object shows the effective values.
func (v *VariantAutoscaling) SetDefaults() {
	if v.Spec.MinReplicas == nil {
		n := int32(DefaultMinReplicas)
		v.Spec.MinReplicas = &n
	}
	if v.Spec.MaxReplicas == nil {
		n := int32(DefaultMaxReplicas)
		v.Spec.MaxReplicas = &n
	}
	if v.Spec.VariantCost == "" {
		v.Spec.VariantCost = DefaultVariantCost
	}
}

// Validate checks the object and returns every problem as a *FieldError,
// joined with errors.Join; nil when valid.
func (v *VariantAutoscaling) Validate() error {
	return joinErrs(v.problems().errs(v.label()))
}

var (
	// dns1123Subdomain is a Kubernetes object name: dot-separated labels
	// of lowercase alphanumerics and '-', each starting and ending
	// alphanumeric; at most 253 characters.
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// dns1123Label is a Kubernetes namespace name; at most 63 characters.
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func checkName(p *problems, field, name string) {
	switch {
	case name == "":
		p.addf(field, "required")
	case len(name) > 253 || !dns1123Subdomain.MatchString(name):
		p.addf(field, "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "+
			"starting and ending with a letter or digit, at most 253 characters), got %q", truncate(name))
	}
}

func checkNamespace(p *problems, field, ns string) {
	if ns != "" && (len(ns) > 63 || !dns1123Label.MatchString(ns)) {
		p.addf(field, "must be a DNS-1123 label (lowercase letters, digits and '-', "+
			"starting and ending with a letter or digit, at most 63 characters), got %q", truncate(ns))
	}
}

func (v *VariantAutoscaling) problems() problems {
	var p problems
	if v.APIVersion != VariantAutoscalingAPIVersion {
		p.addf("apiVersion", "must be %s, got %q", VariantAutoscalingAPIVersion, v.APIVersion)
	}
	if v.Kind != VariantAutoscalingKind {
		p.addf("kind", "must be %s, got %q", VariantAutoscalingKind, v.Kind)
	}
	checkName(&p, "metadata.name", v.Metadata.Name)
	checkNamespace(&p, "metadata.namespace", v.Metadata.Namespace)
	for _, key := range []string{LabelGPUsPerReplica, LabelMaxNumBatchedTokens, LabelMaxNumSeqs} {
		if s, ok := v.Metadata.Labels[key]; ok {
			if _, err := parsePositiveInt(s); err != nil {
				p.addf(joinPath("metadata.labels", key), "must be a positive integer, got %q", truncate(s))
			}
		}
	}

	s := &v.Spec
	if s.ScaleTargetRef.Kind == "" {
		p.addf("spec.scaleTargetRef.kind", "required")
	}
	if s.ScaleTargetRef.Name == "" {
		p.addf("spec.scaleTargetRef.name", "required")
	}
	if s.ModelID == "" {
		p.addf("spec.modelID", "required")
	}
	minOK, maxOK := true, true
	if s.MinReplicas != nil && *s.MinReplicas < 0 {
		p.addf("spec.minReplicas", "must be >= 0, got %d", *s.MinReplicas)
		minOK = false
	}
	if s.MaxReplicas != nil && *s.MaxReplicas < 1 {
		p.addf("spec.maxReplicas", "must be >= 1, got %d", *s.MaxReplicas)
		maxOK = false
	}
	if minOK && maxOK && v.Min() > v.Max() {
		def := ""
		if s.MaxReplicas == nil {
			def = ", the default"
		}
		p.addRelf("spec.minReplicas", "spec.maxReplicas", "must be <= maxReplicas (%d%s), got %d", v.Max(), def, v.Min())
	}
	if s.VariantCost != "" {
		if _, err := parseCost(s.VariantCost); err != nil {
			p.addf("spec.variantCost", "must be a finite number >= 0 written as a string, got %q", truncate(s.VariantCost))
		}
	}

	st := &v.Status
	if st.DesiredOptimizedAlloc.NumReplicas < 0 {
		p.addf("status.desiredOptimizedAlloc.numReplicas", "must be >= 0, got %d", st.DesiredOptimizedAlloc.NumReplicas)
	}
	for i, c := range st.Conditions {
		path := indexPath("status.conditions", i)
		if c.Type == "" {
			p.addf(path+".type", "required")
		}
		switch c.Status {
		case ConditionTrue, ConditionFalse, ConditionUnknown:
		default:
			p.addf(path+".status", "must be True, False or Unknown, got %q", truncate(string(c.Status)))
		}
	}
	return p
}

func parseCost(s string) (float64, error) {
	if s == "" {
		s = DefaultVariantCost
	}
	c, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if math.IsInf(c, 0) || math.IsNaN(c) || c < 0 {
		return 0, fmt.Errorf("cost %q is not a finite number >= 0", s)
	}
	return c, nil
}

func parsePositiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("%d is not positive", n)
	}
	return n, nil
}
