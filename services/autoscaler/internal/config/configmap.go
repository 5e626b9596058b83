package config

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The names of the configuration ConfigMaps and their default entry.
const (
	// SaturationConfigMapName holds the saturation analyzer and optimizer
	// settings (SaturationEntry).
	SaturationConfigMapName = "wva-saturation-scaling-config"
	// QueueingConfigMapName holds the SLO (queueing model) analyzer
	// settings (QueueingEntry); its default entry activates that analyzer.
	QueueingConfigMapName = "wva-queueing-model-config"
	// ScaleToZeroConfigMapName holds the scale-to-zero settings
	// (ScaleToZeroEntry).
	ScaleToZeroConfigMapName = "wva-model-scale-to-zero-config"
	// DefaultEntry is the data entry that applies to every model; every
	// other entry is a per-model override and must carry model_id.
	DefaultEntry = "default"
)

// Defaults of the ConfigMap entries.
const (
	DefaultKVCacheThreshold     = 0.80
	DefaultQueueLengthThreshold = 5.0
	DefaultKVSpareTrigger       = 0.10
	DefaultQueueSpareTrigger    = 3.0
	DefaultScaleUpThreshold     = 0.85
	DefaultScaleDownBoundary    = 0.70
	DefaultPriority             = 1.0
	DefaultSLOMultiplier        = 3.0
	DefaultTuningEnabled        = true
	DefaultRetentionPeriod      = 10 * time.Minute
)

// EnvScaleToZero is the environment variable that enables scale to zero
// for models that neither an override nor the default entry configure.
const EnvScaleToZero = "WVA_SCALE_TO_ZERO"

// Analyzer names the analyzer that computes a model's scaling needs.
type Analyzer string

// The analyzers.
const (
	// AnalyzerSaturationPercentage is the default: percentage thresholds
	// on KV-cache usage and queue length (analyzerName "").
	AnalyzerSaturationPercentage Analyzer = "saturation-percentage-based"
	// AnalyzerSaturationToken works in KV tokens (analyzerName
	// "saturation"; experimental).
	AnalyzerSaturationToken Analyzer = "saturation-token-based"
	// AnalyzerQueueingModel is the SLO analyzer, active when the queueing
	// ConfigMap has a default entry; it then takes priority.
	AnalyzerQueueingModel Analyzer = "queueing-model"
)

// The values of a saturation entry's analyzerName.
const (
	// AnalyzerNamePercentage ("" or omitted) selects
	// AnalyzerSaturationPercentage.
	AnalyzerNamePercentage = ""
	// AnalyzerNameToken selects AnalyzerSaturationToken.
	AnalyzerNameToken = "saturation"
)

// SaturationEntry is one data entry of wva-saturation-scaling-config.
// Nil pointers are unset: an override sets only the fields it contains and
// inherits the others.
type SaturationEntry struct {
	// ModelID and Namespace select the models an override applies to
	// (Namespace "" = every namespace). Not allowed in the default entry.
	ModelID   string `json:"model_id,omitempty"`
	Namespace string `json:"namespace,omitempty"`

	AnalyzerName         *string  `json:"analyzerName,omitempty"`
	KVCacheThreshold     *float64 `json:"kvCacheThreshold,omitempty"`
	QueueLengthThreshold *float64 `json:"queueLengthThreshold,omitempty"`
	KVSpareTrigger       *float64 `json:"kvSpareTrigger,omitempty"`
	QueueSpareTrigger    *float64 `json:"queueSpareTrigger,omitempty"`
	ScaleUpThreshold     *float64 `json:"scaleUpThreshold,omitempty"`
	ScaleDownBoundary    *float64 `json:"scaleDownBoundary,omitempty"`
	EnableLimiter        *bool    `json:"enableLimiter,omitempty"`
	Priority             *float64 `json:"priority,omitempty"`
	// AcceleratorBudgets (a Hermod addition) is the GPU budget per
	// accelerator type for the greedy optimizer (enableLimiter). Budgets
	// are global: the field is an error in an override entry.
	AcceleratorBudgets map[string]int `json:"acceleratorBudgets,omitempty"`
}

