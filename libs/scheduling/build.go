package scheduling

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Types the builder adds itself when a config leaves them out.
const (
	TypeSingleProfileHandler = "single-profile-handler"
	TypeMaxScorePicker       = "max-score-picker"
	DefaultProfileName       = "default"
)

// Errors Handle.Plugin wraps, so factories can tell a missing reference
// from a misordered one.
var (
	ErrNotDeclared   = errors.New("not declared")
	ErrDeclaredLater = errors.New("declared later")
)

// Option configures New.
type Option func(*options)

type options struct {
	services   map[string]any
	registerer prometheus.Registerer
	registry   *Registry
	logger     *slog.Logger
	metrics    *SchedulerMetrics
	now        func() time.Time
	seed       *[2]uint64
	previous   *Scheduler
}

// WithRegistry builds from reg instead of DefaultRegistry.
func WithRegistry(reg *Registry) Option { return func(o *options) { o.registry = reg } }

// WithLogger sets the logger of the scheduler and its plugins.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegisterer registers the plugins' own metrics with reg (default: a
// registry of the scheduler's own, gathered by nobody).
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithMetrics records scheduler and plugin metrics into m.
func WithMetrics(m *SchedulerMetrics) Option { return func(o *options) { o.metrics = m } }

// ServiceKey names a service of type T the embedding process provides to
// plugins (Provide) and plugins look up (Lookup): the picker's indexer
// client, say.
type ServiceKey[T any] string

// Provide provides svc to plugins under the key.
func (k ServiceKey[T]) Provide(svc T) Option {
	return func(o *options) {
		if o.services == nil {
			o.services = map[string]any{}
		}
		o.services[string(k)] = svc
	}
}

// Lookup returns the service provided under the key; false when none is.
func (k ServiceKey[T]) Lookup(h Handle) (T, bool) {
	v, ok := h.Service(string(k))
	t, isT := v.(T)
	return t, ok && isT
}

// WithClock replaces time.Now for plugins (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithRandSeed makes tie-breaking and random pickers deterministic (tests).
func WithRandSeed(seed uint64) Option {
	return func(o *options) { o.seed = &[2]uint64{seed, seed ^ 0x9e3779b97f4a7c15} }
}

// WithPrevious makes the new scheduler's stateful plugins take over the
// state of their namesakes in prev (StateInheritor): a configuration reload
// keeps in-flight counts, LRUs and prefix indexes. prev keeps working and
// shares that state until it is dropped.
func WithPrevious(prev *Scheduler) Option { return func(o *options) { o.previous = prev } }

