package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/scheduling"
)

// modelsSource returns a models-data-source with p, closed when the test
// ends.
func modelsSource(t *testing.T, p datalayer.ModelsParams) *datalayer.ModelsSource {
	t.Helper()
	s, err := datalayer.NewModelsSource("", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func serveList(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }
}

func servedModels(want ...string) func(*eventsv1.PodMetrics) bool {
	return func(m *eventsv1.PodMetrics) bool { return slices.Equal(m.GetServedModels(), want) }
}

// The configured source's path is polled at once when set, and the default
// /v1/models again when it is taken back.
func TestModelsPollFollowsSource(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	var custom atomic.Int64
	p.mux.HandleFunc("GET /custom/models", func(w http.ResponseWriter, r *http.Request) {
		custom.Add(1)
		serveList(`{"object":"list","data":[{"id":"base"},{"id":"custom-lora","parent":"base"}]}`)(w, r)
	})
	h := newHarness(t, Config{ModelsInterval: time.Hour})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	h.rec.waitFor(t, "pod", "the default path's models", servedModels("base", "lora-a"))

	h.s.SetModelsPoll(ModelsPoll{Source: modelsSource(t, datalayer.ModelsParams{Scheme: "http", Path: "/custom/models"})})
	h.rec.waitFor(t, "pod", "the configured path's models", servedModels("base", "custom-lora"))
	defaultPolls := p.modelRequests.Load()

	h.s.SetModelsPoll(ModelsPoll{})
	h.rec.waitFor(t, "pod", "the default path's models again", servedModels("base", "lora-a"))
	if n := custom.Load(); n != 1 {
		t.Errorf("%d polls of /custom/models, want 1 (at once, then hourly)", n)
	}
	if n := p.modelRequests.Load(); n != defaultPolls+1 {
		t.Errorf("%d more polls of /v1/models, want 1", n-defaultPolls)
	}
}

// A configured interval replaces Config.ModelsInterval.
func TestModelsPollInterval(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	h := newHarness(t, Config{ModelsInterval: time.Hour, Jitter: -1})
	h.s.SetModelsPoll(ModelsPoll{Source: modelsSource(t, datalayer.DefaultModelsParams()), Interval: 20 * time.Millisecond})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	eventually(t, 5*time.Second, "5 polls at the configured interval", func() bool { return p.modelRequests.Load() >= 5 })
}

// tlsPod is a model server with a self-signed certificate that serves its
// model list at /v1/models (over https only: /metrics scrapes fail).
func tlsPod(t *testing.T) (*httptest.Server, *registryv1.Endpoint) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", serveList(`{"object":"list","data":[{"id":"secure"}]}`))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	p := &pod{srv: srv}
	return srv, p.endpoint("pool", "tls")
}

func TestModelsPollHTTPS(t *testing.T) {
	_, ep := tlsPod(t)
	h := newHarness(t, Config{ModelsInterval: time.Hour})
	h.s.SetModelsPoll(ModelsPoll{Source: modelsSource(t, datalayer.ModelsParams{Scheme: "https", Path: "/v1/models", InsecureSkipVerify: true})})
	h.s.SetEndpoints([]*registryv1.Endpoint{ep})
	h.rec.waitFor(t, "tls", "the models over https", servedModels("secure"))

	// Verified, the self-signed certificate fails the poll (made at once)
	// and says why; the last good list stays.
	h.s.SetModelsPoll(ModelsPoll{Source: modelsSource(t, datalayer.ModelsParams{Scheme: "https", Path: "/v1/models"})})
	eventually(t, 5*time.Second, "a failed https poll", func() bool {
		v, _ := h.metric(t, "hermod_collector_scrape_errors_total", "kind", "models", "reason", "connect")
		return v >= 1
	})
	if !strings.Contains(h.log.String(), "the endpoint's TLS certificate does not verify") {
		t.Errorf("log does not say why:\n%s", h.log.String())
	}
	h.rec.waitFor(t, "tls", "the last good list kept", servedModels("secure"))
}

// blockingSource is a data source whose Fetch waits for release, and that
// records whether it was used after it was retired.
type blockingSource struct {
	scheduling.Named
	inner    *datalayer.ModelsSource
	entered  chan struct{}
	release  chan struct{}
	retired  atomic.Bool
	lateUses atomic.Int64
}

func (b *blockingSource) Fetch(ctx context.Context, ep *scheduling.Endpoint) (any, error) {
	if b.retired.Load() {
		b.lateUses.Add(1)
	}
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return b.inner.Fetch(ctx, ep)
}

// SetModelsPoll returns only once no poll uses the previous source, and
// no poll uses it afterwards.
func TestSetModelsPollWaitsForPolls(t *testing.T) {
	p := newPod(t, vllmBody(1, 0, 0, 0))
	h := newHarness(t, Config{ModelsInterval: time.Hour, Timeout: 2 * time.Second})
	old := &blockingSource{Named: scheduling.Named{Type: "blocking", Name: "blocking"}, inner: modelsSource(t, datalayer.DefaultModelsParams()),
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	h.s.SetModelsPoll(ModelsPoll{Source: old, Interval: 20 * time.Millisecond})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool", "pod")})
	select {
	case <-old.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no poll started")
	}
	done := make(chan struct{})
	go func() {
		h.s.SetModelsPoll(ModelsPoll{Interval: 20 * time.Millisecond}) // the default source
		old.retired.Store(true)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("SetModelsPoll returned with a poll of the previous source in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(old.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("SetModelsPoll did not return after the poll ended")
	}
	polls := p.modelRequests.Load()
	eventually(t, 5*time.Second, "polls with the new source", func() bool { return p.modelRequests.Load() >= polls+2 })
	if n := old.lateUses.Load(); n != 0 {
		t.Errorf("the previous source was used %d times after SetModelsPoll returned", n)
	}
}
