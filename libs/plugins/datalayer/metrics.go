package datalayer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/enginemetrics"
	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types of the engine metrics and endpoint events.
const (
	MetricsSourceType        = "metrics-data-source"
	CoreMetricsExtractorType = "core-metrics-extractor"
	EndpointSourceType       = "endpoint-notification-source"
)

// Defaults of the metrics plugins.
const (
	DefaultMetricsPath    = "/metrics"
	DefaultEngineLabelKey = "llm-d.ai/engine-type"
	DefaultEngine         = enginemetrics.EngineVLLM
)

func init() {
	scheduling.Register(scheduling.Registration{Type: MetricsSourceType, New: newMetricsSource})
	scheduling.Register(scheduling.Registration{Type: CoreMetricsExtractorType, New: newCoreMetricsExtractor})
	scheduling.Register(scheduling.Registration{Type: EndpointSourceType, New: newEndpointSource})
}

// MetricsParams are metrics-data-source's parameters.
type MetricsParams struct {
	// Scheme is how endpoints are reached: "http" or "https".
	Scheme string `json:"scheme"`
	// Path is the URL path of the Prometheus exposition.
	Path string `json:"path"`
	// InsecureSkipVerify skips the verification of the endpoints' TLS
	// certificates (https only).
	InsecureSkipVerify bool `json:"insecureSkipVerify"`
}

// DefaultMetricsParams returns the parameters of a metrics-data-source
// configured without any: http, /metrics, certificates verified.
func DefaultMetricsParams() MetricsParams {
	return MetricsParams{Scheme: DefaultScheme, Path: DefaultMetricsPath, InsecureSkipVerify: DefaultInsecureSkipVerify}
}

// MetricsSource is the metrics-data-source plugin: Fetch GETs an
// endpoint's Prometheus exposition. In Hermod the collector scrapes every
// endpoint with its scheme, path and TLS setting (every --interval); it is
// safe for concurrent use.
type MetricsSource struct {
	scheduling.Named
	params MetricsParams
	*httpSource
}

// Exposition is what a MetricsSource fetched: a /metrics body and its
// Content-Type.
type Exposition struct {
	Body        []byte
	ContentType string
}

func newMetricsSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := DefaultMetricsParams()
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return NewMetricsSource(name, p)
}

// NewMetricsSource returns a metrics-data-source named name (its type when
// empty) with parameters p, checked as in a config.
func NewMetricsSource(name string, p MetricsParams) (*MetricsSource, error) {
	if err := checkSchemePath(&p.Scheme, &p.Path, DefaultMetricsPath); err != nil {
		return nil, err
	}
	if name == "" {
		name = MetricsSourceType
	}
	return &MetricsSource{Named: scheduling.Named{Type: MetricsSourceType, Name: name}, params: p,
		httpSource: newHTTPSource(p.Scheme, p.Path, p.InsecureSkipVerify)}, nil
}

// Params returns the source's parameters, defaults applied.
func (s *MetricsSource) Params() MetricsParams { return s.params }

// Parameters implements scheduling.ParameterReporter.
func (s *MetricsSource) Parameters() any { return s.params }

// Fetch implements scheduling.DataSource: it returns the endpoint's
// Exposition.
func (s *MetricsSource) Fetch(ctx context.Context, ep *scheduling.Endpoint) (any, error) {
	body, _, contentType, err := s.getTyped(ctx, ep, "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1")
	if err != nil {
		return nil, err
	}
	return Exposition{Body: body, ContentType: contentType}, nil
}

// CoreMetricsParams are core-metrics-extractor's parameters.
type CoreMetricsParams struct {
	// EngineLabelKey is the pod label naming its engine; DefaultEngine
	// the engine of pods without it.
	EngineLabelKey string `json:"engineLabelKey"`
	DefaultEngine  string `json:"defaultEngine"`
	// EngineConfigs are custom metric specs per engine; Hermod reads the
	// built-in names of the engines it knows and refuses custom ones.
	EngineConfigs []json.RawMessage `json:"engineConfigs"`
}

