package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/services/collector/internal/scrape"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

// pollRecorder records the models polls and metrics sources put in force.
type pollRecorder struct {
	polls   []scrape.ModelsPoll
	sources []scrape.MetricsSource
	attrs   [][]scrape.AttributePoll
}

func (r *pollRecorder) SetAttributePolls(ps []scrape.AttributePoll) { r.attrs = append(r.attrs, ps) }

func (r *pollRecorder) SetModelsPoll(p scrape.ModelsPoll)       { r.polls = append(r.polls, p) }
func (r *pollRecorder) SetMetricsSource(s scrape.MetricsSource) { r.sources = append(r.sources, s) }

// params returns the parameters of the latest poll's source ("default"
// for the default poll).
func (r *pollRecorder) latest(t *testing.T) string {
	t.Helper()
	if len(r.polls) == 0 {
		t.Fatal("no poll set")
	}
	p := r.polls[len(r.polls)-1]
	if p.Source == nil {
		return "default"
	}
	s := p.Source.(*datalayer.ModelsSource).Params()
	out := s.Scheme + " " + s.Path
	if s.InsecureSkipVerify {
		out += " insecure"
	}
	if p.Interval > 0 {
		out += " every " + p.Interval.String()
	}
	if p.Extractor != nil {
		out += " extractor " + p.Extractor.TypedName().Name
	}
	return out
}

const dataConfig = `featureGates: [dataLayer]
plugins:
- type: models-data-source
  name: src
  parameters: {scheme: https, path: /custom/models, insecureSkipVerify: false}
- type: model-server-protocol-models
- type: queue-scorer
data:
  sources: [{pluginRef: src, extractors: [{pluginRef: model-server-protocol-models}]}]
`

func TestDataLayerFollowsConfig(t *testing.T) {
	steps := []struct {
		name    string
		data    string // "" with deleted
		deleted bool
		want    string
		sets    int // polls set so far
	}{
		{"no config", "", true, "default", 1},
		{"models source", dataConfig, false, "https /custom/models extractor model-server-protocol-models", 2},
		{"same source, other scorer", strings.Replace(dataConfig, "queue-scorer", "kv-cache-utilization-scorer", 1), false,
			"https /custom/models extractor model-server-protocol-models", 2},
		{"does not parse: kept", "plugins: [", false, "https /custom/models extractor model-server-protocol-models", 2},
		{"does not build: kept", "plugins: [{type: no-such-scorer}]", false, "https /custom/models extractor model-server-protocol-models", 2},
		{"no gate (upstream deprecated it): the same", strings.Replace(dataConfig, "featureGates: [dataLayer]\n", "", 1), false,
			"https /custom/models extractor model-server-protocol-models", 2},
		{"later upstream names, interval, no extractor listed", `featureGates: [dataLayer]
plugins:
- {type: models-data-source, parameters: {interval: 2s}}
- {type: models-data-extractor}
dataLayer:
  sources: [{pluginRef: models-data-source}]
`, false, "http /v1/models every 2s", 3},
		{"no data section", "plugins: [{type: queue-scorer}]", false, "default", 4},
		{"no config again", "", true, "default", 4},
	}
	rec := &pollRecorder{}
	d := newDataLayer(rec, discardLog)
	defer d.close()
	for i, st := range steps {
		d.apply(coord.ConfigVersion{Pool: "p", Data: []byte(st.data), Revision: int64(i + 1), Deleted: st.deleted})
		if got := rec.latest(t); got != st.want || len(rec.polls) != st.sets {
			t.Fatalf("%s: poll %q after %d sets, want %q after %d", st.name, got, len(rec.polls), st.want, st.sets)
		}
	}
	select {
	case <-d.first:
	default:
		t.Error("first not closed")
	}
	if len(rec.sources) != 0 {
		t.Errorf("metrics sources %v set by configs without a metrics-data-source", rec.sources)
	}
}

// A metrics-data-source in the data section sets where metrics are
// scraped; a config without one brings back the default.
func TestDataLayerMetricsSource(t *testing.T) {
	rec := &pollRecorder{}
	d := newDataLayer(rec, discardLog)
	defer d.close()
	withMetrics := `plugins:
- {type: metrics-data-source, parameters: {scheme: https, path: /engine/metrics, insecureSkipVerify: false}}
- {type: core-metrics-extractor}
- {type: queue-scorer}
dataLayer:
  sources: [{pluginRef: metrics-data-source, extractors: [{pluginRef: core-metrics-extractor}]}]
`
	for i, st := range []struct {
		data string
		want []scrape.MetricsSource
	}{
		{withMetrics, []scrape.MetricsSource{{Scheme: "https", Path: "/engine/metrics"}}},
		{strings.Replace(withMetrics, "queue-scorer", "kv-cache-utilization-scorer", 1), []scrape.MetricsSource{{Scheme: "https", Path: "/engine/metrics"}}},
		{"plugins: [{type: queue-scorer}]", []scrape.MetricsSource{{Scheme: "https", Path: "/engine/metrics"}, {}}},
	} {
		d.apply(coord.ConfigVersion{Pool: "p", Data: []byte(st.data), Revision: int64(i + 1)})
		if !slices.Equal(rec.sources, st.want) {
			t.Fatalf("step %d: sources %v, want %v", i, rec.sources, st.want)
		}
	}
}

