package scheduling

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/hermod/hermod/libs/openai"

	"github.com/prometheus/client_golang/prometheus"
)

// TypedName is a plugin instance's registered type and its configured name
// (the name defaults to the type).
type TypedName struct {
	Type string
	Name string
}

func (t TypedName) String() string {
	if t.Name == "" || t.Name == t.Type {
		return t.Type
	}
	return t.Name + " (" + t.Type + ")"
}

// Named implements Plugin.TypedName for plugins that embed it.
type Named TypedName

// TypedName returns the plugin's type and name.
func (n Named) TypedName() TypedName { return TypedName(n) }

// Plugin is implemented by every plugin. A plugin serves the extension points
// whose interfaces it implements; one plugin may serve several (for example
// context-length-aware is a Filter and a Scorer, active-request-scorer is a
// Scorer, a PreRequest and a ResponseComplete hook).
type Plugin interface {
	TypedName() TypedName
}

// Factory builds a plugin instance from its configured name and raw JSON
// parameters (nil when the config gives none). Factories decode parameters
// with DecodeParameters and resolve references to earlier plugins through h.
type Factory func(name string, params json.RawMessage, h Handle) (Plugin, error)

// Handle is what a factory may use while a configuration is being built.
type Handle interface {
	// Plugin returns the plugin declared under name earlier in the plugins
	// list. The error says whether the name is declared later or not at all.
	Plugin(name string) (Plugin, error)
	// Earlier returns the active plugins declared before this one, in order.
	Earlier() []Plugin
	// NewPlugin builds an undeclared helper plugin of a registered type (a
	// profile handler's default decider, say). It shows in Describe.
	NewPlugin(typ, name string, params json.RawMessage) (Plugin, error)
	// DefaultPlugin returns the plugin of type typ that consumers use when
	// they name none (a producer upstream creates on demand): the first
	// declared earlier, else one the builder makes with default parameters
	// and shares with every plugin that asks.
	DefaultPlugin(typ string) (Plugin, error)
	// Logger is the logger plugins log through.
	Logger() *slog.Logger
	// FeatureEnabled reports whether a feature gate is on.
	FeatureEnabled(gate string) bool
	// Warn records a load-time warning (deprecated parameters, ignored
	// fields); warnings are logged and shown by `hermodctl config validate`.
	Warn(msg string)
	// Now is the clock stateful plugins use (tests replace it).
	Now() time.Time
	// Registerer is where the plugin registers its metrics, with
	// Metric (the picker's registry: they show on its /metrics).
	Registerer() prometheus.Registerer
	// Service returns the service the embedding process provides under
	// name (ServiceKey.Provide); plugins look services up typed, with ServiceKey.Lookup. A
	// plugin that needs one fails to load without it.
	Service(name string) (any, bool)
}

// Filter narrows the candidate endpoints of a profile.
type Filter interface {
	Plugin
	// Filter appends the endpoints of in that it keeps to dst (which never
	// aliases in) and returns dst.
	Filter(ctx context.Context, cs *CycleState, req *Request, in, dst []*Endpoint) []*Endpoint
}

// LoadShedder is implemented by a Filter that removes endpoints by load
// (saturation, predicted latency): when it removes the last candidates the
// request is shed (KindShed, 429). When any other filter does, no endpoint
// matched the profile (KindNoMatch, 503): that is a fault of the config or
// of the fleet, which waiting does not mend.
type LoadShedder interface {
	Filter
	// ShedsLoad marks the filter; it does nothing.
	ShedsLoad()
}

// Scorer rates the endpoints a profile's filters left. Higher is better;
// the scheduler clamps every score to [0, 1].
type Scorer interface {
	Plugin
	// Score writes the score of eps[i] into scores[i]. scores has len(eps)
	// elements, all zero on entry; an endpoint left at zero contributes 0.
	Score(ctx context.Context, cs *CycleState, req *Request, eps []*Endpoint, scores []float64)
}