// SaturationConfig is the effective saturation configuration of a model.
type SaturationConfig struct {
	// AnalyzerName is "" (AnalyzerSaturationPercentage) or "saturation"
	// (AnalyzerSaturationToken).
	AnalyzerName string
	// KVCacheThreshold and QueueLengthThreshold mark a replica saturated;
	// KVSpareTrigger and QueueSpareTrigger trigger a scale-up when the
	// average spare capacity falls below them (percentage based).
	KVCacheThreshold     float64
	QueueLengthThreshold float64
	KVSpareTrigger       float64
	QueueSpareTrigger    float64
	// ScaleUpThreshold and ScaleDownBoundary are the token-based
	// utilization bounds; 0 < ScaleDownBoundary < ScaleUpThreshold <= 1.
	ScaleUpThreshold  float64
	ScaleDownBoundary float64
	// EnableLimiter selects the greedy-by-score optimizer (GPU budgets)
	// instead of the cost-aware one.
	EnableLimiter bool
	// Priority weighs the model in the greedy optimizer's fair share.
	Priority float64
	// AcceleratorBudgets is the default entry's GPU budget per accelerator
	// type (a copy; nil when none). Accelerator types without a budget are
	// not limited.
	AcceleratorBudgets map[string]int
}

// DefaultSaturationConfig returns the built-in saturation configuration.
func DefaultSaturationConfig() SaturationConfig {
	return SaturationConfig{
		AnalyzerName:         AnalyzerNamePercentage,
		KVCacheThreshold:     DefaultKVCacheThreshold,
		QueueLengthThreshold: DefaultQueueLengthThreshold,
		KVSpareTrigger:       DefaultKVSpareTrigger,
		QueueSpareTrigger:    DefaultQueueSpareTrigger,
		ScaleUpThreshold:     DefaultScaleUpThreshold,
		ScaleDownBoundary:    DefaultScaleDownBoundary,
		Priority:             DefaultPriority,
	}
}

// Analyzer returns the saturation analyzer AnalyzerName selects.
func (c SaturationConfig) Analyzer() Analyzer {
	if c.AnalyzerName == AnalyzerNameToken {
		return AnalyzerSaturationToken
	}
	return AnalyzerSaturationPercentage
}

func (e SaturationEntry) ident() (string, string) { return e.ModelID, e.Namespace }

