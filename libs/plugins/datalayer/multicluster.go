package datalayer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/hermod/hermod/libs/enginemetrics"
	"github.com/hermod/hermod/libs/scheduling"
)

// The multi-cluster data layer (llm-d router v0.10): a cluster-scoped
// pool whose endpoints are whole clusters, each reached at its gateway.
// multicluster-file-discovery lists the clusters, multicluster-metrics-
// data-source scrapes each cluster's own endpoint picker and
// multicluster-metrics-extractor turns the pool-wide averages it exports
// into the two attributes the multicluster scorers read.
const (
	MultiClusterFileDiscoveryType = "multicluster-file-discovery"
	MultiClusterMetricsSourceType = "multicluster-metrics-data-source"
	MultiClusterExtractorType     = "multicluster-metrics-extractor"

	// MultiClusterKVCacheUtilizationKey and MultiClusterQueueSizeKey are
	// the attributes multicluster-metrics-extractor sets on a cluster: its
	// pool's average KV-cache utilisation (0..1) and average queue size.
	MultiClusterKVCacheUtilizationKey = "llm-d.ai/multicluster-kv-cache-utilization"
	MultiClusterQueueSizeKey          = "llm-d.ai/multicluster-queue-size"

	// DefaultMultiClusterKVCacheMetric and DefaultMultiClusterQueueMetric
	// are the pool averages a cluster's endpoint picker exports.
	DefaultMultiClusterKVCacheMetric = "llm_d_epp_average_kv_cache_utilization"
	DefaultMultiClusterQueueMetric   = "llm_d_epp_average_queue_size"

	// MetricsAddressLabel and MetricsPortLabel on a cluster's entry say
	// where its metrics are served when not at its routable address (the
	// port defaults to the entry's).
	MetricsAddressLabel = "metricsAddress"
	MetricsPortLabel    = "metricsPort"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: MultiClusterFileDiscoveryType, New: newMultiClusterFileDiscovery})
	scheduling.Register(scheduling.Registration{Type: MultiClusterMetricsSourceType, New: newMultiClusterSource})
	scheduling.Register(scheduling.Registration{Type: MultiClusterExtractorType, New: newMultiClusterExtractor})
}

// MultiClusterFileDiscovery is multicluster-file-discovery: file-discovery
// (the same parameters and file format) listing clusters rather than pods,
// so an entry's address may be a host name (a cluster's gateway) as well
// as an IP address.
type MultiClusterFileDiscovery struct {
	*FileDiscovery
}

func newMultiClusterFileDiscovery(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	d, err := newFileDiscovery(name, raw, h)
	if err != nil {
		return nil, err
	}
	fd := d.(*FileDiscovery)
	fd.Type = MultiClusterFileDiscoveryType
	if name == "" {
		fd.Name = MultiClusterFileDiscoveryType
	}
	return &MultiClusterFileDiscovery{fd}, nil
}

// HostNames says that the file's addresses may be host names: the
// collector accepts them where file-discovery's router-form entries must
// be IPv4 addresses.
func (*MultiClusterFileDiscovery) HostNames() bool { return true }

// MultiClusterSourceParams are multicluster-metrics-data-source's
// parameters. Unlike metrics-data-source's, the scheme defaults to https
// and certificates are verified: the scrape crosses a cluster boundary.
type MultiClusterSourceParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	// CACertPath is a PEM bundle of the CAs peer clusters' certificates are
	// verified against instead of the system's roots.
	CACertPath string `json:"caCertPath,omitempty"`
	// ClientCertPath and ClientKeyPath are a PEM certificate and key the
	// source presents (mutual TLS); both or neither.
	ClientCertPath string `json:"clientCertPath,omitempty"`
	ClientKeyPath  string `json:"clientKeyPath,omitempty"`
	// Interval is how often each cluster is scraped; zero: at every metrics
	// scrape (the collector's --interval).
	Interval scheduling.Duration `json:"interval,omitempty"`
}

// MultiClusterSource is multicluster-metrics-data-source: Fetch GETs a
// cluster's Prometheus exposition, at its metricsAddress/metricsPort
// labels when it has them, else at its address, and returns its metric
// families (map[string]*dto.MetricFamily). The certificate files are read
// at the first fetch (pickers build the plugin but never fetch, and need
// not have them), and again after a failure. It is safe for concurrent
// use.
type MultiClusterSource struct {
	scheduling.Named
	params MultiClusterSourceParams
	*httpSource

	mu     sync.Mutex
	tlsSet bool
}

func newMultiClusterSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := MultiClusterSourceParams{Scheme: "https", Path: DefaultMetricsPath}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return NewMultiClusterSource(name, p, h)
}