// Picker chooses the targets of a profile from the scored endpoints.
type Picker interface {
	Plugin
	// Pick appends the indexes into eps of the chosen endpoints, best first,
	// to dst and returns it. totals[i] is the weighted score of eps[i].
	Pick(ctx context.Context, cs *CycleState, req *Request, eps []*Endpoint, totals []float64, dst []int) []int
}

// ProfileRunner runs scheduling profiles for a profile handler.
type ProfileRunner interface {
	// RunProfile runs the named profile (filters, scorers, picker) over the
	// cycle's candidates. A profile whose filters leave nothing returns a
	// KindNoMatch error.
	RunProfile(ctx context.Context, name string) (*ProfileResult, error)
}

// ProfileHandler orchestrates the profiles of one request: which run, in
// what order, and which result is primary (and prefill / encode).
type ProfileHandler interface {
	Plugin
	// CheckProfiles validates the handler against the configured profile
	// names when the configuration is built.
	CheckProfiles(profiles []string) error
	// Run runs profiles through r and records in res which results are the
	// primary, prefill and encode ones (and any headers it adds).
	Run(ctx context.Context, cs *CycleState, req *Request, r ProfileRunner, res *Result) error
}

// PrefillDecider decides whether a request gets a separate prefill stage.
type PrefillDecider interface {
	Plugin
	ShouldPrefill(ctx context.Context, cs *CycleState, req *Request, decode Target) bool
}

// EncodeDecider decides whether a request gets a separate encode stage.
type EncodeDecider interface {
	Plugin
	ShouldEncode(ctx context.Context, cs *CycleState, req *Request) bool
}

// PrepareData enriches a request before scheduling (tokenization, stored
// conversation lookup). Errors are logged and never fail the request.
type PrepareData interface {
	Plugin
	PrepareData(ctx context.Context, req *Request) error
}

// CyclePreparer is implemented by plugins that gather what they need from
// outside the scheduler's shared state before its critical section: the
// request's tokens, the indexer's answer, the predictor's request
// features, anything that does I/O or costs more than a microsecond.
// PrepareCycle runs once per request, concurrently with other requests'
// cycles and with no scheduler lock held, after the prepare-data plugins
// and in declaration order; what it writes to cs is read, under the lock,
// by the plugin's Score, MatchPrefix or PreRequest (and by plugins that
// read it, such as no-hit-lru-scorer reading a prefix match). candidates
// are the cycle's candidates before any filter. Failures are the plugin's
// to handle (fail open); they never fail the request.
type CyclePreparer interface {
	Plugin
	PrepareCycle(ctx context.Context, cs *CycleState, req *Request, candidates []*Endpoint)
}

// PreRequest runs once a request is scheduled, in the same critical section
// as the pick (in-flight counters, speculative index entries, headers). cs
// is the cycle's state, holding what scorers computed for the request.
type PreRequest interface {
	Plugin
	PreRequest(ctx context.Context, cs *CycleState, req *Request, res *Result)
}

// Response describes the response of a scheduled request to response hooks.
type Response struct {
	// RequestID is the request's id.
	RequestID string
	// DecisionID is the Result.DecisionID the request was routed by.
	DecisionID uint64
	// Target is the endpoint that served the request (the primary target).
	Target Target
	// Prefill is the prefill endpoint when the request was disaggregated
	// (Prefill.Endpoint is nil otherwise), picked by the profile
	// PrefillProfile names.
	Prefill        Target
	PrefillProfile string
	// StatusCode is the upstream HTTP status (0 if none arrived).
	StatusCode int
	// Time is when the request ended (ResponseComplete only; zero when
	// unknown: hooks take now).
	Time time.Time
	// Streamed is whether the response was streamed (its TTFT and TPOT
	// were measured per token).
	Streamed bool
	// Headers collects response headers hooks add for the client.
	Headers map[string]string
	// Usage is what the finished request reported (ResponseComplete only;
	// zero fields are unknown).
	Usage Usage
}

// Usage is the token counts and latencies of a finished request.
type Usage struct {
	PromptTokens     int
	CachedTokens     int
	CompletionTokens int
	// TTFT is the time to the first token, TPOT the mean time per output
	// token after it, Duration the time from the decision to the end.
	TTFT, TPOT, Duration time.Duration
}