func (e SaturationEntry) applyTo(c *SaturationConfig) {
	set(&c.AnalyzerName, e.AnalyzerName)
	set(&c.KVCacheThreshold, e.KVCacheThreshold)
	set(&c.QueueLengthThreshold, e.QueueLengthThreshold)
	set(&c.KVSpareTrigger, e.KVSpareTrigger)
	set(&c.QueueSpareTrigger, e.QueueSpareTrigger)
	set(&c.ScaleUpThreshold, e.ScaleUpThreshold)
	set(&c.ScaleDownBoundary, e.ScaleDownBoundary)
	set(&c.EnableLimiter, e.EnableLimiter)
	set(&c.Priority, e.Priority)
	if e.AcceleratorBudgets != nil {
		c.AcceleratorBudgets = maps.Clone(e.AcceleratorBudgets)
	}
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func (c SaturationConfig) problems() problems {
	var p problems
	switch c.AnalyzerName {
	case AnalyzerNamePercentage, AnalyzerNameToken:
	default:
		p.addf("analyzerName", `must be "" (saturation-percentage-based) or "saturation" (saturation-token-based), got %q`,
			truncate(c.AnalyzerName))
	}
	kvOK := checkUnit(&p, "kvCacheThreshold", c.KVCacheThreshold)
	queueOK := c.QueueLengthThreshold > 0
	if !queueOK {
		p.addf("queueLengthThreshold", "must be > 0, got %g", c.QueueLengthThreshold)
	}
	checkTrigger(&p, "kvSpareTrigger", c.KVSpareTrigger, "kvCacheThreshold", c.KVCacheThreshold, kvOK)
	checkTrigger(&p, "queueSpareTrigger", c.QueueSpareTrigger, "queueLengthThreshold", c.QueueLengthThreshold, queueOK)
	upOK := checkUnit(&p, "scaleUpThreshold", c.ScaleUpThreshold)
	switch {
	case c.ScaleDownBoundary <= 0:
		p.addf("scaleDownBoundary", "must be > 0, got %g", c.ScaleDownBoundary)
	case upOK && c.ScaleDownBoundary >= c.ScaleUpThreshold:
		p.addRelf("scaleDownBoundary", "scaleUpThreshold", "must be below scaleUpThreshold (%g), got %g",
			c.ScaleUpThreshold, c.ScaleDownBoundary)
	}
	if c.Priority <= 0 {
		p.addf("priority", "must be > 0, got %g", c.Priority)
	}
	for _, acc := range sortedKeys(c.AcceleratorBudgets) {
		path := joinPath("acceleratorBudgets", acc)
		if acc == "" {
			p.addf(path, "accelerator type must not be empty")
		}
		if n := c.AcceleratorBudgets[acc]; n < 0 {
			p.addf(path, "must be >= 0 GPUs, got %d", n)
		}
	}
	return p
}

// checkUnit reports a field outside (0, 1] and returns whether it is
// inside.
func checkUnit(p *problems, field string, v float64) bool {
	if v > 0 && v <= 1 {
		return true
	}
	p.addf(field, "must be in (0, 1], got %g", v)
	return false
}

// checkTrigger reports a spare trigger that is negative or, when its
// threshold (the field named threshold, of value limit) is valid, not below
// the threshold.
func checkTrigger(p *problems, field string, v float64, threshold string, limit float64, limitOK bool) {
	switch {
	case v < 0:
		p.addf(field, "must be >= 0, got %g", v)
	case limitOK && v >= limit:
		p.addRelf(field, threshold, "must be below %s (%g), got %g", threshold, limit, v)
	}
}

// QueueingEntry is one data entry of wva-queueing-model-config. Nil
// pointers are unset.
type QueueingEntry struct {
	// ModelID and Namespace select the models an override applies to
	// (Namespace "" = every namespace). Not allowed in the default entry.
	ModelID   string `json:"model_id,omitempty"`
	Namespace string `json:"namespace,omitempty"`

	SLOMultiplier *float64 `json:"sloMultiplier,omitempty"`
	TuningEnabled *bool    `json:"tuningEnabled,omitempty"`
	TargetTTFT    *float64 `json:"targetTTFT,omitempty"`
	TargetITL     *float64 `json:"targetITL,omitempty"`
}

// QueueingConfig is the effective SLO (queueing model) configuration of a
// model.
type QueueingConfig struct {
	// SLOMultiplier is k in the inferred targets (k x idle latency); > 1.
	SLOMultiplier float64
	// TuningEnabled turns on the online (Kalman filter) parameter learning.
	TuningEnabled bool
	// TargetTTFT and TargetITL are explicit targets in milliseconds; 0
	// means infer the target from SLOMultiplier.
	TargetTTFT float64
	TargetITL  float64
}

// DefaultQueueingConfig returns the built-in queueing configuration.
func DefaultQueueingConfig() QueueingConfig {
	return QueueingConfig{SLOMultiplier: DefaultSLOMultiplier, TuningEnabled: DefaultTuningEnabled}
}

func (e QueueingEntry) ident() (string, string) { return e.ModelID, e.Namespace }

func (e QueueingEntry) applyTo(c *QueueingConfig) {
	set(&c.SLOMultiplier, e.SLOMultiplier)
	set(&c.TuningEnabled, e.TuningEnabled)
	set(&c.TargetTTFT, e.TargetTTFT)
	set(&c.TargetITL, e.TargetITL)
}

func (c QueueingConfig) problems() problems {
	var p problems
	if c.SLOMultiplier <= 1 {
		p.addf("sloMultiplier", "must be > 1, got %g", c.SLOMultiplier)
	}
	if c.TargetTTFT < 0 {
		p.addf("targetTTFT", "must be >= 0 ms (0 = infer), got %g", c.TargetTTFT)
	}
	if c.TargetITL < 0 {
		p.addf("targetITL", "must be >= 0 ms (0 = infer), got %g", c.TargetITL)
	}
	return p
}

// ScaleToZeroEntry is one data entry of wva-model-scale-to-zero-config.
// Nil pointers are unset; an unset enable_scale_to_zero defers to the next
// source (override > default entry > EnvScaleToZero > disabled).
type ScaleToZeroEntry struct {
	// ModelID and Namespace select the models an override applies to
	// (Namespace "" = every namespace). Not allowed in the default entry.
	ModelID   string `json:"model_id,omitempty"`
	Namespace string `json:"namespace,omitempty"`

	EnableScaleToZero *bool `json:"enable_scale_to_zero,omitempty"`
	// RetentionPeriod is a Go duration ("10m", "1h30m") > 0: a model
	// without successful requests for that long scales to zero.
	RetentionPeriod *string `json:"retention_period,omitempty"`
}

// Source tells which setting decided whether scale to zero is enabled.
type Source string

// The sources of ScaleToZeroConfig.Enabled, most specific first.
const (
	SourceOverride Source = "override"
	SourceDefault  Source = "default"
	SourceEnv      Source = "env"
	SourceBuiltin  Source = "builtin"
)

// ScaleToZeroConfig is the effective scale-to-zero configuration of a
// model.
type ScaleToZeroConfig struct {
	Enabled bool
	// RetentionPeriod is the idle time after which the model scales to
	// zero (DefaultRetentionPeriod unless configured).
	RetentionPeriod time.Duration
	// Source is where Enabled came from.
	Source Source
	// EnvErr reports an EnvScaleToZero value that is not a boolean (as
	// strconv.ParseBool reads it); Enabled is then false. Nil otherwise.
	EnvErr error
}

// scaleToZeroSettings is a merge of scale-to-zero entries.
type scaleToZeroSettings struct {
	enabled      *bool
	enabledEntry string
	retention    *string
}

func (e ScaleToZeroEntry) ident() (string, string) { return e.ModelID, e.Namespace }

func (e ScaleToZeroEntry) applyTo(c *scaleToZeroSettings) {
	if e.EnableScaleToZero != nil {
		c.enabled = e.EnableScaleToZero
	}
	if e.RetentionPeriod != nil {
		c.retention = e.RetentionPeriod
	}
}

func (c scaleToZeroSettings) problems() problems {
	var p problems
	if c.retention != nil {
		if _, err := parseRetention(*c.retention); err != nil {
			p.addf("retention_period", "%v", err)
		}
	}
	return p
}

func parseRetention(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`must be a duration like "10m" or "1h30m", got %q`, truncate(s))
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be > 0, got %q", truncate(s))
	}
	return d, nil
}

