// Package scrape scrapes model-server endpoints: a [Scraper] runs one loop
// per endpoint that GETs its /metrics every Config.Interval (50 ms by
// default) and publishes each scrape as a hermod.events.v1.PodMetrics on a
// [Sink], and polls its /v1/models on a slower interval for the served
// model names.
//
// # Served models
//
// The models poll runs the data-layer plugins of libs/plugins/datalayer
// (see [ModelsPoll]): a models-data-source fetches the endpoint's OpenAI
// model list and model-server-protocol-models turns it into the names of
// its base models and adapters. By default the source is
// http://<endpoint>/v1/models; [Scraper.SetModelsPoll] puts the pool
// config's source in its place (another scheme, path, TLS setting or
// interval), and every endpoint is polled with it at once.
//
// # Scheduling
//
// Each loop starts at a random phase within one interval and waits an
// interval varied by ±Config.Jitter (10%) between ticks, so endpoints added
// together do not scrape in lockstep. A loop has at most one scrape in
// flight: a tick that comes while the previous scrape is still running (a
// slow endpoint) is skipped and counted in
// hermod_collector_scrape_skipped_total, and the next scrape starts at the
// first tick after it ends, so requests never pile up on a struggling
// server. The models poll runs beside it, at once on start and then every
// Config.ModelsInterval (or the configured source's interval).
//
// # Failures
//
// Every scrape publishes a PodMetrics, failed ones too: a failed scrape
// keeps the values of the last good one (taken at last_success), sets
// error, and counts consecutive_failures, so consumers see both the last
// known state and how stale it is. Before the first good scrape the values
// are zero and last_success is unset. The first failure of a streak is
// logged at warn and the recovery at info; the failures in between are only
// counted (hermod_collector_scrape_errors_total{kind,reason}).
//
// # Metrics
//
//	hermod_collector_scrape_duration_seconds{kind}    histogram, kind metrics|models, every attempt
//	hermod_collector_scrape_errors_total{kind,reason} reason timeout|connect|status|parse
//	hermod_collector_scrape_skipped_total             ticks skipped behind a scrape in flight
//	hermod_collector_endpoints                        endpoints scraped
//	hermod_collector_staleness_seconds{pool,endpoint} age of the latest good scrape (of the loop's
//	                                                  start before one), computed when collected;
//	                                                  gone with the endpoint
package scrape