// NewResponse returns a Response for a request scheduled with res.
func NewResponse(res *Result, status int) *Response {
	r := &Response{RequestID: res.RequestID, DecisionID: res.DecisionID, Target: res.Target(), StatusCode: status}
	if t, ok := res.Prefill.Target(); ok {
		r.Prefill, r.PrefillProfile = t, res.Prefill.Profile
	}
	return r
}

// SetHeader sets a response header for the client.
func (r *Response) SetHeader(name, value string) {
	if r.Headers == nil {
		r.Headers = make(map[string]string, 2)
	}
	r.Headers[name] = value
}

// ResponseReceived prepares what the client's response gets from a target:
// the picker is not on the response path (the gateway or Envoy is), so it
// runs at pick time for every target that may serve the request (the
// primary and each fallback), and the headers it sets are sent with the
// response of whichever target answers. resp.StatusCode is 0: no status
// is known yet.
type ResponseReceived interface {
	Plugin
	ResponseReceived(ctx context.Context, req *Request, resp *Response)
}

// ResponseComplete runs once when the request ends, however it ends, from
// the completion event (reported by a gateway, an ext_proc server or
// another picker replica): resp carries all that is known of it.
type ResponseComplete interface {
	Plugin
	ResponseComplete(ctx context.Context, resp *Response)
}

// EndpointRemover is implemented by plugins that keep per-endpoint state:
// whoever owns the endpoint set calls Scheduler.EndpointRemoved when an
// endpoint leaves the pool, so that state does not outlive it.
type EndpointRemover interface {
	Plugin
	EndpointRemoved(name string)
}

// DataSource fetches per-endpoint data (for example the served models from
// /v1/models) for the data layer; extractors turn it into endpoint fields.
type DataSource interface {
	Plugin
	Fetch(ctx context.Context, ep *Endpoint) (any, error)
}

// AttributeReporter reports attributes of a finished response to the data
// plane (Envoy dynamic metadata), computed from its usage: upstream's
// request-attribute-reporter.
type AttributeReporter interface {
	Plugin
	ResponseAttributes(u Usage) []Attribute
}

// Attribute is a number reported under a metadata namespace and name.
type Attribute struct {
	Namespace, Name string
	Value           float64
}

// RequestParser reads a request body of an API: what a config's parser
// section names (upstream's request-handling parsers).
type RequestParser interface {
	Plugin
	ParseRequest(api openai.API, body []byte) (openai.Request, error)
	// APIs are the APIs whose bodies it parses: a config that lists
	// parsers serves the APIs they claim, and refuses the others.
	APIs() []openai.API
}

// FallbackParser is a RequestParser that takes every API no other listed
// parser claims without reading its prompt (upstream's
// passthrough-parser): requests to those APIs are routed by their model
// and by load alone, every prompt-reading scorer blind to them.
type FallbackParser interface {
	RequestParser
	Fallback()
}

// EndpointDiscovery is a plugin that says where a pool's endpoints come
// from when no platform lists them (dataLayer.discovery.pluginRef), as
// upstream's file-discovery: the collector, which keeps the pool's
// endpoint registry, follows the file it names.
type EndpointDiscovery interface {
	Plugin
	// EndpointsFile is the path of the endpoints file.
	EndpointsFile() string
	// WatchFile says whether the file is read again as it changes;
	// false: it is read once, when the collector starts following it.
	WatchFile() bool
}

// EndpointSource is a data source of endpoint events (an endpoint added or
// removed) rather than of fetched data, as upstream's
// endpoint-notification-source. The scheduler delivers those events to
// its plugins itself (EndpointRemover), so an EndpointSource's extractors
// need only be declared plugins.
type EndpointSource interface {
	Plugin
	EndpointEvents()
}

// DataExtractor turns what a DataSource fetched into endpoint attributes.
type DataExtractor interface {
	Plugin
	Extract(ctx context.Context, data any, ep *Endpoint) error
}