// CoreMetricsExtractor is the core-metrics-extractor plugin: Extract
// turns a metrics-data-source's exposition into the endpoint's metrics
// (waiting and running requests, KV-cache use, cache geometry, LoRA
// adapters, token counters), reading vLLM's names and SGLang's, whichever
// the engine reports (the engine label only says which to expect). The
// collector does the same with the same parser for every endpoint.
type CoreMetricsExtractor struct {
	scheduling.Named
	params CoreMetricsParams
	now    func() time.Time
}

// knownEngines are the engines whose metric names Hermod reads.
var knownEngines = []string{enginemetrics.EngineVLLM, enginemetrics.EngineSGLang}

func newCoreMetricsExtractor(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := CoreMetricsParams{EngineLabelKey: DefaultEngineLabelKey, DefaultEngine: DefaultEngine}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.EngineLabelKey == "" {
		return nil, scheduling.ParamErrorf("engineLabelKey", "must not be empty (the default is %q)", DefaultEngineLabelKey)
	}
	if !knownEngine(p.DefaultEngine) {
		return nil, scheduling.ParamErrorf("defaultEngine", "%q: Hermod reads the metrics of %s (TensorRT-LLM and Triton engines are not supported)",
			p.DefaultEngine, strings.Join(knownEngines, " and "))
	}
	if len(p.EngineConfigs) > 0 {
		return nil, scheduling.ParamErrorf("engineConfigs", "custom metric specs are not supported: Hermod reads the built-in names of %s; leave engineConfigs out",
			strings.Join(knownEngines, " and "))
	}
	if name == "" {
		name = CoreMetricsExtractorType
	}
	return &CoreMetricsExtractor{Named: scheduling.Named{Type: CoreMetricsExtractorType, Name: name}, params: p, now: h.Now}, nil
}

func knownEngine(e string) bool {
	for _, k := range knownEngines {
		if e == k {
			return true
		}
	}
	return false
}

// Parameters implements scheduling.ParameterReporter.
func (x *CoreMetricsExtractor) Parameters() any { return x.params }

// Extract implements scheduling.DataExtractor: data must be the
// Exposition of a metrics-data-source. ep must be the caller's own copy,
// not yet shared.
func (x *CoreMetricsExtractor) Extract(_ context.Context, data any, ep *scheduling.Endpoint) error {
	exp, ok := data.(Exposition)
	if !ok {
		return fmt.Errorf("%s: expects the exposition a %s fetches, got %T", x.TypedName(), MetricsSourceType, data)
	}
	if ep == nil {
		return fmt.Errorf("%s: no endpoint to extract into", x.TypedName())
	}
	m, err := enginemetrics.Parse(exp.Body, exp.ContentType)
	if err != nil {
		return fmt.Errorf("%s: %w", x.TypedName(), err)
	}
	ep.Metrics = &scheduling.Metrics{
		WaitingRequests: int(m.Waiting), RunningRequests: int(m.Running), KVCacheUsage: m.KVCacheUsage,
		BlockSize: int(m.BlockSize), NumGPUBlocks: int(m.NumGPUBlocks),
		MaxLoRAs: int(m.MaxLoRA), RunningLoRAs: m.RunningLoRAAdapters, WaitingLoRAs: m.WaitingLoRAAdapters,
		PromptTokens: m.PromptTokensTotal, OutputTokens: m.GenerationTokensTotal, UpdatedAt: x.now(),
	}
	return nil
}

// EndpointSource is the endpoint-notification-source plugin: upstream it
// tells its extractors when an endpoint is added or removed. In Hermod
// those events reach every plugin that keeps per-endpoint state through
// the scheduler (an endpoint leaving the registry is removed from them),
// and hermod-indexer subscribes to each registered endpoint's KV events
// itself, which is what upstream's precise-prefix-cache-scorer does with
// them. It takes no parameters and fetches nothing.
type EndpointSource struct {
	scheduling.Named
}

func newEndpointSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	if name == "" {
		name = EndpointSourceType
	}
	return &EndpointSource{scheduling.Named{Type: EndpointSourceType, Name: name}}, nil
}

// EndpointEvents implements scheduling.EndpointSource.
func (*EndpointSource) EndpointEvents() {}

var (
	_ scheduling.DataSource     = (*MetricsSource)(nil)
	_ scheduling.DataExtractor  = (*CoreMetricsExtractor)(nil)
	_ scheduling.EndpointSource = (*EndpointSource)(nil)
)
