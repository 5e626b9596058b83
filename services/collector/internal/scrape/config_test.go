package scrape

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

var discard = SinkFunc(func(*eventsv1.PodMetrics) {})

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Sink: discard}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != 50*time.Millisecond || c.Timeout != time.Second || c.ModelsInterval != 10*time.Second ||
		c.Jitter != 0.1 || c.MaxBodyBytes != 16<<20 || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if c, _ := (Config{Sink: discard, Jitter: -1}).withDefaults(); c.Jitter != 0 {
		t.Errorf("negative jitter: %v, want none", c.Jitter)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"no sink", Config{}, "no sink"},
		{"interval", Config{Sink: discard, Interval: time.Microsecond}, "interval 1µs"},
		{"timeout vs models", Config{Sink: discard, Timeout: 10 * time.Second}, "not less than the models interval"},
		{"negative timeout", Config{Sink: discard, Timeout: -time.Second}, "negative"},
		{"jitter", Config{Sink: discard, Jitter: 0.6}, "jitter 0.6"},
		{"body", Config{Sink: discard, MaxBodyBytes: -1}, "max body bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "new scraper: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %q", err, tc.msg)
			}
		})
	}
}

func TestNewRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{Sink: discard, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Sink: discard, Registerer: reg}); err == nil || !strings.Contains(err.Error(), "register scrape metrics") {
		t.Errorf("second scraper on one registry: %v", err)
	}
	s.Close()
	// Close unregistered everything: a new one registers again.
	s, err = New(Config{Sink: discard, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
