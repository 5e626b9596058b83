package flowcontrol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hermod/hermod/libs/plugins/agentidentity"
	"github.com/hermod/hermod/libs/scheduling"
)

// Request headers of flow control.
const (
	ObjectiveHeader = "x-gateway-inference-objective"
	PriorityHeader  = "x-gateway-inference-priority"
	FairnessHeader  = "x-gateway-inference-fairness-id"
)

// FileConfig is the gateway's --flow-control file.
type FileConfig struct {
	// Queueing holds requests while the pool is saturated (off: shed
	// sheddable ones with 429, refuse the others with 503 at once).
	Queueing bool `json:"queueing"`
	// MaxConcurrency bounds this gateway's requests in flight (0: none).
	MaxConcurrency int `json:"maxConcurrency"`
	// DefaultRequestTTL bounds a request's wait in the queue (default 60s).
	DefaultRequestTTL string `json:"defaultRequestTTL"`
	// MaxQueued bounds the requests waiting (default 10000).
	MaxQueued int `json:"maxQueued"`
	// Objectives name priorities for x-gateway-inference-objective.
	Objectives map[string]int `json:"objectives"`
	// BandShares give priority bands a least share of the dispatches.
	BandShares map[string]float64 `json:"bandShares"`
	// HoldWhenEmpty counts a pool with no endpoint (none with fresh
	// metrics) as saturated, so that with queueing requests wait for the
	// autoscaler to bring a pod up (scale from zero) instead of failing.
	HoldWhenEmpty bool `json:"holdWhenEmpty"`
	// Saturation is the queue/kv rule's thresholds.
	Saturation struct {
		QueueDepthThreshold  int     `json:"queueDepthThreshold"`
		KVCacheUtilThreshold float64 `json:"kvCacheUtilThreshold"`
	} `json:"saturation"`
}

// Settings are a checked FileConfig, or the flowControl section of an
// EndpointPickerConfig.
type Settings struct {
	// Source is what the settings were read from: "file" (a FileConfig)
	// or EndpointPickerConfig.
	Source         string
	Config         Config
	MaxConcurrency int
	Objectives     map[string]int
	// DefaultObjective gives an objective Objectives does not name the
	// default priority, 0 (as the llm-d router does for an objective no
	// InferenceObjective describes), rather than refuse the request.
	DefaultObjective bool
	// Detector measures saturation with QueueDepth and KVCacheUtil
	// (metrics older than Staleness are not fresh), or with
	// EndpointConcurrency requests per endpoint.
	Detector            Detector
	QueueDepth          int
	KVCacheUtil         float64
	Staleness           time.Duration
	EndpointConcurrency int
	HoldWhenEmpty       bool
	// SessionHeaders (an agent-identity plugin's) name the flow of a
	// request that names none: a coding agent's session.
	SessionHeaders []string
	// Warnings name what the configuration asks for that is not done.
	Warnings []string
}

// ReadFile reads and checks a --flow-control file (YAML or JSON); errors
// name the field.
func ReadFile(name string) (Settings, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return Settings{}, fmt.Errorf("flow control: %w", err)
	}
	return Parse(b)
}

// Parse reads and checks a flow-control configuration: a FileConfig, or
// an EndpointPickerConfig (kind: EndpointPickerConfig) whose flowControl
// section and policies the gateway applies.
func Parse(data []byte) (Settings, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return Settings{}, fmt.Errorf("flow control: %w", err)
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(js, &head) == nil && head.Kind == scheduling.ConfigKind {
		return parsePickerConfig(data)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var f FileConfig
	if err := dec.Decode(&f); err != nil {
		return Settings{}, fmt.Errorf("flow control: %w", err)
	}
	s := Settings{Source: "file", Config: Config{Queueing: f.Queueing, MaxQueued: f.MaxQueued, Shares: map[int]float64{}},
		MaxConcurrency: f.MaxConcurrency, Objectives: f.Objectives, QueueDepth: DefaultQueueDepth, KVCacheUtil: DefaultKVCacheUtil,
		Staleness: DefaultStaleness, HoldWhenEmpty: f.HoldWhenEmpty}
	var errs []error
	if f.DefaultRequestTTL != "" {
		d, err := time.ParseDuration(f.DefaultRequestTTL)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("defaultRequestTTL: %q is not a positive duration like 30s", f.DefaultRequestTTL))
		}
		s.Config.DefaultTTL = d
	}
	if f.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("maxConcurrency: must not be negative (got %d)", f.MaxConcurrency))
	}
	if f.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("maxQueued: must not be negative (got %d)", f.MaxQueued))
	}
	total := 0.0
	for band, share := range f.BandShares {
		p, err := strconv.Atoi(band)
		if err != nil {
			errs = append(errs, fmt.Errorf("bandShares.%s: a band is a priority, an integer", band))
			continue
		}
		if share <= 0 || share >= 1 {
			errs = append(errs, fmt.Errorf("bandShares.%s: a share is between 0 and 1 (got %v)", band, share))
		}
		s.Config.Shares[p] = share
		total += share
	}
	if total >= 1 {
		errs = append(errs, fmt.Errorf("bandShares: the shares add up to %v, at least 1", total))
	}
	if v := f.Saturation.QueueDepthThreshold; v != 0 {
		if v < 0 {
			errs = append(errs, fmt.Errorf("saturation.queueDepthThreshold: must be positive (got %d)", v))
		}
		s.QueueDepth = v
	}
	if v := f.Saturation.KVCacheUtilThreshold; v != 0 {
		if v < 0 || v > 1 {
			errs = append(errs, fmt.Errorf("saturation.kvCacheUtilThreshold: must be in (0, 1] (got %v)", v))
		}
		s.KVCacheUtil = v
	}
	return s, errors.Join(errs...)
}

// Classify reads a request's priority (the named objective's, else the
// numeric header, else 0) and flow (FairnessID, else an agent's session
// by SessionHeaders) from its headers.
func (s Settings) Classify(h http.Header) (priority int, flow string, err error) {
	if name := h.Get(ObjectiveHeader); name != "" {
		p, ok := s.Objectives[name]
		if !ok && !s.DefaultObjective {
			return 0, "", fmt.Errorf("%s: unknown objective %q", ObjectiveHeader, name)
		}
		priority = p
	} else if v := h.Get(PriorityHeader); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %q is not an integer", PriorityHeader, v)
		}
		priority = p
	}
	flow = FairnessID(h)
	if flow == "" && len(s.SessionHeaders) > 0 {
		flow = agentidentity.Resolve(s.SessionHeaders, h.Get)
	}
	return priority, flow, nil
}

// FairnessID is the flow a request's headers name: the llm-d router's
// fairness header, else GIE's ("": none).
func FairnessID(h http.Header) string {
	for _, name := range scheduling.FairnessHeaders {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return ""
}
