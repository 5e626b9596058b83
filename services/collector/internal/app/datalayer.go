package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/collector/internal/scrape"
)

// modelsPoller is the part of the scraper the data layer drives.
type modelsPoller interface {
	SetModelsPoll(scrape.ModelsPoll)
	SetMetricsSource(scrape.MetricsSource)
	SetAttributePolls([]scrape.AttributePoll)
}

// dataLayer makes the collector scrape, poll and discover as the pool's
// EndpointPickerConfig says. When its data section has a
// models-data-source, every endpoint's models are fetched with that source
// (its scheme, path, insecureSkipVerify and interval) and its
// model-server-protocol-models extractor; without a config or such a
// source, the default is polled: http://<endpoint>/v1/models every
// --models-interval. Likewise a metrics-data-source sets where metrics are
// scraped (default http://<endpoint>/metrics), and a file-discovery in
// dataLayer.discovery the endpoints file followed (configFiles). A version
// that does not parse or build (as the picker builds it) is logged and
// leaves all of them as they were, as the picker keeps its previous config.
//
// apply runs on the config watcher's goroutine, one call at a time; close
// runs after the watcher and the scraper have stopped.
type dataLayer struct {
	poller modelsPoller
	log    *slog.Logger
	// files gets the endpoints file each version names (nil: none wants
	// it).
	files *configFiles

	// data is the config in force (nil: none); sched is the scheduler
	// built from it whose source the poller uses (nil: the default
	// poll), and params that source's parameters.
	data    []byte
	sched   *scheduling.Scheduler
	params  *datalayer.ModelsParams
	applied bool // a poll was put in force
	// metrics is the metrics source in force (nil: the default).
	metrics *scrape.MetricsSource
	// attrSched is the scheduler whose other data sources (a DCGM
	// exporter's, say) the poller fetches attributes with, nil when none;
	// attrPolls says what they are.
	attrSched *scheduling.Scheduler
	attrPolls string

	firstOnce sync.Once
	first     chan struct{} // closed once the first version is applied
}

func newDataLayer(poller modelsPoller, log *slog.Logger) *dataLayer {
	return &dataLayer{poller: poller, log: log, first: make(chan struct{})}
}

// discardLog discards the logs of the schedulers the collector builds:
// the picker reports the config's warnings.
var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// apply follows one version of the pool's config.
func (d *dataLayer) apply(v coord.ConfigVersion) {
	defer d.firstOnce.Do(func() { close(d.first) })
	data := bytes.TrimSpace(v.Data)
	if v.Deleted || len(data) == 0 {
		d.data = nil
		d.use(nil, scrape.ModelsPoll{}, nil, "the pool has no config", v.Revision)
		d.useMetrics(nil, v.Revision)
		d.useAttributes(nil, v.Revision)
		d.files.set(fileSpec{}, v.Revision)
		return
	}
	if d.data != nil && bytes.Equal(data, d.data) {
		return
	}
	s, err := buildConfig(data)
	if err != nil {
		d.log.Error("pool config rejected; served models are polled as before", "key", coord.ConfigKey(v.Pool), "revision", v.Revision, "error", err)
		return
	}
	d.data = slices.Clone(data)
	d.files.set(discoveryOf(s), v.Revision)
	d.useMetrics(metricsSourceOf(s), v.Revision)
	if len(attributePollsOf(s)) == 0 {
		d.useAttributes(nil, v.Revision)
	} else if as, err := buildConfig(data); err == nil {
		// Built again: these sources live as long as the attribute
		// polls, not as the models poll's scheduler.
		d.useAttributes(as, v.Revision)
	}
	poll, src, why := modelsPollOf(s)
	if src == nil {
		_ = s.Close()
		s = nil
	}
	d.use(s, poll, src, why, v.Revision)
}