// NewMultiClusterSource returns a multicluster-metrics-data-source named
// name with parameters p, checked as in a config; h (which may be nil)
// gets the warnings.
func NewMultiClusterSource(name string, p MultiClusterSourceParams, h scheduling.Handle) (*MultiClusterSource, error) {
	if err := checkSchemePath(&p.Scheme, &p.Path, DefaultMetricsPath); err != nil {
		return nil, err
	}
	if (p.ClientCertPath == "") != (p.ClientKeyPath == "") {
		return nil, scheduling.ParamErrorf("clientCertPath", "goes with clientKeyPath: give both or neither")
	}
	switch d := p.Interval.Std(); {
	case d < 0:
		return nil, scheduling.ParamErrorf("interval", "must not be negative (got %s)", d)
	case d > 0 && d < MinInterval:
		if h != nil {
			h.Warn(fmt.Sprintf("parameters.interval: %s is below the minimum; scraping every %s", d, MinInterval))
		}
		p.Interval = scheduling.Duration(MinInterval)
	}
	if h != nil && p.Scheme == "http" && (p.CACertPath != "" || p.ClientCertPath != "") {
		h.Warn("parameters: the certificate paths are unused with scheme http")
	}
	if name == "" {
		name = MultiClusterMetricsSourceType
	}
	return &MultiClusterSource{
		Named:      scheduling.Named{Type: MultiClusterMetricsSourceType, Name: name},
		params:     p,
		httpSource: newHTTPSource(p.Scheme, p.Path, p.InsecureSkipVerify),
		tlsSet:     p.Scheme == "http" || (p.CACertPath == "" && p.ClientCertPath == ""),
	}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *MultiClusterSource) Parameters() any { return s.params }

// Interval is how often the source is fetched per cluster (zero: at every
// metrics scrape).
func (s *MultiClusterSource) Interval() scheduling.Duration { return s.params.Interval }

// URL returns the metrics URL of cluster ep.
func (s *MultiClusterSource) URL(ep *scheduling.Endpoint) string {
	host := ep.HostPort()
	if addr := ep.Labels[MetricsAddressLabel]; addr != "" {
		port := ep.Labels[MetricsPortLabel]
		if port == "" {
			port = strconv.Itoa(ep.Port)
		}
		host = net.JoinHostPort(addr, port)
	}
	u := url.URL{Scheme: s.scheme, Host: host, Path: s.path}
	return u.String()
}