// pathsPod is a model server listing "llama" at /v1/models and
// "llama", "custom-lora" at /custom/models, counting the requests of each.
type pathsPod struct {
	srv               *httptest.Server
	defaults, customs atomic.Int64
}

func newPathsPod(t *testing.T) *pathsPod {
	t.Helper()
	metrics := engine(t, 1) // for its /metrics
	p := &pathsPod{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			resp, err := http.Get(metrics.URL + "/metrics")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(w, resp.Body)
		case "/v1/models":
			p.defaults.Add(1)
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama"}]}`)
		case "/custom/models":
			p.customs.Add(1)
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama"},{"id":"custom-lora","parent":"llama"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// The collector polls served models at the path of the pool config's
// models-data-source from the start, keeps it through a config that does
// not parse, and falls back to /v1/models when the config goes away.
func TestCollectorPollsConfiguredModelsPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS and etcd servers; skipped with -short")
	}
	pool := coordtest.PoolName(t)
	ns := bustest.Start(t)
	nc, _ := bustest.Connect(t, ns)
	cli := etcdSrv.Client(t)
	ctx := context.Background()
	custom := strings.Replace(strings.Replace(dataConfig, "scheme: https", "scheme: http", 1), "insecureSkipVerify: false", "insecureSkipVerify: true", 1)
	if _, err := coord.PutConfig(ctx, cli, pool, []byte(custom)); err != nil {
		t.Fatal(err)
	}
	pod := newPathsPod(t)
	register(t, pool, "pod-0", pod.srv.URL)

	var mu sync.Mutex
	var latest *eventsv1.PodMetrics
	filter, _ := bus.MetricsFilter(pool)
	sub, err := bus.Subscribe(nc, filter, func(m *eventsv1.PodMetrics, _ string) {
		mu.Lock()
		latest = m
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	served := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(latest.GetServedModels(), ",")
	}

	startCollector(t, pool, ns.ClientURL(), "c1")
	eventually(t, "the configured path's models", func() bool { return served() == "llama,custom-lora" })
	if n := pod.defaults.Load(); n != 0 {
		t.Errorf("/v1/models polled %d times with a config that names /custom/models", n)
	}

	// A config that does not parse leaves the poll as it was.
	if _, err := coord.PutConfig(ctx, cli, pool, []byte("plugins: [")); err != nil {
		t.Fatal(err)
	}
	customs := pod.customs.Load()
	time.Sleep(300 * time.Millisecond)
	if served() != "llama,custom-lora" || pod.defaults.Load() != 0 || pod.customs.Load() != customs {
		t.Errorf("after a bad config: served %q, %d polls of /v1/models, %d more of /custom/models", served(), pod.defaults.Load(), pod.customs.Load()-customs)
	}

	// The config goes away: back to /v1/models, at once.
	if err := coord.DeleteConfig(ctx, cli, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the default path's models", func() bool { return served() == "llama" })
}

// A config's other data sources (a DCGM exporter's) become the poller's
// attribute polls, put in force once per change and dropped with them.
func TestDataLayerAttributePolls(t *testing.T) {
	const gpuConfig = `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- {type: dcgm-data-source, name: gpus, parameters: {port: 9400, useNodeAddress: true, interval: 2s}}
- type: dcgm-extractor
- type: metrics-data-source
- type: core-metrics-extractor
- type: queue-scorer
- type: max-score-picker
dataLayer:
  sources:
  - pluginRef: metrics-data-source
    extractors: [{pluginRef: core-metrics-extractor}]
  - pluginRef: gpus
    extractors: [{pluginRef: dcgm-extractor}]
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}]
`
	rec := &pollRecorder{}
	d := newDataLayer(rec, discardLog)
	defer d.close()
	d.apply(coord.ConfigVersion{Pool: "p", Data: []byte(gpuConfig), Revision: 1})
	if len(rec.attrs) != 1 || len(rec.attrs[0]) != 1 {
		t.Fatalf("attribute polls set %v, want one poll", rec.attrs)
	}
	p := rec.attrs[0][0]
	if p.Source.TypedName().Name != "gpus" || len(p.Extractors) != 1 || p.Extractors[0].TypedName().Type != "dcgm-extractor" || p.Interval != 2*time.Second {
		t.Errorf("poll %s every %s with %d extractors", p.Source.TypedName(), p.Interval, len(p.Extractors))
	}
	// The same polls in a changed config: left in force.
	d.apply(coord.ConfigVersion{Pool: "p", Data: []byte(gpuConfig + "\n# reworded\n"), Revision: 2})
	if len(rec.attrs) != 1 {
		t.Errorf("the same polls were set again: %d sets", len(rec.attrs))
	}
	d.apply(coord.ConfigVersion{Pool: "p", Data: []byte(strings.Replace(gpuConfig, "interval: 2s", "interval: 5s", 1)), Revision: 3})
	if len(rec.attrs) != 2 || rec.attrs[1][0].Interval != 5*time.Second {
		t.Errorf("a new interval: sets %d", len(rec.attrs))
	}
	d.apply(coord.ConfigVersion{Pool: "p", Deleted: true, Revision: 4})
	if len(rec.attrs) != 3 || rec.attrs[2] != nil {
		t.Errorf("config deleted: sets %v, want the polls dropped", rec.attrs)
	}
}
