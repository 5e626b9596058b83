package datalayer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermod/hermod/libs/enginemetrics"
	"github.com/hermod/hermod/libs/scheduling"
)

// The GPU metrics plugins: dcgm-data-source scrapes an NVIDIA DCGM
// exporter (a sidecar on the pod, or a DaemonSet on its node) and
// dcgm-extractor turns the page into the endpoint's GPU utilisation, an
// attribute endpoint-attribute-filter and -scorer read.
const (
	DCGMSourceType    = "dcgm-data-source"
	DCGMExtractorType = "dcgm-extractor"
	// GPUUtilizationKey is the attribute dcgm-extractor produces: the
	// busiest of the endpoint's GPUs, 0..1.
	GPUUtilizationKey = "GPUUtilization/dcgm-extractor"
	// DCGMGPUUtilMetric is the exporter's GPU utilisation gauge, in percent.
	DCGMGPUUtilMetric = "DCGM_FI_DEV_GPU_UTIL"
	// DefaultDCGMPort and DefaultDCGMPath are where the exporter listens.
	DefaultDCGMPort = 9400
	DefaultDCGMPath = "/metrics"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: DCGMSourceType, New: newDCGMSource})
	scheduling.Register(scheduling.Registration{Type: DCGMExtractorType, New: newDCGMExtractor})
}

// DCGMParams are dcgm-data-source's parameters.
type DCGMParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	Port               int    `json:"port"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	// UseNodeAddress scrapes the node's address (a DaemonSet exporter)
	// instead of the pod's (a sidecar).
	UseNodeAddress bool `json:"useNodeAddress"`
	// Interval is how often each endpoint's exporter is scraped; zero: at
	// every metrics scrape of the endpoint.
	Interval scheduling.Duration `json:"interval,omitempty"`
}

// DCGMSource is dcgm-data-source: Fetch GETs the exporter's page for an
// endpoint and returns its metric families
// (map[string]*dto.MetricFamily). It is safe for concurrent use.
type DCGMSource struct {
	scheduling.Named
	params DCGMParams
	*httpSource
}

func newDCGMSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := DCGMParams{Scheme: DefaultScheme, Path: DefaultDCGMPath, Port: DefaultDCGMPort, InsecureSkipVerify: DefaultInsecureSkipVerify}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if err := checkSchemePath(&p.Scheme, &p.Path, DefaultDCGMPath); err != nil {
		return nil, err
	}
	if p.Port < 1 || p.Port > 65535 {
		return nil, scheduling.ParamErrorf("port", "must be in 1..65535 (got %d)", p.Port)
	}
	switch d := p.Interval.Std(); {
	case d < 0:
		return nil, scheduling.ParamErrorf("interval", "must not be negative (got %s)", d)
	case d > 0 && d < MinInterval:
		h.Warn(fmt.Sprintf("parameters.interval: %s is below the minimum; scraping every %s", d, MinInterval))
		p.Interval = scheduling.Duration(MinInterval)
	}
	return &DCGMSource{
		Named:      scheduling.Named{Type: DCGMSourceType, Name: name},
		params:     p,
		httpSource: newHTTPSource(p.Scheme, p.Path, p.InsecureSkipVerify),
	}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *DCGMSource) Parameters() any { return s.params }

// Interval is how often the source is fetched per endpoint (zero: at every
// metrics scrape).
func (s *DCGMSource) Interval() scheduling.Duration { return s.params.Interval }

// errNoNodeAddress is a fetch of a DaemonSet exporter for an endpoint
// whose node is not known.
var errNoNodeAddress = errors.New("the endpoint's node address is unknown (Kubernetes discovery sets it from the pod's status.hostIP); useNodeAddress needs it")

// URL returns the exporter URL for ep.
func (s *DCGMSource) URL(ep *scheduling.Endpoint) (string, error) {
	host := ep.Address
	if s.params.UseNodeAddress {
		if host = ep.NodeAddress; host == "" {
			return "", errNoNodeAddress
		}
	}
	u := url.URL{Scheme: s.scheme, Host: net.JoinHostPort(host, strconv.Itoa(s.params.Port)), Path: s.path}
	return u.String(), nil
}

// Fetch implements scheduling.DataSource. A status other than 2xx is a
// *StatusError, a page that does not parse (or is larger than
// MaxBodyBytes) a *BodyError.
func (s *DCGMSource) Fetch(ctx context.Context, ep *scheduling.Endpoint) (any, error) {
	target, err := s.URL(ep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DCGMSourceType, err)
	}
	return s.getExposition(ctx, target)
}

// ParseExposition parses a Prometheus text exposition (an exporter's
// page) into its metric families.
func ParseExposition(body []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse exposition: %w", err)
	}
	return families, nil
}

// DCGMExtractor is dcgm-extractor: the endpoint's GPU utilisation, the
// highest DCGM_FI_DEV_GPU_UTIL of its GPUs over 100, under
// GPUUtilizationKey. Of a page with pod labels (a DaemonSet exporter
// started with DCGM_EXPORTER_KUBERNETES=true) only the endpoint's samples
// count; a page without them (a sidecar's) is the endpoint's. It takes no
// parameters.
type DCGMExtractor struct {
	scheduling.Named
}

func newDCGMExtractor(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	return &DCGMExtractor{scheduling.Named{Type: DCGMExtractorType, Name: name}}, nil
}

// ErrNoGPUSample is an exporter page with no utilisation sample of the
// endpoint.
var ErrNoGPUSample = errors.New("no " + DCGMGPUUtilMetric + " sample of the endpoint")

// Extract implements scheduling.DataExtractor: it sets GPUUtilizationKey
// in ep.Metrics.Attributes (a copy of the map; ep.Metrics is made when
// nil).
func (x *DCGMExtractor) Extract(_ context.Context, data any, ep *scheduling.Endpoint) error {
	families, ok := data.(map[string]*dto.MetricFamily)
	if !ok {
		return fmt.Errorf("%s: got %T from the data source, want a Prometheus exposition (pair it with %s)", DCGMExtractorType, data, DCGMSourceType)
	}
	util, ok := GPUUtilization(families, ep.Name)
	if !ok {
		return ErrNoGPUSample
	}
	SetAttribute(ep, GPUUtilizationKey, util)
	return nil
}

// GPUUtilization returns the highest GPU utilisation, 0..1, among the
// samples of pod (those without a pod label count for every pod).
func GPUUtilization(families map[string]*dto.MetricFamily, pod string) (float64, bool) {
	f := families[DCGMGPUUtilMetric]
	if f == nil {
		return 0, false
	}
	best, found := 0.0, false
	for _, m := range f.GetMetric() {
		if p, labeled := label(m, "pod"); labeled && p != pod {
			continue
		}
		v, ok := enginemetrics.SampleValue(m)
		if !ok {
			continue
		}
		if !found || v > best {
			best, found = v, true
		}
	}
	return min(max(best/100, 0), 1), found
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// SetAttribute sets an attribute of ep, copying its metrics and their
// attribute map so that endpoints sharing them are left as they were.
func SetAttribute(ep *scheduling.Endpoint, key string, v float64) {
	m := scheduling.Metrics{}
	if ep.Metrics != nil {
		m = *ep.Metrics
	}
	attrs := make(map[string]float64, len(m.Attributes)+1)
	maps.Copy(attrs, m.Attributes)
	attrs[key] = v
	m.Attributes = attrs
	ep.Metrics = &m
}