// loadTLS reads the certificate files into the transport, once they read.
func (s *MultiClusterSource) loadTLS() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsSet {
		return nil
	}
	cfg := s.transport.TLSClientConfig.Clone()
	if s.params.CACertPath != "" {
		pem, err := os.ReadFile(s.params.CACertPath)
		if err != nil {
			return fmt.Errorf("%s: caCertPath: %w", MultiClusterMetricsSourceType, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s: caCertPath %s: no PEM certificate in it", MultiClusterMetricsSourceType, s.params.CACertPath)
		}
		cfg.RootCAs = pool
	}
	if s.params.ClientCertPath != "" {
		cert, err := tls.LoadX509KeyPair(s.params.ClientCertPath, s.params.ClientKeyPath)
		if err != nil {
			return fmt.Errorf("%s: client certificate: %w", MultiClusterMetricsSourceType, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	s.transport.TLSClientConfig = cfg
	s.tlsSet = true
	return nil
}

// Fetch implements scheduling.DataSource. A status other than 2xx is a
// *StatusError, a page that does not parse (or is larger than
// MaxBodyBytes) a *BodyError.
func (s *MultiClusterSource) Fetch(ctx context.Context, ep *scheduling.Endpoint) (any, error) {
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	return s.getExposition(ctx, s.URL(ep))
}

// MultiClusterExtractorParams are multicluster-metrics-extractor's
// parameters: the series of the two pool averages, a metric name with
// optional label matchers (name{label="value",...}).
type MultiClusterExtractorParams struct {
	KVCacheUtilizationMetric string `json:"kvCacheUtilizationMetric"`
	QueueSizeMetric          string `json:"queueSizeMetric"`
}

// MetricSpec selects the series of one metric: its name and the labels
// it must have.
type MetricSpec struct {
	Name   string
	Labels map[string]string
}

// ParseMetricSpec parses name or name{label="value",...}.
func ParseMetricSpec(s string) (MetricSpec, error) {
	s = strings.TrimSpace(s)
	spec := MetricSpec{Name: s}
	if i := strings.IndexByte(s, '{'); i >= 0 {
		if !strings.HasSuffix(s, "}") {
			return MetricSpec{}, fmt.Errorf("%q: missing the closing }", s)
		}
		spec.Name = strings.TrimSpace(s[:i])
		spec.Labels = map[string]string{}
		for _, pair := range strings.Split(s[i+1:len(s)-1], ",") {
			if pair = strings.TrimSpace(pair); pair == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return MetricSpec{}, fmt.Errorf("%q: label matcher %q is not label=\"value\"", s, pair)
			}
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			spec.Labels[k] = v
		}
	}
	if spec.Name == "" || strings.ContainsAny(spec.Name, " \t\"=}") {
		return MetricSpec{}, fmt.Errorf("%q: not a metric name", s)
	}
	return spec, nil
}

// Latest returns the value of the newest sample of the series s selects
// (the first when they carry no timestamps).
func (s MetricSpec) Latest(families map[string]*dto.MetricFamily) (float64, bool) {
	f := families[s.Name]
	if f == nil {
		return 0, false
	}
	var best *dto.Metric
	for _, m := range f.GetMetric() {
		if !s.matches(m) {
			continue
		}
		if best == nil || m.GetTimestampMs() > best.GetTimestampMs() {
			best = m
		}
	}
	if best == nil {
		return 0, false
	}
	return enginemetrics.SampleValue(best)
}

func (s MetricSpec) matches(m *dto.Metric) bool {
	for k, want := range s.Labels {
		if got, _ := label(m, k); got != want {
			return false
		}
	}
	return true
}

// MultiClusterExtractor is multicluster-metrics-extractor: a cluster's pool
// averages (by default llm_d_epp_average_kv_cache_utilization and
// llm_d_epp_average_queue_size) under MultiClusterKVCacheUtilizationKey
// and MultiClusterQueueSizeKey. It reads a multicluster-metrics-data-
// source's page; a missing series is an error, the other still set.
type MultiClusterExtractor struct {
	scheduling.Named
	params    MultiClusterExtractorParams
	kv, queue MetricSpec
}

func newMultiClusterExtractor(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p MultiClusterExtractorParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return NewMultiClusterExtractor(name, p)
}

// NewMultiClusterExtractor returns a multicluster-metrics-extractor named
// name with parameters p (empty fields: the defaults).
func NewMultiClusterExtractor(name string, p MultiClusterExtractorParams) (*MultiClusterExtractor, error) {
	if p.KVCacheUtilizationMetric == "" {
		p.KVCacheUtilizationMetric = DefaultMultiClusterKVCacheMetric
	}
	if p.QueueSizeMetric == "" {
		p.QueueSizeMetric = DefaultMultiClusterQueueMetric
	}
	kv, err := ParseMetricSpec(p.KVCacheUtilizationMetric)
	if err != nil {
		return nil, scheduling.ParamErrorf("kvCacheUtilizationMetric", "%v", err)
	}
	queue, err := ParseMetricSpec(p.QueueSizeMetric)
	if err != nil {
		return nil, scheduling.ParamErrorf("queueSizeMetric", "%v", err)
	}
	if name == "" {
		name = MultiClusterExtractorType
	}
	return &MultiClusterExtractor{Named: scheduling.Named{Type: MultiClusterExtractorType, Name: name}, params: p, kv: kv, queue: queue}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (x *MultiClusterExtractor) Parameters() any { return x.params }

// ProducedAttributes implements scheduling.AttributeProducer.
func (*MultiClusterExtractor) ProducedAttributes() []string {
	return []string{MultiClusterKVCacheUtilizationKey, MultiClusterQueueSizeKey}
}

// Extract implements scheduling.DataExtractor.
func (x *MultiClusterExtractor) Extract(_ context.Context, data any, ep *scheduling.Endpoint) error {
	families, ok := data.(map[string]*dto.MetricFamily)
	if !ok {
		return fmt.Errorf("%s: got %T from the data source, want a Prometheus exposition (pair it with %s)", MultiClusterExtractorType, data, MultiClusterMetricsSourceType)
	}
	var errs []error
	for _, m := range []struct {
		spec MetricSpec
		key  string
	}{{x.kv, MultiClusterKVCacheUtilizationKey}, {x.queue, MultiClusterQueueSizeKey}} {
		v, ok := m.spec.Latest(families)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no sample of %s", MultiClusterExtractorType, m.spec.Name))
			continue
		}
		SetAttribute(ep, m.key, v)
	}
	return errors.Join(errs...)
}

var (
	_ scheduling.EndpointDiscovery = (*MultiClusterFileDiscovery)(nil)
	_ scheduling.DataSource        = (*MultiClusterSource)(nil)
	_ scheduling.AttributeProducer = (*MultiClusterExtractor)(nil)
)