// buildConfig parses and builds a config as `hermodctl config validate`
// does (no indexer, any tokenizer).
func buildConfig(data []byte) (*scheduling.Scheduler, error) {
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	s, err := scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(discardLog))...)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	return s, nil
}

// use puts poll in force, src being its source (nil: the default poll) in
// scheduler s, unless it is the poll in force already. why says where it
// comes from.
func (d *dataLayer) use(s *scheduling.Scheduler, poll scrape.ModelsPoll, src *datalayer.ModelsSource, why string, revision int64) {
	var params *datalayer.ModelsParams
	if src != nil {
		p := src.Params()
		params = &p
	}
	if d.applied && samePoll(params, d.params) {
		// The same parameters: keep the source in use (and its
		// connections) and drop the one just built.
		if s != nil {
			_ = s.Close()
		}
		return
	}
	d.poller.SetModelsPoll(poll)
	if d.sched != nil {
		_ = d.sched.Close()
	}
	d.sched, d.params, d.applied = s, params, true
	shown := datalayer.DefaultModelsParams()
	if params != nil {
		shown = *params
	}
	attrs := []any{"url", shown.Scheme + "://<endpoint>" + shown.Path, "why", why, "revision", revision}
	if params != nil {
		attrs = append(attrs, "source", src.TypedName().Name, "insecure_skip_verify", shown.InsecureSkipVerify)
		if shown.Interval > 0 {
			attrs = append(attrs, "interval", shown.Interval.String())
		}
	}
	d.log.Info("served models polling", attrs...)
}

// samePoll says whether two sources' parameters (nil: the default poll)
// poll alike.
func samePoll(a, b *datalayer.ModelsParams) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// close closes the schedulers whose sources were in use.
func (d *dataLayer) close() {
	if d.sched != nil {
		_ = d.sched.Close()
		d.sched = nil
	}
	if d.attrSched != nil {
		_ = d.attrSched.Close()
		d.attrSched = nil
	}
}

// attributePollsOf returns the attribute polls of a built config: every
// source of its data section that is neither the engine's metrics nor its
// models (those are scraped and polled as they say), with the extractors
// listed for it.
func attributePollsOf(s *scheduling.Scheduler) []scrape.AttributePoll {
	desc := s.Describe()
	if desc.Data == nil {
		return nil
	}
	byName := pluginsByName(s)
	var polls []scrape.AttributePoll
	for _, ds := range desc.Data.Sources {
		src, ok := byName[ds.PluginRef].(scheduling.DataSource)
		if !ok {
			continue
		}
		switch src.(type) {
		case *datalayer.MetricsSource, *datalayer.ModelsSource:
			continue // scraped and polled as they say
		}
		poll := scrape.AttributePoll{Source: src}
		if iv, ok := src.(interface{ Interval() scheduling.Duration }); ok {
			poll.Interval = iv.Interval().Std()
		}
		for _, ref := range ds.Extractors {
			if x, ok := byName[ref].(scheduling.DataExtractor); ok {
				poll.Extractors = append(poll.Extractors, x)
			}
		}
		polls = append(polls, poll)
	}
	return polls
}

// describePolls says what polls fetch, to tell two configs' polls apart:
// each source's name, type and parameters, and its extractors.
func describePolls(polls []scrape.AttributePoll) string {
	var b strings.Builder
	for _, p := range polls {
		fmt.Fprintf(&b, "%s every %s", p.Source.TypedName(), p.Interval)
		if r, ok := p.Source.(scheduling.ParameterReporter); ok {
			params, _ := json.Marshal(r.Parameters())
			fmt.Fprintf(&b, " %s", params)
		}
		for _, x := range p.Extractors {
			fmt.Fprintf(&b, " -> %s", x.TypedName())
		}
		b.WriteString("; ")
	}
	return b.String()
}

