package scrape

import (
	"crypto/tls"
	"net/http"
)

// MetricsSource is where every endpoint's metrics are scraped: the
// metrics-data-source of the pool's config. The zero MetricsSource is the
// default, http://<endpoint>/metrics.
type MetricsSource struct {
	// Scheme is "http" or "https" (empty: http); Path the URL path (empty:
	// /metrics).
	Scheme, Path string
	// InsecureSkipVerify skips the verification of the endpoints' TLS
	// certificates (https only).
	InsecureSkipVerify bool
}

// metricsEndpoint is a MetricsSource in service, with the client that
// reaches it.
type metricsEndpoint struct {
	src    MetricsSource
	client *http.Client
	own    bool // the client is this endpoint's (https): close its idle connections
}

// url returns the URL the source scrapes on address (host:port).
func (m *metricsEndpoint) url(address string) string {
	return m.src.Scheme + "://" + address + m.src.Path
}

// SetMetricsSource makes src where every endpoint's metrics are scraped
// from the next scrape on; the zero MetricsSource restores the default.
func (s *Scraper) SetMetricsSource(src MetricsSource) {
	if src.Scheme == "" {
		src.Scheme = "http"
	}
	if src.Path == "" {
		src.Path = "/metrics"
	}
	next := &metricsEndpoint{src: src, client: s.client}
	if src.Scheme == "https" {
		tr := NewHTTPClient().Transport.(*http.Transport)
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: src.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // the documented parameter
		next.client, next.own = &http.Client{Transport: tr}, true
	}
	if prev := s.metricsAt.Swap(next); prev != nil && prev.own {
		prev.client.CloseIdleConnections()
	}
}
