package scheduling

import (
	"fmt"
	"sort"
	"sync"
)

// Feature gates of EndpointPickerConfig.featureGates.
const (
	GateFlowControl = "flowControl"
	// GateHAPopulateNonLeaderDatastore keeps non-leader replicas' view of
	// the pool current upstream; every picker replica here has it (none
	// leads), so it is on whatever the config says.
	GateHAPopulateNonLeaderDatastore = "haPopulateNonLeaderDatastore"
	// GatePrepareDataPlugins enables PrepareData plugins (the gate of
	// GIE's releases, which Hermod keeps: responses-store needs it).
	GatePrepareDataPlugins = "prepareDataPlugins"
	// GateDataLayer and GateEnableLegacyMetrics are gone upstream (the
	// data layer is always on; the legacy metrics are not served); older
	// configs name them, so ParseConfig drops them, noting a deprecation.
	GateDataLayer           = "dataLayer"
	GateEnableLegacyMetrics = "enableLegacyMetrics"
)

// KnownFeatureGates lists every gate a config may name (besides the
// removed ones); any other is an error.
var KnownFeatureGates = []string{GateFlowControl, GateHAPopulateNonLeaderDatastore, GatePrepareDataPlugins}

// removedGates say why a gate that older configs name does nothing.
var removedGates = map[string]string{
	GateDataLayer:           "the llm-d router removed it in v0.10: the data layer is always on",
	GateEnableLegacyMetrics: "the llm-d router removed it in v0.9: Hermod serves the llm_d_epp_*, GIE and its own metric names alike",
}

// Registration describes one plugin type.
type Registration struct {
	// Type is the name configs use in plugins[].type.
	Type string
	// Aliases are further type names resolving to the same factory.
	Aliases []string
	// New builds an instance. Nil marks a type Hermod knows but this build
	// does not provide: configs naming it fail with "not available".
	New Factory
	// Gate, when set, is the feature gate the type needs; without it the
	// plugin is skipped with a warning.
	Gate string
}

// Registry maps plugin types to their registrations. The zero value is
// ready to use; it is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*Registration
}

// DefaultRegistry is where plugin packages register themselves in init().
var DefaultRegistry = &Registry{}

// Register adds a registration to the DefaultRegistry.
func Register(r Registration) { DefaultRegistry.Register(r) }

// Register adds r under its type and aliases. Registering a type twice is a
// programming error and panics, as duplicate http.Handle patterns do.
func (g *Registry) Register(r Registration) {
	if r.Type == "" {
		panic("scheduling: Register with an empty type")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.types == nil {
		g.types = make(map[string]*Registration)
	}
	reg := r
	for _, t := range append([]string{r.Type}, r.Aliases...) {
		if _, dup := g.types[t]; dup {
			panic(fmt.Sprintf("scheduling: plugin type %q registered twice", t))
		}
		g.types[t] = &reg
	}
}

// Lookup returns the registration of a type or alias.
func (g *Registry) Lookup(typ string) (*Registration, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.types[typ]
	return r, ok
}

// Types returns every registered type and alias that this build provides,
// sorted.
func (g *Registry) Types() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.types))
	for t, r := range g.types {
		if r.New != nil {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