// New builds a Scheduler from cfg: it checks feature gates, instantiates the
// plugins in declaration order, applies the defaults of spec §1 (profile
// handler, default profile, picker) and checks every reference. All errors
// found are returned joined; each names the plugin or field at fault.
func New(cfg *Config, opts ...Option) (*Scheduler, error) {
	o := options{registry: DefaultRegistry, logger: slog.Default(), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	b := &builder{cfg: cfg, o: o, gates: map[string]bool{}}
	s, err := b.build()
	if err != nil {
		return nil, err
	}
	for _, d := range s.desc.Deprecations {
		o.logger.Info("endpoint picker config uses a deprecated field", "deprecation", d)
	}
	for _, w := range s.desc.Warnings {
		o.logger.Warn("endpoint picker config", "warning", w)
	}
	return s, nil
}

type builder struct {
	cfg   *Config
	o     options
	gates map[string]bool
	errs  []error
	warns []string
	// deprecations are the old fields the config uses (logged at info,
	// as upstream does; hermodctl config validate prints them)
	deprecations []string

	instances []*instance          // in declaration order, implicit ones appended
	byName    map[string]*instance // declared plugins only
	implicits map[string]Plugin    // defaults the builder made, by type
	specIndex map[string]int       // declared name -> plugins[] index
}

type instance struct {
	index    int // plugins[] index; -1 for plugins the builder added
	spec     PluginSpec
	plugin   Plugin
	skipped  string
	implicit bool
	addedBy  string // the plugin that made this helper, if one did
}

func (b *builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *builder) warn(format string, args ...any) {
	b.warns = append(b.warns, fmt.Sprintf(format, args...))
}

func (b *builder) build() (*Scheduler, error) {
	b.deprecations = append(b.deprecations, b.cfg.Deprecations...)
	b.checkGates()
	b.instantiate()
	if len(b.errs) > 0 {
		return nil, b.abandon()
	}
	s := &Scheduler{
		logger:  b.o.logger,
		metrics: b.o.metrics,
		now:     b.o.now,
	}
	if b.o.seed != nil {
		s.rng = rand.New(rand.NewPCG(b.o.seed[0], b.o.seed[1]))
	} else {
		s.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	s.decisionBase = s.rng.Uint64()
	b.profiles(s)
	b.handler(s)
	b.hooks(s)
	b.admission(s)
	b.parsers(s)
	b.dataLayer()
	b.attributes()
	if len(b.errs) > 0 {
		return nil, b.abandon()
	}
	s.desc = b.describe(s)
	s.pool.New = func() any { return &cycle{s: s} }
	b.inherit(s)
	return s, nil
}

// inherit hands each StateInheritor of s the plugin of the same name and
// type in the previous scheduler, and records the projections that start
// empty.
func (b *builder) inherit(s *Scheduler) {
	old := map[TypedName]Plugin{}
	if prev := b.o.previous; prev != nil {
		for _, p := range prev.plugins {
			old[p.TypedName()] = p
		}
	}
	for _, p := range s.plugins {
		tn := p.TypedName()
		inherited := false
		if h, ok := p.(StateInheritor); ok {
			if q, ok := old[tn]; ok {
				if inherited = h.InheritState(q); inherited {
					s.logger.Info("plugin state carried over to the new configuration", "plugin", tn.Name, "type", tn.Type)
				} else {
					s.logger.Warn("plugin state not carried over: its parameters changed how it is kept; starting empty", "plugin", tn.Name, "type", tn.Type)
				}
			}
		}
		if _, ok := p.(Projection); ok && !inherited {
			s.fresh = append(s.fresh, tn)
		}
	}
}

// abandon closes the plugins built so far that hold resources (a rejected
// configuration must not leak them) and returns the build errors.
func (b *builder) abandon() error {
	for _, inst := range b.instances {
		if c, ok := inst.plugin.(io.Closer); ok {
			if err := c.Close(); err != nil {
				b.o.logger.Warn("closing a plugin of a rejected configuration", "plugin", inst.spec.Name, "error", err)
			}
		}
	}
	return errors.Join(b.errs...)
}

func (b *builder) checkGates() {
	for i, g := range b.cfg.FeatureGates {
		if !slices.Contains(KnownFeatureGates, g.Name) {
			b.fail("featureGates[%d]: unknown feature gate %q (known: %s)", i, g.Name, strings.Join(KnownFeatureGates, ", "))
			continue
		}
		if g.Name == GateHAPopulateNonLeaderDatastore && !g.Enabled {
			b.warn("featureGates[%d]: %s=false changes nothing: every picker replica keeps the whole pool (none leads)", i, g.Name)
		}
		b.gates[g.Name] = g.Enabled
	}
}

// pluginLabel is how errors and warnings name a declared plugin.
func pluginLabel(i int, spec PluginSpec) string {
	if spec.Name == spec.Type {
		return fmt.Sprintf("plugins[%d] (%s)", i, spec.Type)
	}
	return fmt.Sprintf("plugins[%d] (%s, type %s)", i, spec.Name, spec.Type)
}

func (b *builder) instantiate() {
	b.byName = map[string]*instance{}
	b.specIndex = map[string]int{}
	duplicates := false
	for i, spec := range b.cfg.Plugins {
		if spec.Name == "" {
			spec.Name = spec.Type
		}
		if j, dup := b.specIndex[spec.Name]; dup {
			b.fail("%s: name %q is already used by plugins[%d]; give one of them another name", pluginLabel(i, spec), spec.Name, j)
			duplicates = true
			continue
		}
		b.specIndex[spec.Name] = i
	}
	if duplicates {
		return
	}
	for i, spec := range b.cfg.Plugins {
		if spec.Name == "" {
			spec.Name = spec.Type
		}
		label := pluginLabel(i, spec)
		inst := &instance{index: i, spec: spec}
		reg, ok := b.o.registry.Lookup(spec.Type)
		switch {
		case !ok:
			b.fail("%s: unknown plugin type %q%s", label, spec.Type, suggest(spec.Type, b.o.registry.Types()))
			continue
		case reg.Gate != "" && !b.gates[reg.Gate]:
			inst.skipped = fmt.Sprintf("needs feature gate %s", reg.Gate)
			b.warns = append(b.warns, fmt.Sprintf("%s: skipped: plugins of this type need featureGates: [%s]", label, reg.Gate))
		case reg.New == nil:
			b.fail("%s: plugin type %s is not available in this build", label, spec.Type)
			continue
		default:
			h := &handle{b: b, index: i, label: label}
			p, err := reg.New(spec.Name, spec.Parameters, h)
			if err != nil {
				b.fail("%s: %w", label, err)
				continue
			}
			inst.plugin = p
		}
		b.instances = append(b.instances, inst)
		b.byName[spec.Name] = inst
	}
}

// implicit returns the plugin of a type the builder adds by default: the
// first declared plugin of that type, or else one instance it makes with
// default parameters (shared by every profile that needs it). Made plugins
// are not visible to pluginRef lookups: a config cannot refer to them.
func (b *builder) implicit(typ string) Plugin {
	for _, inst := range b.instances {
		if !inst.implicit && inst.plugin != nil && inst.plugin.TypedName().Type == typ {
			return inst.plugin
		}
	}
	if p, ok := b.implicits[typ]; ok {
		return p
	}
	reg, ok := b.o.registry.Lookup(typ)
	if !ok || reg.New == nil {
		b.fail("default plugin %s is not registered in this build", typ)
		return nil
	}
	p, err := reg.New(typ, nil, &handle{b: b, index: len(b.cfg.Plugins), label: typ})
	if err != nil {
		b.fail("default plugin %s: %w", typ, err)
		return nil
	}
	b.instances = append(b.instances, &instance{index: -1, spec: PluginSpec{Type: typ, Name: typ}, plugin: p, implicit: true})
	if b.implicits == nil {
		b.implicits = map[string]Plugin{}
	}
	b.implicits[typ] = p
	return p
}

func (b *builder) profiles(s *Scheduler) {
	specs := b.cfg.SchedulingProfiles
	if len(specs) == 0 {
		spec := ProfileSpec{Name: DefaultProfileName}
		for _, inst := range b.instances {
			if inst.plugin == nil || inst.implicit {
				continue
			}
			switch inst.plugin.(type) {
			case Filter, Scorer, Picker:
				spec.Plugins = append(spec.Plugins, ProfilePluginSpec{PluginRef: inst.spec.Name})
			}
		}
		specs = []ProfileSpec{spec}
	}
	s.profiles = make(map[string]*profile, len(specs))
	for i, ps := range specs {
		path := fmt.Sprintf("schedulingProfiles[%d]", i)
		if _, dup := s.profiles[ps.Name]; dup {
			b.fail("%s.name: profile %q is defined twice", path, ps.Name)
			continue
		}
		p := &profile{}
		used := map[string]bool{}
		var pickerRef string
		for j, ref := range ps.Plugins {
			rpath := fmt.Sprintf("%s.plugins[%d]", path, j)
			inst, ok := b.byName[ref.PluginRef]
			if !ok {
				b.fail("%s.pluginRef: no plugin named %q is declared in plugins", rpath, ref.PluginRef)
				continue
			}
			if inst.skipped != "" {
				b.warns = append(b.warns, fmt.Sprintf("%s.pluginRef: %q is skipped (%s); the profile runs without it", rpath, ref.PluginRef, inst.skipped))
				continue
			}
			if used[ref.PluginRef] {
				b.fail("%s.pluginRef: %q is referenced twice in profile %q", rpath, ref.PluginRef, ps.Name)
				continue
			}
			used[ref.PluginRef] = true
			pl := inst.plugin
			f, isFilter := pl.(Filter)
			sc, isScorer := pl.(Scorer)
			pk, isPicker := pl.(Picker)
			if !isFilter && !isScorer && !isPicker {
				// Upstream accepts these: the plugin runs where it hooks in
				// whatever the profile says.
				b.warn("%s.pluginRef: %q (type %s) is not a filter, scorer or picker: it runs as a declared plugin, and listing it in a profile changes nothing", rpath, ref.PluginRef, inst.spec.Type)
				continue
			}
			if isFilter {
				p.filters = append(p.filters, f)
			}
			if isScorer {
				w := 1.0
				if ref.Weight != nil {
					w = *ref.Weight
				}
				p.scorers = append(p.scorers, weightedScorer{Scorer: sc, weight: w})
			} else if ref.Weight != nil {
				b.warns = append(b.warns, fmt.Sprintf("%s.weight: %q is not a scorer; its weight is ignored", rpath, ref.PluginRef))
			}
			if isPicker {
				if p.picker != nil {
					b.fail("%s.pluginRef: profile %q has two pickers, %q and %q; keep one", rpath, ps.Name, pickerRef, ref.PluginRef)
					continue
				}
				p.picker, pickerRef = pk, ref.PluginRef
			}
		}
		if p.picker == nil {
			pk, ok := b.implicit(TypeMaxScorePicker).(Picker)
			if !ok {
				continue
			}
			p.picker = pk
		}
		s.profiles[ps.Name] = p
		s.profileOrder = append(s.profileOrder, ps.Name)
	}
	for _, p := range s.profiles {
		p.prepare(b.o.metrics)
	}
}

func (b *builder) handler(s *Scheduler) {
	var handlers []*instance
	for _, inst := range b.instances {
		if _, ok := inst.plugin.(ProfileHandler); ok {
			handlers = append(handlers, inst)
		}
	}
	switch {
	case len(handlers) > 1:
		names := make([]string, len(handlers))
		for i, h := range handlers {
			names[i] = pluginLabel(h.index, h.spec)
		}
		b.fail("plugins: exactly one profile handler may be declared, found %d: %s", len(handlers), strings.Join(names, ", "))
		return
	case len(handlers) == 0:
		if len(s.profiles) > 1 {
			b.fail("schedulingProfiles: %d profiles need a profile handler (disagg-profile-handler or pd-profile-handler); declare one in plugins", len(s.profiles))
			return
		}
		p := b.implicit(TypeSingleProfileHandler)
		if p == nil {
			return
		}
		s.handler = p.(ProfileHandler)
	default:
		s.handler = handlers[0].plugin.(ProfileHandler)
	}
	if err := s.handler.CheckProfiles(s.profileOrder); err != nil {
		label := TypeSingleProfileHandler + " (added by default)"
		for _, h := range handlers {
			label = pluginLabel(h.index, h.spec)
		}
		b.fail("%s: %w", label, err)
	}
	s.handlerTimer = b.o.metrics.timer(PointProfileHandler, s.handler)
}

func (b *builder) hooks(s *Scheduler) {
	m := b.o.metrics
	for _, inst := range b.instances {
		p := inst.plugin
		if p == nil {
			continue
		}
		if h, ok := p.(PrepareData); ok {
			s.prepare = append(s.prepare, timed[PrepareData]{h, m.timer(PointPrepareData, p)})
		}
		if h, ok := p.(CyclePreparer); ok {
			s.preparers = append(s.preparers, timed[CyclePreparer]{h, m.timer(PointPrepareCycle, p)})
		}
		if h, ok := p.(PreRequest); ok {
			s.preRequest = append(s.preRequest, timed[PreRequest]{h, m.timer(PointPreRequest, p)})
		}
		if h, ok := p.(Screener); ok {
			s.screeners = append(s.screeners, timed[Screener]{h, m.timer(PointScreener, p)})
		}
		if h, ok := p.(ResponseReceived); ok {
			s.responseReceived = append(s.responseReceived, timed[ResponseReceived]{h, m.timer(PointResponseReceived, p)})
		}
		if h, ok := p.(ResponseComplete); ok {
			s.responseComplete = append(s.responseComplete, timed[ResponseComplete]{h, m.timer(PointResponseComplete, p)})
		}
		if h, ok := p.(Projection); ok {
			if s.projections == nil {
				s.projections = make(map[string]Projection)
			}
			s.projections[h.TypedName().Name] = h
		}
		s.plugins = append(s.plugins, p)
	}
}

func (b *builder) dataLayer() {
	d := b.cfg.Data
	if d == nil {
		return
	}
	section := d.section
	if section == "" {
		section = "dataLayer"
	}
	if d.Discovery != "" {
		b.dataRef(section+".discovery.pluginRef", d.Discovery, is[EndpointDiscovery], "an endpoint discovery plugin")
	}
	if d.CrossReplicaSyncerPluginRef != "" {
		b.fail("%s.crossReplicaSyncerPluginRef: %q: there are no cross-replica syncer plugins (picker replicas share the pool's state through the event streams); remove it", section, d.CrossReplicaSyncerPluginRef)
	}
	for i, src := range d.Sources {
		path := fmt.Sprintf("%s.sources[%d]", section, i)
		var events bool
		b.dataRef(path+".pluginRef", src.PluginRef, func(p Plugin) bool {
			_, events = p.(EndpointSource)
			_, fetches := p.(DataSource)
			return events || fetches
		}, "a data source")
		for j, ex := range src.Extractors {
			b.dataRef(fmt.Sprintf("%s.extractors[%d].pluginRef", path, j), ex, func(p Plugin) bool {
				_, ok := p.(DataExtractor)
				return ok || events
			}, "a data extractor")
		}
	}
}

// attributes fails every active plugin that needs an endpoint attribute
// (AttributeConsumer) no extractor listed under the data section's sources
// produces: without one it would never see the attribute.
func (b *builder) attributes() {
	produced := map[string]bool{}
	section := "dataLayer"
	if d := b.cfg.Data; d != nil {
		if d.section != "" {
			section = d.section
		}
		for _, src := range d.Sources {
			for _, ex := range src.Extractors {
				if inst, ok := b.byName[ex]; ok {
					if p, ok := inst.plugin.(AttributeProducer); ok {
						for _, k := range p.ProducedAttributes() {
							produced[k] = true
						}
					}
				}
			}
		}
	}
	for _, inst := range b.instances {
		c, ok := inst.plugin.(AttributeConsumer)
		if !ok || inst.skipped != "" {
			continue
		}
		for _, k := range c.RequiredAttributes() {
			if !produced[k] {
				b.fail("plugins[%d] (%s, type %s): reads the endpoint attribute %q, which no data extractor listed in %s.sources produces; add its source and extractor there",
					inst.index, inst.spec.Name, inst.spec.Type, k, section)
			}
		}
	}
}

func (b *builder) dataRef(path, name string, is func(Plugin) bool, what string) {
	inst, ok := b.byName[name]
	switch {
	case !ok:
		b.fail("%s: no plugin named %q is declared in plugins", path, name)
	case inst.skipped != "":
	case !is(inst.plugin):
		b.fail("%s: %q (type %s) is not %s", path, name, inst.spec.Type, what)
	}
}

// handle is the Handle a factory gets; it sees the plugins declared before
// the one being built.
type handle struct {
	b     *builder
	index int
	label string
}

func (h *handle) Plugin(name string) (Plugin, error) {
	if inst, ok := h.b.byName[name]; ok && inst.index < h.index {
		if inst.plugin == nil {
			return nil, fmt.Errorf("plugin %q is skipped (%s)", name, inst.skipped)
		}
		return inst.plugin, nil
	}
	if j, ok := h.b.specIndex[name]; ok {
		if j == h.index {
			return nil, fmt.Errorf("a plugin cannot refer to itself (%q)", name)
		}
		if j > h.index {
			return nil, fmt.Errorf("plugin %q is declared later (plugins[%d]); declare it before this plugin: %w", name, j, ErrDeclaredLater)
		}
		return nil, fmt.Errorf("plugin %q (plugins[%d]) failed to load", name, j)
	}
	return nil, fmt.Errorf("no plugin named %q is declared in plugins: %w", name, ErrNotDeclared)
}

func (h *handle) NewPlugin(typ, name string, params json.RawMessage) (Plugin, error) {
	reg, ok := h.b.o.registry.Lookup(typ)
	if !ok || reg.New == nil {
		return nil, fmt.Errorf("plugin type %s is not available in this build", typ)
	}
	p, err := reg.New(name, params, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	h.b.instances = append(h.b.instances, &instance{index: -1, spec: PluginSpec{Type: typ, Name: name}, plugin: p, implicit: true, addedBy: h.label})
	return p, nil
}

func (h *handle) DefaultPlugin(typ string) (Plugin, error) {
	n := len(h.b.errs)
	p := h.b.implicit(typ)
	if p == nil {
		err := errors.Join(h.b.errs[n:]...)
		h.b.errs = h.b.errs[:n]
		return nil, err
	}
	return p, nil
}

func (h *handle) Earlier() []Plugin {
	var out []Plugin
	for _, inst := range h.b.instances {
		if inst.plugin != nil && !inst.implicit && inst.index < h.index {
			out = append(out, inst.plugin)
		}
	}
	return out
}

func (h *handle) Logger() *slog.Logger { return h.b.o.logger }

func (h *handle) FeatureEnabled(gate string) bool { return h.b.gates[gate] }

func (h *handle) Warn(msg string) { h.b.warns = append(h.b.warns, h.label+": "+msg) }

func (h *handle) Now() time.Time { return h.b.o.now() }

func (h *handle) Registerer() prometheus.Registerer {
	if h.b.o.registerer == nil {
		h.b.o.registerer = prometheus.NewRegistry()
	}
	return h.b.o.registerer
}

func (h *handle) Service(name string) (any, bool) {
	svc, ok := h.b.o.services[name]
	return svc, ok
}

// suggest proposes the registered type closest to an unknown one.
func suggest(typ string, known []string) string {
	best, bestDist := "", len(typ)/2+1
	for _, k := range known {
		if d := editDistance(typ, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
