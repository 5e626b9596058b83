package standard_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
)

func load(t testing.TB, path string) (*scheduling.Scheduler, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return nil, err
	}
	// as hermodctl validates: no indexer, any tokenizer model
	return scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
}

// resolvedSummary renders what a config resolves to: plugins in order with
// where they came from, the handler, and each profile's filters, weighted
// scorers and picker.
func resolvedSummary(d *scheduling.Resolved) string {
	var b strings.Builder
	for _, p := range d.Plugins {
		fmt.Fprintf(&b, "plugin %s (%s) %s\n", p.Name, p.Type, p.Origin)
	}
	fmt.Fprintf(&b, "handler %s\n", d.ProfileHandler)
	for _, p := range d.SchedulingProfiles {
		var sc []string
		for _, s := range p.Scorers {
			sc = append(sc, s.Name+"*"+strconv.FormatFloat(s.Weight, 'g', -1, 64))
		}
		fmt.Fprintf(&b, "profile %s: filters [%s] scorers [%s] picker %s\n", p.Name, strings.Join(p.Filters, " "), strings.Join(sc, " "), p.Picker)
	}
	return b.String()
}

// Every configuration of the reference documents loads unchanged and
// resolves to this plugin / profile / weight set.
func TestReferenceConfigs(t *testing.T) {
	cases := []struct {
		file     string
		want     string
		warnings []string
	}{
		{"000-load-aware-values.yaml", `plugin prefix-cache-scorer (prefix-cache-scorer) plugins[0]
plugin queue-scorer (queue-scorer) plugins[1]
plugin load-aware-scorer (load-aware-scorer) plugins[2]
plugin active-request-scorer (active-request-scorer) plugins[3]
plugin session-affinity-scorer (session-affinity-scorer) plugins[4]
plugin no-hit-lru-scorer (no-hit-lru-scorer) plugins[5]
plugin max-score-picker (max-score-picker) plugins[6]
plugin single-profile-handler (single-profile-handler) default
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1 load-aware-scorer*1 active-request-scorer*1 session-affinity-scorer*1 no-hit-lru-scorer*1] picker max-score-picker
`, nil},
		{"001-data-layer.yaml", `plugin models-data-source (models-data-source) plugins[0]
plugin model-server-protocol-models (model-server-protocol-models) plugins[1]
plugin queue-scorer (queue-scorer) plugins[2]
plugin max-score-picker (max-score-picker) plugins[3]
plugin single-profile-handler (single-profile-handler) default
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1] picker max-score-picker
`, nil},
		{"001-disagg-canonical.yaml", `plugin disagg-headers-handler (disagg-headers-handler) plugins[0]
plugin prefix-based-pd-decider (prefix-based-pd-decider) plugins[1]
plugin prefill-filter (prefill-filter) plugins[2]
plugin decode-filter (decode-filter) plugins[3]
plugin max-score-picker (max-score-picker) plugins[4]
plugin disagg-profile-handler (disagg-profile-handler) plugins[5]
handler disagg-profile-handler
profile prefill: filters [prefill-filter] scorers [] picker max-score-picker
profile decode: filters [decode-filter] scorers [] picker max-score-picker
`, nil},
		{"001-responses-store-memory.yaml", `plugin responses-store (responses-store) plugins[0]
plugin queue-scorer (queue-scorer) plugins[1]
plugin max-score-picker (max-score-picker) default
plugin single-profile-handler (single-profile-handler) default
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1] picker max-score-picker
`, nil},
		{"001-responses-store-tiered.yaml", `plugin responses-store (responses-store) plugins[0]
plugin queue-scorer (queue-scorer) plugins[1]
plugin max-score-picker (max-score-picker) default
plugin single-profile-handler (single-profile-handler) default
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1] picker max-score-picker
`, nil},
		{"001-tokenizer.yaml", `plugin tokenizer (tokenizer) plugins[0]
plugin queue-scorer (queue-scorer) plugins[1]
plugin max-score-picker (max-score-picker) default
plugin single-profile-handler (single-profile-handler) default
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1] picker max-score-picker
`, []string{"plugins[0] (tokenizer): udsTokenizerConfig: Hermod tokenizes in process; the socket is not used"}},
		{"003-pd-context-length.yaml", `plugin prefix-based-pd-decider (prefix-based-pd-decider) made by plugins[0] (pd-profile-handler)
plugin pd-profile-handler (pd-profile-handler) plugins[0]
plugin prefill-filter (prefill-filter) plugins[1]
plugin decode-filter (decode-filter) plugins[2]
plugin context-length-aware (context-length-aware) plugins[3]
plugin max-score-picker (max-score-picker) plugins[4]
handler pd-profile-handler
profile prefill: filters [prefill-filter] scorers [context-length-aware*1] picker max-score-picker
profile decode: filters [decode-filter] scorers [context-length-aware*1] picker max-score-picker
`, []string{"plugins[0] (pd-profile-handler): no plugin named prefix-based-pd-decider is declared; using a default prefix-based-pd-decider (nonCachedTokens 0: never disaggregates)"}},
		{"003-deployment-values.yaml", `plugin single-profile-handler (single-profile-handler) plugins[0]
plugin queue-scorer (queue-scorer) plugins[1]
plugin context-length-aware (context-length-aware) plugins[2]
plugin max-score-picker (max-score-picker) plugins[3]
handler single-profile-handler
profile default: filters [] scorers [queue-scorer*1 context-length-aware*2] picker max-score-picker
`, nil},
	}
	files, _ := filepath.Glob("testdata/reference/*.yaml")
	if len(files) != len(cases) {
		t.Errorf("%d reference fixtures, %d cases: every fixture needs a case", len(files), len(cases))
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			s, err := load(t, filepath.Join("testdata/reference", c.file))
			if err != nil {
				t.Fatal(err)
			}
			d := s.Describe()
			if got := resolvedSummary(d); got != c.want {
				t.Errorf("resolved\n%s\nwant\n%s", got, c.want)
			}
			if strings.Join(d.Warnings, "\n") != strings.Join(c.warnings, "\n") {
				t.Errorf("warnings %q, want %q", d.Warnings, c.warnings)
			}
		})
	}
}

