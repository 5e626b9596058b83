package scrape

import eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"

// Sink receives the PodMetrics of every scrape. Publish is called from the
// endpoints' loops concurrently, must be safe for that, and should not
// block: a loop waits for it before its next scrape. The message is the
// sink's to keep; the Scraper does not touch it after the call.
type Sink interface {
	Publish(m *eventsv1.PodMetrics)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(m *eventsv1.PodMetrics)

// Publish implements Sink.
func (f SinkFunc) Publish(m *eventsv1.PodMetrics) { f(m) }