// entry is a ConfigMap data entry that merges onto a configuration C.
type entry[C any] interface {
	ident() (modelID, namespace string)
	applyTo(c *C)
}

// chain returns the names of the entries that apply to a model in a
// namespace, least specific first: the default entry, the override for
// modelID without namespace, the override for modelID in namespace.
func chain[E entry[C], C any](entries map[string]E, modelID, namespace string) []string {
	var out []string
	if _, ok := entries[DefaultEntry]; ok {
		out = append(out, DefaultEntry)
	}
	var modelOnly, namespaced string
	for _, name := range sortedKeys(entries) {
		if name == DefaultEntry {
			continue
		}
		m, ns := entries[name].ident()
		if m == "" || m != modelID {
			continue
		}
		switch {
		case ns == "" && modelOnly == "":
			modelOnly = name
		case ns != "" && ns == namespace && namespaced == "":
			namespaced = name
		}
	}
	if modelOnly != "" {
		out = append(out, modelOnly)
	}
	if namespaced != "" {
		out = append(out, namespaced)
	}
	return out
}

// merge applies the named entries in order onto base.
func merge[E entry[C], C any](entries map[string]E, names []string, base C) C {
	for _, name := range names {
		entries[name].applyTo(&base)
	}
	return base
}

// checkEntries validates the entries of a ConfigMap: the default entry
// carries no model_id or namespace; every override carries a model_id, a
// valid namespace and a (model_id, namespace) pair no other override has;
// extra adds checks of one entry; and the merge of every entry with the
// entries it inherits from (see chain) passes check. A merged problem is
// reported on an entry only when the entry sets the field, or sets the
// other field of a cross-field rule and the inherited value was valid
// before: an invalid default is not reported again on every override.
func checkEntries[E entry[C], C any](entries map[string]E, builtin C, check func(C) problems,
	extra func(name string, e E, p *problems)) problems {
	var p problems
	seen := map[[2]string]string{}
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		prefix := joinPath("data", name)
		m, ns := e.ident()
		if name == DefaultEntry {
			if m != "" {
				p.addf(prefix+".model_id", "not allowed in the default entry, which applies to every model")
			}
			if ns != "" {
				p.addf(prefix+".namespace", "not allowed in the default entry, which applies to every model")
			}
		} else {
			if m == "" {
				p.addf(prefix+".model_id", "required in an override entry (every entry but %q overrides one model)", DefaultEntry)
			}
			checkNamespace(&p, prefix+".namespace", ns)
			if m != "" {
				key := [2]string{m, ns}
				if prev, dup := seen[key]; dup {
					p.addf(prefix+".model_id", "model_id %q with namespace %q is already overridden by %s",
						truncate(m), truncate(ns), joinPath("data", prev))
				} else {
					seen[key] = name
				}
			}
		}
		if extra != nil {
			extra(name, e, &p)
		}
	}
	for _, name := range sortedKeys(entries) {
		var names []string
		if name == DefaultEntry {
			names = []string{DefaultEntry}
		} else {
			m, ns := entries[name].ident()
			if m == "" {
				continue
			}
			names = chain(entries, m, ns)
			if names[len(names)-1] != name {
				continue // a duplicate override, reported above
			}
		}
		// Fields already invalid in the merge this entry inherits from are
		// reported on the entry they come from.
		inherited := map[string]bool{}
		for _, q := range check(merge(entries, names[:len(names)-1], builtin)) {
			inherited[q.field] = true
		}
		for _, q := range check(merge(entries, names, builtin)) {
			own := entrySets(entries[name], topField(q.field))
			if !own && (q.related == "" || !entrySets(entries[name], q.related) || inherited[q.field]) {
				continue
			}
			msg := q.msg
			if !own {
				msg += " (" + inheritedFrom(entries, names, topField(q.field)) + ")"
			}
			p = append(p, problem{field: joinPath("data", name) + "." + q.field, msg: msg})
		}
	}
	return p
}