// The effective parameters of reference/000's plugins, defaults applied.
func TestReference000Parameters(t *testing.T) {
	s, err := load(t, "testdata/reference/000-load-aware-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"load-aware-scorer":     "{Threshold:128}",
		"active-request-scorer": "{RequestTimeout:2m0s IdleThreshold:0 MaxBusyScore:1 InFlightLoadProducerName:}",
		"no-hit-lru-scorer":     "{PrefixPluginType:prefix-cache-scorer PrefixPluginName:prefix-cache-scorer LRUSize:1024 PrefixMatchInfoProducerName:}",
		"max-score-picker":      "{MaxNumOfEndpoints:2}",
		"prefix-cache-scorer":   "{AutoTune:true BlockSizeTokens:16 MaxPrefixBlocksToMatch:256 LRUCapacityPerServer:31250 MatchLengthWeight:0 MatchLengthScaleTokens:0}",
	}
	for _, p := range s.Describe().Plugins {
		w, ok := want[p.Name]
		if !ok {
			continue
		}
		if got := fmt.Sprintf("%+v", p.Parameters); got != w {
			t.Errorf("%s parameters = %s, want %s", p.Name, got, w)
		}
	}
}

// Plugins Hermod knows but does not build fail clearly with their gate;
// without it (gated ones) they are skipped with a warning. The list is
// empty today; TestReference001TypesAvailable checks that no type of the
// reference documents is in it.
func TestUnavailablePlugins(t *testing.T) {
	for _, r := range standard.Unavailable {
		t.Run(r.Type, func(t *testing.T) {
			cfg, err := scheduling.ParseConfig([]byte("featureGates: [prepareDataPlugins, dataLayer]\nplugins: [{type: " + r.Type + "}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = scheduling.New(cfg, scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err == nil || !strings.Contains(err.Error(), "is not available in this build") {
				t.Fatalf("error = %v", err)
			}
			if r.Gate == "" {
				return
			}
			cfg, _ = scheduling.ParseConfig([]byte("plugins: [{type: " + r.Type + "}]\n"))
			s, err := scheduling.New(cfg, scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatalf("without the gate: %v", err)
			}
			if w := strings.Join(s.Describe().Warnings, "\n"); !strings.Contains(w, "skipped: plugins of this type need featureGates") {
				t.Errorf("warnings = %q", w)
			}
		})
	}
}

// reference001Types are the plugin types reference/001 (Heimdall's plugin
// reference) documents, in its order.
var reference001Types = []string{
	"single-profile-handler", "disagg-profile-handler",
	"prefix-based-pd-decider", "always-disagg-pd-decider", "always-disagg-multimodal-decider",
	"by-label", "by-label-selector", "prefill-filter", "decode-filter", "encode-filter",
	"context-length-aware", "active-request-scorer", "load-aware-scorer", "no-hit-lru-scorer",
	"precise-prefix-cache-scorer", "prefix-cache-scorer", "session-affinity-scorer",
	"kv-cache-utilization-scorer", "lora-affinity-scorer", "queue-scorer", "running-requests-size-scorer",
	"predicted-latency-scorer", "max-score-picker", "random-picker", "weighted-random-picker",
	"disagg-headers-handler", "tokenizer", "response-header-handler",
	"models-data-source", "model-server-protocol-models", "responses-store",
}

// Every type reference/001 documents is built: none is refused as "not
// available in this build".
func TestReference001TypesAvailable(t *testing.T) {
	unavailable := map[string]bool{}
	for _, r := range standard.Unavailable {
		unavailable[r.Type] = true
		for _, a := range r.Aliases {
			unavailable[a] = true
		}
	}
	for _, typ := range reference001Types {
		reg, ok := scheduling.DefaultRegistry.Lookup(typ)
		switch {
		case !ok:
			t.Errorf("%s: not registered", typ)
		case reg.New == nil || unavailable[typ]:
			t.Errorf("%s: registered as not available in this build", typ)
		}
	}
	// The newer upstream name of the extractor too.
	if reg, ok := scheduling.DefaultRegistry.Lookup("models-data-extractor"); !ok || reg.New == nil {
		t.Errorf("models-data-extractor: not available")
	}
}

// reference/000 without its "..." rebuilt: no-hit-lru-scorer has no prefix
// plugin to read. Upstream loads it (every request counts as cold), and so
// does Hermod, with a warning that says so.
func TestReference000WithoutPrefixPlugin(t *testing.T) {
	data, err := os.ReadFile("testdata/reference/000-load-aware-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scheduling.ParseConfig([]byte(strings.Replace(string(data), "    - type: prefix-cache-scorer\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduling.New(cfg, scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	warnings := strings.Join(s.Describe().Warnings, "\n")
	if !strings.Contains(warnings, "no-hit-lru-scorer") || !strings.Contains(warnings, "every request counts as cold") {
		t.Errorf("warnings %q do not say no-hit-lru-scorer treats every request as cold", warnings)
	}
}
