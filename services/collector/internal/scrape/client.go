package scrape

import (
	"net"
	"net/http"
	"time"
)

// NewHTTPClient returns the client a Scraper uses unless given one, tuned
// for many small requests to many hosts in the same network:
//
//   - keep-alive connections, up to 4 idle per host (a loop has one scrape
//     and one models poll in flight at most) and no global idle cap, so a
//     large fleet does not reconnect at every scrape;
//   - no proxy from the environment: pods are scraped directly;
//   - no compression: gzip would cost the model server's API process CPU
//     at every scrape to save bandwidth inside the cluster;
//   - no client timeout: each request carries the scrape's deadline.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   DefaultTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      32 << 10,
	}}
}