// useAttributes puts the attribute polls of s (nil: none) in force, unless
// the same are in force already, and closes the scheduler of those it
// replaces.
func (d *dataLayer) useAttributes(s *scheduling.Scheduler, revision int64) {
	var polls []scrape.AttributePoll
	if s != nil {
		polls = attributePollsOf(s)
	}
	desc := describePolls(polls)
	if desc == d.attrPolls {
		if s != nil {
			_ = s.Close()
		}
		return
	}
	d.poller.SetAttributePolls(polls)
	if d.attrSched != nil {
		_ = d.attrSched.Close()
	}
	d.attrSched, d.attrPolls = s, desc
	if len(polls) == 0 {
		d.log.Info("attribute polling off", "revision", revision)
		return
	}
	d.log.Info("attribute polling", "sources", strings.TrimSuffix(desc, "; "), "revision", revision)
}

// modelsPollOf returns the models poll a built config asks for, with its
// source, and why: the first models-data-source of its data section and
// that source's first model-server-protocol-models extractor. Without a
// data section or such a source, the source is nil (the default poll).
func modelsPollOf(s *scheduling.Scheduler) (scrape.ModelsPoll, *datalayer.ModelsSource, string) {
	desc := s.Describe()
	switch {
	case desc.Data == nil || len(desc.Data.Sources) == 0:
		return scrape.ModelsPoll{}, nil, "the config has no data sources"
	}
	byName := pluginsByName(s)
	for _, ds := range desc.Data.Sources {
		src, ok := byName[ds.PluginRef].(*datalayer.ModelsSource)
		if !ok {
			continue
		}
		poll := scrape.ModelsPoll{Source: src, Interval: src.Params().Interval.Std()}
		why := "data source " + ds.PluginRef
		for _, ref := range ds.Extractors {
			if x, ok := byName[ref].(*datalayer.ModelsExtractor); ok {
				poll.Extractor = x
				why += ", extractor " + ref
				break
			}
		}
		if poll.Extractor == nil {
			// Hermod's picker always routes by served models: extract them
			// as model-server-protocol-models would.
			why += " (no model-server-protocol-models extractor listed: served models are extracted anyway)"
		}
		return poll, src, why
	}
	return scrape.ModelsPoll{}, nil, "the config's data section has no " + datalayer.ModelsSourceType
}

// metricsSourceOf returns where a built config scrapes metrics: the first
// metrics-data-source of its data section (nil: the default).
func metricsSourceOf(s *scheduling.Scheduler) *scrape.MetricsSource {
	desc := s.Describe()
	if desc.Data == nil {
		return nil
	}
	byName := pluginsByName(s)
	for _, ds := range desc.Data.Sources {
		if src, ok := byName[ds.PluginRef].(*datalayer.MetricsSource); ok {
			p := src.Params()
			return &scrape.MetricsSource{Scheme: p.Scheme, Path: p.Path, InsecureSkipVerify: p.InsecureSkipVerify}
		}
	}
	return nil
}

// useMetrics puts src (nil: the default) in force as where metrics are
// scraped, unless it is in force already.
func (d *dataLayer) useMetrics(src *scrape.MetricsSource, revision int64) {
	if (src == nil && d.metrics == nil) || (src != nil && d.metrics != nil && *src == *d.metrics) {
		return
	}
	d.metrics = src
	shown := scrape.MetricsSource{Scheme: "http", Path: "/metrics"}
	if src != nil {
		shown = *src
		d.poller.SetMetricsSource(*src)
	} else {
		d.poller.SetMetricsSource(scrape.MetricsSource{})
	}
	d.log.Info("metrics scraping", "url", shown.Scheme+"://<endpoint>"+shown.Path, "insecure_skip_verify", shown.InsecureSkipVerify, "revision", revision)
}

// pluginsByName returns a built config's plugins by name.
func pluginsByName(s *scheduling.Scheduler) map[string]scheduling.Plugin {
	byName := map[string]scheduling.Plugin{}
	for _, p := range s.Plugins() {
		byName[p.TypedName().Name] = p
	}
	return byName
}