// AttributeProducer is a data extractor that says which endpoint
// attributes (Metrics.Attributes keys) it sets.
type AttributeProducer interface {
	DataExtractor
	ProducedAttributes() []string
}

// AttributeConsumer is a plugin that reads endpoint attributes only a data
// extractor produces (upstream's required data dependencies): a config
// using it fails to load unless an AttributeProducer of each listed under
// one of its data sources produces them.
type AttributeConsumer interface {
	Plugin
	RequiredAttributes() []string
}

// Effect is the change one decision made to a stateful plugin's state: the
// endpoints whose in-flight count went up, that moved to the front of an
// LRU, or that now hold prefix blocks. Decisions carry their effects (the
// RoutingDecision event), so that every scheduler replica, and a replica
// rebuilding its state after a restart, can apply them to its own plugins.
type Effect struct {
	// Plugin is the plugin that recorded the effect; it applies only to a
	// plugin of the same name and type.
	Plugin TypedName
	// Endpoints are the names of the endpoints the effect concerns.
	Endpoints []string
	// Blocks are prefix block hashes the endpoints now hold.
	Blocks []uint64
	// Capacity is the size the plugin gives the state of an endpoint it
	// has not seen before (prefix index: blocks per endpoint); 0 if unused.
	Capacity int64
	// Values are numbers the plugin needs to apply the effect the same way
	// everywhere (predicted-latency-scorer: the request's features and its
	// predictions); their layout is the plugin's.
	Values []float64
}

// Projection is implemented by stateful plugins whose state is a projection
// of the decisions of every scheduler replica. Such a plugin changes no
// state in PreRequest: it records what the decision changes with
// Result.RecordEffect, and the scheduler applies the recorded effects right
// after the pre-request hooks, in the same critical section. Effects folded
// from other replicas' decisions go through the same ApplyEffect, so a
// replica's own decisions and everybody else's change state alike.
type Projection interface {
	Plugin
	// ApplyEffect applies an effect this plugin (here or in another
	// replica) recorded on a decision taken at the given time (zero: now).
	// Applying the effects of one decision twice must not count it twice.
	ApplyEffect(decisionID uint64, at time.Time, e *Effect)
}

// StateRetainer is implemented by stateful plugins whose state reflects the
// decisions of a bounded past (in-flight requests live at most a request
// timeout): a replica rebuilding its state replays at least that much of
// the decision stream.
type StateRetainer interface {
	Plugin
	StateRetention() time.Duration
}

// StateInheritor is implemented by stateful plugins that can take over the
// state of their predecessor when a configuration is replaced (hot reload):
// New with WithPrevious hands each one the plugin of the same name and type
// in the previous configuration.
type StateInheritor interface {
	Plugin
	// InheritState adopts prev's state (shared from then on: the previous
	// configuration may still be finishing cycles). It returns false when
	// the state cannot carry over, for example because parameters that
	// shape it changed; the plugin then starts empty.
	InheritState(prev Plugin) bool
}

// Stamp orders the effects of decisions: by decision time, then by decision
// id. Plugins that keep "most recent" state (LRUs) compare stamps rather
// than the order effects arrive in, and keep the greatest: then every
// replica holds the same state whatever order the effects reach it in, and
// an effect applied twice changes nothing.
type Stamp struct {
	// Nanos is the decision time in Unix nanoseconds.
	Nanos int64
	// ID is the decision id.
	ID uint64
}

// StampOf returns the stamp of a decision.
func StampOf(decisionID uint64, at time.Time) Stamp {
	s := Stamp{ID: decisionID}
	if !at.IsZero() {
		s.Nanos = at.UnixNano()
	}
	return s
}

// Compare returns -1, 0 or +1 as s is older than, the same as, or newer
// than o.
func (s Stamp) Compare(o Stamp) int {
	switch {
	case s.Nanos < o.Nanos:
		return -1
	case s.Nanos > o.Nanos:
		return 1
	case s.ID < o.ID:
		return -1
	case s.ID > o.ID:
		return 1
	}
	return 0
}
