package datalayer

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	ModelsSourceType = "models-data-source"
	// ModelsExtractorType is the extractor's type in Heimdall and older
	// llm-d configs; ModelsExtractorAliasType is its newer upstream name.
	ModelsExtractorType      = "model-server-protocol-models"
	ModelsExtractorAliasType = "models-data-extractor"
)

// Limits of one Fetch.
const (
	// FetchTimeout bounds a Fetch, connecting and reading the body
	// included; a caller's earlier deadline wins.
	FetchTimeout = 5 * time.Second
	// MaxBodyBytes caps a model list: a larger body fails the fetch.
	MaxBodyBytes = 4 << 20
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ModelsSourceType, New: newModelsSource})
	scheduling.Register(scheduling.Registration{Type: ModelsExtractorType, Aliases: []string{ModelsExtractorAliasType}, New: newModelsExtractor})
}

// StatusError is a fetch answered with a status other than 2xx.
type StatusError struct {
	URL        string
	StatusCode int
	Status     string // "502 Bad Gateway"
}

func (e *StatusError) Error() string { return "GET " + e.URL + ": status " + e.Status }

// BodyError is a fetch answered 2xx with a body that is not a model list,
// or is larger than MaxBodyBytes.
type BodyError struct {
	URL string
	Err error
}

func (e *BodyError) Error() string { return "GET " + e.URL + ": " + e.Err.Error() }

// Unwrap returns the parse error.
func (e *BodyError) Unwrap() error { return e.Err }

// ModelsSource is the models-data-source plugin: Fetch GETs an endpoint's
// model list. It is safe for concurrent use.
type ModelsSource struct {
	scheduling.Named
	params ModelsParams
	*httpSource
}

func newModelsSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p, err := DecodeModelsParams(raw, h)
	if err != nil {
		return nil, err
	}
	return NewModelsSource(name, p)
}

// NewModelsSource returns a models-data-source named name (its type when
// empty) with parameters p, checked as in a config. Close releases its
// idle connections.
func NewModelsSource(name string, p ModelsParams) (*ModelsSource, error) {
	if err := p.normalize(func(string) {}); err != nil {
		return nil, err
	}
	if name == "" {
		name = ModelsSourceType
	}
	return &ModelsSource{
		Named:      scheduling.Named{Type: ModelsSourceType, Name: name},
		params:     p,
		httpSource: newHTTPSource(p.Scheme, p.Path, p.InsecureSkipVerify),
	}, nil
}

// httpSource is what the data sources share: a GET of one path on every
// endpoint, over http or https.
type httpSource struct {
	scheme, path string
	transport    *http.Transport
	client       *http.Client
}

// newHTTPSource returns a source tuned like the collector's scrape client:
// endpoints are reached directly (no proxy from the environment), without
// compression, with a few keep-alive connections per endpoint; every
// request carries its own deadline.
func newHTTPSource(scheme, path string, insecureSkipVerify bool) *httpSource {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   FetchTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig: &tls.Config{
			// The documented parameter, true by default as upstream:
			// model servers mostly present self-signed certificates.
			InsecureSkipVerify: insecureSkipVerify,
			MinVersion:         tls.VersionTLS12,
		},
		TLSHandshakeTimeout: FetchTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httpSource{scheme: scheme, path: path, transport: tr, client: &http.Client{Transport: tr, CheckRedirect: sameEndpoint}}
}