// inheritedFrom names where the merged value of field came from.
func inheritedFrom[E any](entries map[string]E, names []string, field string) string {
	for i := len(names) - 1; i >= 0; i-- {
		if entrySets(entries[names[i]], field) {
			return "inherited from " + joinPath("data", names[i])
		}
	}
	return "built-in default"
}

// topField returns the first component of a field path.
func topField(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// entrySets reports whether the entry struct e sets the field with JSON
// name field (a non-nil pointer or map, or a non-zero value).
func entrySets(e any, field string) bool {
	v := reflect.ValueOf(e)
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != field {
			continue
		}
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice:
			return !f.IsNil()
		default:
			return !f.IsZero()
		}
	}
	return false
}

// SaturationConfigMap is wva-saturation-scaling-config.
type SaturationConfigMap struct {
	Metadata ObjectMeta
	// Entries maps a data entry's name to its parsed content.
	Entries map[string]SaturationEntry
}

// QueueingConfigMap is wva-queueing-model-config.
type QueueingConfigMap struct {
	Metadata ObjectMeta
	// Entries maps a data entry's name to its parsed content.
	Entries map[string]QueueingEntry
}

// ScaleToZeroConfigMap is wva-model-scale-to-zero-config.
type ScaleToZeroConfigMap struct {
	Metadata ObjectMeta
	// Entries maps a data entry's name to its parsed content.
	Entries map[string]ScaleToZeroEntry
}