// sameEndpoint follows up to 3 redirects within the endpoint (a trailing
// slash added, say) and answers with any other: the models of another host
// are not this endpoint's.
func sameEndpoint(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 || req.URL.Host != via[0].URL.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// Params returns the source's parameters, defaults applied.
func (s *ModelsSource) Params() ModelsParams { return s.params }

// Parameters implements scheduling.ParameterReporter.
func (s *ModelsSource) Parameters() any { return s.params }

// URL returns the URL the source fetches for ep.
func (s *httpSource) URL(ep *scheduling.Endpoint) string {
	u := url.URL{Scheme: s.scheme, Host: ep.HostPort(), Path: s.path}
	return u.String()
}

// Fetch implements scheduling.DataSource: it returns FetchModels's
// []Model.
func (s *ModelsSource) Fetch(ctx context.Context, ep *scheduling.Endpoint) (any, error) {
	return s.FetchModels(ctx, ep)
}

// FetchModels GETs ep's model list within FetchTimeout (or ctx's earlier
// deadline) and parses it. A status other than 2xx is a *StatusError, a
// body that is not a model list (or is larger than MaxBodyBytes) a
// *BodyError; transport errors are wrapped as they come (net.Error,
// context.DeadlineExceeded), a certificate that does not verify with a
// message that says so.
func (s *ModelsSource) FetchModels(ctx context.Context, ep *scheduling.Endpoint) ([]Model, error) {
	body, target, err := s.get(ctx, ep, "application/json")
	if err != nil {
		return nil, err
	}
	models, err := ParseModels(body)
	if err != nil {
		return nil, &BodyError{URL: target, Err: err}
	}
	return models, nil
}

// get GETs the source's path on ep within FetchTimeout (or ctx's earlier
// deadline) and returns the body and the URL. A status other than 2xx is
// a *StatusError, a body larger than MaxBodyBytes a *BodyError; transport
// errors are wrapped as they come (net.Error, context.DeadlineExceeded), a
// certificate that does not verify with a message that says so.
func (s *httpSource) get(ctx context.Context, ep *scheduling.Endpoint, accept string) (body []byte, target string, err error) {
	body, target, _, err = s.getTyped(ctx, ep, accept)
	return body, target, err
}

// getExposition GETs a Prometheus text page at target and parses it; a
// page that does not parse is a *BodyError.
func (s *httpSource) getExposition(ctx context.Context, target string) (map[string]*dto.MetricFamily, error) {
	body, _, _, err := s.getURL(ctx, target, "text/plain;version=0.0.4")
	if err != nil {
		return nil, err
	}
	families, err := ParseExposition(body)
	if err != nil {
		return nil, &BodyError{URL: target, Err: err}
	}
	return families, nil
}

// getTyped is get that also returns the response's Content-Type.
func (s *httpSource) getTyped(ctx context.Context, ep *scheduling.Endpoint, accept string) ([]byte, string, string, error) {
	return s.getURL(ctx, s.URL(ep), accept)
}

// getURL is getTyped of a URL the caller made.
func (s *httpSource) getURL(ctx context.Context, target, accept string) ([]byte, string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, target, "", fmt.Errorf("GET %s: %w", target, err)
	}
	req.Header.Set("Accept", accept)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, target, "", transportError(target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, target, "", &StatusError{URL: target, StatusCode: resp.StatusCode, Status: resp.Status}
	}
	// The buffer grows with the bytes received, up to the cap.
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, target, "", fmt.Errorf("GET %s: read body: %w", target, err)
	}
	if len(body) > MaxBodyBytes {
		return nil, target, "", &BodyError{URL: target, Err: fmt.Errorf("body larger than %d bytes", MaxBodyBytes)}
	}
	return body, target, resp.Header.Get("Content-Type"), nil
}

// transportError wraps an error of client.Do, without the *url.Error's
// repetition of the URL.
func transportError(target string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("GET %s: the endpoint's TLS certificate does not verify against the system's roots "+
			"(insecureSkipVerify is false; set it to true to skip the check): %w", target, err)
	}
	return fmt.Errorf("GET %s: %w", target, err)
}

// Close releases the source's idle connections. The source still works
// after it (it opens new ones).
func (s *httpSource) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// ModelsExtractor is the model-server-protocol-models plugin (alias
// models-data-extractor): Extract sets an endpoint's Models to the names a
// models-data-source fetched. It takes no parameters.
type ModelsExtractor struct {
	scheduling.Named
}

func newModelsExtractor(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	return NewModelsExtractor(name), nil
}

// NewModelsExtractor returns a model-server-protocol-models extractor named
// name (its type when empty).
func NewModelsExtractor(name string) *ModelsExtractor {
	if name == "" {
		name = ModelsExtractorType
	}
	// Both type names build this plugin; it reports the canonical type.
	return &ModelsExtractor{scheduling.Named{Type: ModelsExtractorType, Name: name}}
}

// Extract implements scheduling.DataExtractor: data must be the []Model of
// a models-data-source; ep.Models becomes their IDs, base models and
// adapters alike (empty, not nil, for an empty list). ep must be the
// caller's own copy, not yet shared: endpoints are immutable once
// published.
func (x *ModelsExtractor) Extract(_ context.Context, data any, ep *scheduling.Endpoint) error {
	models, ok := data.([]Model)
	if !ok {
		return fmt.Errorf("%s: expects the model list a %s fetches, got %T", x.TypedName(), ModelsSourceType, data)
	}
	if ep == nil {
		return fmt.Errorf("%s: no endpoint to extract into", x.TypedName())
	}
	ep.Models = ModelIDs(models)
	return nil
}

var (
	_ scheduling.DataSource        = (*ModelsSource)(nil)
	_ scheduling.DataExtractor     = (*ModelsExtractor)(nil)
	_ scheduling.ParameterReporter = (*ModelsSource)(nil)
	_ io.Closer                    = (*ModelsSource)(nil)
)