// ObjectKind returns "ConfigMap".
func (m *SaturationConfigMap) ObjectKind() string { return ConfigMapKind }

// ObjectKind returns "ConfigMap".
func (m *QueueingConfigMap) ObjectKind() string { return ConfigMapKind }

// ObjectKind returns "ConfigMap".
func (m *ScaleToZeroConfigMap) ObjectKind() string { return ConfigMapKind }

// ObjectName returns metadata.name.
func (m *SaturationConfigMap) ObjectName() string { return m.Metadata.Name }

// ObjectName returns metadata.name.
func (m *QueueingConfigMap) ObjectName() string { return m.Metadata.Name }

// ObjectName returns metadata.name.
func (m *ScaleToZeroConfigMap) ObjectName() string { return m.Metadata.Name }

// configMapDoc returns the ConfigMap document Marshal writes.
func (m *SaturationConfigMap) configMapDoc() (*configMapDoc, error) {
	return configMapDocOf(m.Metadata, m.Entries)
}

// configMapDoc returns the ConfigMap document Marshal writes.
func (m *QueueingConfigMap) configMapDoc() (*configMapDoc, error) {
	return configMapDocOf(m.Metadata, m.Entries)
}

// configMapDoc returns the ConfigMap document Marshal writes.
func (m *ScaleToZeroConfigMap) configMapDoc() (*configMapDoc, error) {
	return configMapDocOf(m.Metadata, m.Entries)
}

// Validate checks the ConfigMap: its name, and every entry alone and
// merged with the entries it inherits from. It returns every problem as a
// *FieldError, joined with errors.Join; nil when valid.
func (m *SaturationConfigMap) Validate() error {
	return validateConfigMap(m.Metadata, SaturationConfigMapName, m.Entries, DefaultSaturationConfig(), SaturationConfig.problems,
		func(name string, e SaturationEntry, p *problems) {
			if name != DefaultEntry && e.AcceleratorBudgets != nil {
				p.addf(joinPath("data", name)+".acceleratorBudgets",
					"only allowed in the %q entry (GPU budgets are shared by all models)", DefaultEntry)
			}
		})
}

// Validate checks the ConfigMap like SaturationConfigMap.Validate.
func (m *QueueingConfigMap) Validate() error {
	return validateConfigMap(m.Metadata, QueueingConfigMapName, m.Entries, DefaultQueueingConfig(), QueueingConfig.problems, nil)
}

// Validate checks the ConfigMap like SaturationConfigMap.Validate.
func (m *ScaleToZeroConfigMap) Validate() error {
	return validateConfigMap(m.Metadata, ScaleToZeroConfigMapName, m.Entries, scaleToZeroSettings{}, scaleToZeroSettings.problems, nil)
}

// validateConfigMap checks a ConfigMap's metadata against its expected
// name and its entries with checkEntries.
func validateConfigMap[E entry[C], C any](meta ObjectMeta, want string, entries map[string]E, builtin C,
	check func(C) problems, extra func(name string, e E, p *problems)) error {
	var p problems
	if meta.Name != want {
		p.addf("metadata.name", "must be %s, got %q", want, truncate(meta.Name))
	}
	checkNamespace(&p, "metadata.namespace", meta.Namespace)
	p = append(p, checkEntries(entries, builtin, check, extra)...)
	return joinErrs(p.errs(configMapLabel(meta.Name)))
}

// configMapNames are the ConfigMap names Parse accepts.
var configMapNames = []string{SaturationConfigMapName, QueueingConfigMapName, ScaleToZeroConfigMapName}

// configMapLabel names a ConfigMap in errors: its name when it is one of
// ours, else `ConfigMap "name"`.
func configMapLabel(name string) string {
	for _, n := range configMapNames {
		if name == n {
			return name
		}
	}
	if name == "" {
		return ConfigMapKind
	}
	return fmt.Sprintf("%s %q", ConfigMapKind, truncate(name))
}

// Resolve returns the saturation configuration of a model in a namespace:
// the built-in defaults, overlaid by the default entry, the model's
// override without namespace, then its override for namespace. A nil map
// resolves to DefaultSaturationConfig. The error lists the problems of an
// invalid merge (Validate rejects those ConfigMaps).
func (m *SaturationConfigMap) Resolve(modelID, namespace string) (SaturationConfig, error) {
	if m == nil {
		return DefaultSaturationConfig(), nil
	}
	names := chain(m.Entries, modelID, namespace)
	c := merge(m.Entries, names, DefaultSaturationConfig())
	// Budgets are global: only the default entry's count.
	c.AcceleratorBudgets = nil
	if d, ok := m.Entries[DefaultEntry]; ok && d.AcceleratorBudgets != nil {
		c.AcceleratorBudgets = maps.Clone(d.AcceleratorBudgets)
	}
	if p := c.problems(); len(p) > 0 {
		label := fmt.Sprintf("%s (model_id %q, namespace %q)", configMapLabel(m.Metadata.Name), modelID, namespace)
		return c, fmt.Errorf("resolve saturation config: %w", joinErrs(p.errs(label)))
	}
	return c, nil
}

// Resolve returns the queueing configuration of a model in a namespace,
// merged like SaturationConfigMap.Resolve, and whether the SLO analyzer is
// active: the map exists and has a default entry. A nil map resolves to
// DefaultQueueingConfig, inactive.
func (m *QueueingConfigMap) Resolve(modelID, namespace string) (QueueingConfig, bool) {
	if m == nil {
		return DefaultQueueingConfig(), false
	}
	_, active := m.Entries[DefaultEntry]
	return merge(m.Entries, chain(m.Entries, modelID, namespace), DefaultQueueingConfig()), active
}

// Resolve returns the scale-to-zero configuration of a model in a
// namespace. Enabled comes from the first that is set of: the model's
// override for namespace, its override without namespace, the default
// entry, the environment variable EnvScaleToZero (read with env, os.Getenv
// when nil; a value strconv.ParseBool rejects counts as false and is
// reported in EnvErr); else false. RetentionPeriod comes from the most
// specific entry that sets it, else DefaultRetentionPeriod. A nil map
// consults only the environment.
func (m *ScaleToZeroConfigMap) Resolve(modelID, namespace string, env func(string) string) ScaleToZeroConfig {
	var s scaleToZeroSettings
	if m != nil {
		for _, name := range chain(m.Entries, modelID, namespace) {
			e := m.Entries[name]
			e.applyTo(&s)
			if e.EnableScaleToZero != nil {
				s.enabledEntry = name
			}
		}
	}
	c := ScaleToZeroConfig{RetentionPeriod: DefaultRetentionPeriod, Source: SourceBuiltin}
	if s.retention != nil {
		if d, err := parseRetention(*s.retention); err == nil {
			c.RetentionPeriod = d
		}
	}
	switch {
	case s.enabled != nil:
		c.Enabled = *s.enabled
		c.Source = SourceOverride
		if s.enabledEntry == DefaultEntry {
			c.Source = SourceDefault
		}
	default:
		if env == nil {
			env = os.Getenv
		}
		if v := env(EnvScaleToZero); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				c.EnvErr = fmt.Errorf("%s=%q is not a boolean, scale to zero stays disabled: %w", EnvScaleToZero, truncate(v), err)
			} else {
				c.Enabled = b
				c.Source = SourceEnv
			}
		}
	}
	return c
}
