// Package server serves one simulated vLLM pod: the OpenAI API,
// Anthropic's Messages API and vLLM's token-in, token-out generate API (a
// generating model), or vLLM's embeddings, pooling, score and rerank APIs
// (a pooling model), /metrics, /tokenize, /detokenize, /v1/models and
// /health on its HTTP port, and the KV-cache events of its engine over
// ZeroMQ.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
	"github.com/hermod/hermod/tools/vllm-sim/internal/metrics"
	"github.com/hermod/hermod/tools/vllm-sim/internal/vocab"
)

// KVEventsConfig is vLLM's --kv-events-config.
type KVEventsConfig struct {
	Enabled        bool   `json:"enable_kv_cache_events"`
	Publisher      string `json:"publisher"`
	Endpoint       string `json:"endpoint"`
	ReplayEndpoint string `json:"replay_endpoint"`
	BufferSteps    int    `json:"buffer_steps"`
	HWM            int    `json:"hwm"`
	MaxQueueSize   int    `json:"max_queue_size"`
	Topic          string `json:"topic"`
}

// Config configures one pod.
type Config struct {
	// Name identifies the pod (endpoint name, KV event topic).
	Name string
	// Host and Port are where the HTTP server listens.
	Host string
	Port int
	// ModelPath is --model; ServedNames are --served-model-name (the first
	// is the name metrics and responses carry).
	ModelPath   string
	ServedNames []string
	// Adapters maps LoRA adapter names to their paths (--lora-modules).
	Adapters map[string]string
	Engine   engine.Config
	// Speed runs simulated time this many times faster than real time.
	Speed float64
	// Seed seeds generated text (with each request's prompt or seed).
	Seed uint64
	// KVEvents configures KV event publishing (endpoints already resolved
	// for this pod).
	KVEvents KVEventsConfig
	// EventEncoding is the msgpack layout of published events.
	EventEncoding events.Encoding
	// ReplayFraming is the replay socket's framing.
	ReplayFraming kvzmq.ReplayFraming
	// PromptTokensDetails reports usage.prompt_tokens_details.cached_tokens
	// (vLLM's --enable-prompt-tokens-details).
	PromptTokensDetails bool
	// LegacyMetrics also exports vllm:gpu_cache_usage_perc.
	LegacyMetrics bool
	// Faults are the initial failure-injection settings.
	Faults Faults
	// Runner is vLLM's --runner: RunnerGenerate (the default, "") serves
	// the generating APIs, RunnerPooling an embedding model's pooling APIs;
	// each refuses the other's.
	Runner Runner
	// EmbeddingDim is the size of a pooling model's embeddings
	// (DefaultEmbeddingDim when 0).
	EmbeddingDim int
	// AutoToolChoice is vLLM's --enable-auto-tool-choice: with it, a chat
	// or Messages request with tools and tool_choice "auto" (or none) may
	// get a tool call, written in ToolCallParser's format (vLLM's
	// --tool-call-parser: llama3_json and llama4_json write Llama 3.1's
	// JSON, the others Hermes' <tool_call> tags); without it such a
	// request is refused, as vLLM refuses it.
	AutoToolChoice bool
	ToolCallParser string
	// MaxLogprobs is vLLM's --max-logprobs: the most logprobs a request may
	// ask for per token (-1: the vocabulary's size; 0: vLLM's default,
	// DefaultMaxLogprobs).
	MaxLogprobs int
	// APIKey, when set, is required as "Authorization: Bearer <key>" or
	// "x-api-key: <key>" on the /v1 endpoints (vLLM's --api-key).
	APIKey string
	// OnDown and OnUp are called when a simulated crash takes the pod down
	// and when it is back (registration in a service registry follows them).
	OnDown, OnUp func()
	Logger       *slog.Logger
}

// Pod is one simulated vLLM server.
type Pod struct {
	cfg     Config
	clock   *engine.WallClock
	engine  *engine.Engine
	metrics *metrics.Metrics
	tok     tokenizer.Builtin
	tmpl    tokenizer.Llama3Template
	log     *slog.Logger
	faults  atomic.Pointer[Faults]
	reqSeq  atomic.Uint64
	started time.Time

	pubMu   sync.Mutex
	pub     *kvzmq.Publisher
	encoder events.Encoder
	payload []byte

	srvMu  sync.Mutex
	srv    *http.Server
	down   bool // between a crash and the restart
	runCtx context.Context
	ready  chan struct{}
	once   sync.Once
}

// Ready is closed once the pod first listens.
func (p *Pod) Ready() <-chan struct{} { return p.ready }

// runContext is the context Run was called with (a crash's restart ends
// with it).
func (p *Pod) runContext() context.Context {
	p.srvMu.Lock()
	defer p.srvMu.Unlock()
	if p.runCtx == nil {
		return context.Background()
	}
	return p.runCtx
}

// New builds a pod; Run serves it.
func New(cfg Config, clock *engine.WallClock) (*Pod, error) {
	if len(cfg.ServedNames) == 0 {
		cfg.ServedNames = []string{cfg.ModelPath}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Engine.Model = cfg.ServedNames[0]
	switch cfg.Runner {
	case "":
		cfg.Runner = RunnerGenerate
	case RunnerGenerate, RunnerPooling:
	default:
		return nil, fmt.Errorf("pod %s: runner %q: must be %q or %q", cfg.Name, cfg.Runner, RunnerGenerate, RunnerPooling)
	}
	if cfg.MaxLogprobs == 0 {
		cfg.MaxLogprobs = DefaultMaxLogprobs
	}
	if cfg.EmbeddingDim == 0 {
		cfg.EmbeddingDim = DefaultEmbeddingDim
	}
	if cfg.EmbeddingDim < 1 || cfg.EmbeddingDim > MaxEmbeddingDim {
		return nil, fmt.Errorf("pod %s: embedding dimension %d: must be between 1 and %d", cfg.Name, cfg.EmbeddingDim, MaxEmbeddingDim)
	}
	learnOwnWords.Do(learnWords)
	p := &Pod{cfg: cfg, clock: clock, log: cfg.Logger.With("pod", cfg.Name), started: time.Now(), ready: make(chan struct{})}
	f := cfg.Faults
	p.faults.Store(&f)
	var err error
	p.metrics = metrics.New(metrics.Options{Model: cfg.ServedNames[0], Config: cfg.Engine, Snapshot: func() engine.Snapshot { return p.engine.Snapshot() }, Legacy: cfg.LegacyMetrics})
	p.engine, err = engine.New(cfg.Engine, clock, p.metrics, p.publish)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", cfg.Name, err)
	}
	if err := p.openPublisher(); err != nil {
		return nil, err
	}
	return p, nil
}

// builtinVocab maps the built-in tokenizer's ids back to text for
// /detokenize. The tokenizer is the same in every pod, so one table, which
// every pod's tokenizing teaches, serves the process.
var builtinVocab vocab.Table

// learnOwnWords teaches builtinVocab, once, the text the pods make up: the
// words they generate and the chat template's special tokens.
var learnOwnWords sync.Once

func learnWords() {
	var tok tokenizer.Builtin
	learn := func(text string) { builtinVocab.Learn(text, tok.Encode(nil, text)) }
	for _, w := range engine.OutputWords() {
		learn(w)
		learn(" " + w)
	}
	learn(tokenizer.Llama3Template{}.Apply([]tokenizer.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}, true))
}

// Engine returns the pod's engine.
func (p *Pod) Engine() *engine.Engine { return p.engine }

// Config returns the pod's configuration.
func (p *Pod) Config() Config { return p.cfg }

// Run runs the engine and serves HTTP on the pod's port until ctx ends.
// Ready is closed once the pod listens.
func (p *Pod) Run(ctx context.Context) error {
	p.srvMu.Lock()
	p.runCtx = ctx
	p.srvMu.Unlock()
	errs := make(chan error, 2)
	go func() { errs <- p.engine.Run(ctx) }()
	err := p.listen(ctx)
	if err == nil {
		<-ctx.Done()
	}
	p.srvMu.Lock()
	srv := p.srv
	p.srv = nil
	p.srvMu.Unlock()
	if srv != nil {
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err = srv.Shutdown(shutdown); err != nil {
			_ = srv.Close() // connections that did not finish in time
		}
		cancel()
	}
	if runErr := <-errs; runErr != nil && err == nil {
		err = runErr
	}
	p.pubMu.Lock()
	if p.pub != nil {
		_ = p.pub.Close()
		p.pub = nil
	}
	p.pubMu.Unlock()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("pod %s: %w", p.cfg.Name, err)
	}
	return nil
}

// Addr is the pod's HTTP address.
func (p *Pod) Addr() string { return net.JoinHostPort(p.cfg.Host, fmt.Sprint(p.cfg.Port)) }

func (p *Pod) listen(run context.Context) error {
	var ln net.Listener
	var err error
	for attempt := range 50 { // a port just closed may take a moment to free
		if ln, err = net.Listen("tcp", p.Addr()); err == nil || p.cfg.Port == 0 {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("pod %s: listen: %w", p.cfg.Name, err)
	}
	if p.cfg.Port == 0 { // keep the port the system picked, for restarts
		p.cfg.Port = ln.Addr().(*net.TCPAddr).Port
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	p.srvMu.Lock()
	if run.Err() != nil { // the pod stopped meanwhile: do not come back up
		p.srvMu.Unlock()
		_ = ln.Close()
		return run.Err()
	}
	p.srv = srv
	p.srvMu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("HTTP server stopped", "error", err)
		}
	}()
	p.once.Do(func() { close(p.ready) })
	return nil
}

// Crash simulates an engine crash: connections are dropped, in-flight
// requests fail, the KV cache is lost. After down (simulated time) the pod
// comes back with an empty cache and its KV event sequence restarted at 0,
// announcing AllBlocksCleared first. (The ZeroMQ sockets stay bound: libzmq
// releases ports asynchronously, so rebinding them at once could fail.) It
// returns once the pod is back, or when ctx or the pod's run ends.
func (p *Pod) Crash(ctx context.Context, down time.Duration) error {
	p.srvMu.Lock()
	srv := p.srv
	p.srv, p.down = nil, true
	p.srvMu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	p.engine.Restart()
	if p.cfg.OnDown != nil {
		p.cfg.OnDown()
	}
	timer := time.NewTimer(p.clock.Wall(down))
	defer timer.Stop()
	run := p.runContext()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-run.Done():
		return run.Err()
	}
	p.pubMu.Lock()
	if p.pub != nil {
		p.pub.Reset()
	}
	p.pubMu.Unlock()
	p.srvMu.Lock()
	p.down = false
	p.srvMu.Unlock()
	p.publish([]events.Event{{Kind: events.KindAllBlocksCleared}}, 0)
	if err := p.listen(run); err != nil {
		return err
	}
	if p.cfg.OnUp != nil {
		p.cfg.OnUp()
	}
	return nil
}

// specificHost returns host unless it is a wildcard (all interfaces),
// for which it returns "".
func specificHost(host string) string {
	switch host {
	case "", "*", "0.0.0.0", "::":
		return ""
	}
	return host
}

// openPublisher opens the KV event publisher.
func (p *Pod) openPublisher() error {
	kc := p.cfg.KVEvents
	if !kc.Enabled {
		return nil
	}
	pub, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{
		Endpoint: kc.Endpoint, ReplayEndpoint: kc.ReplayEndpoint, Topic: kc.Topic,
		HWM: kc.HWM, BufferSteps: kc.BufferSteps, Framing: p.cfg.ReplayFraming,
		// a wildcard endpoint binds where the pod serves: --host 127.0.0.1
		// keeps the event sockets on loopback too
		BindHost: specificHost(p.cfg.Host),
	})
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.cfg.Name, err)
	}
	p.pubMu.Lock()
	p.pub = pub
	p.pubMu.Unlock()
	return nil
}

// publish is the engine's event sink: one batch per step. Nothing is
// published while the pod is down.
func (p *Pod) publish(evs []events.Event, _ time.Duration) {
	p.srvMu.Lock()
	down := p.down
	p.srvMu.Unlock()
	if down {
		return
	}
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	if p.pub == nil {
		return
	}
	batch := events.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: evs, DataParallelRank: 0, HasDataParallelRank: true}
	var err error
	p.payload, err = p.encoder.AppendBatch(p.payload[:0], &batch, p.cfg.EventEncoding)
	if err == nil {
		_, err = p.pub.Publish(p.payload)
	}
	if err != nil {
		p.log.Warn("publishing KV events failed", "error", err)
	}
}

// Close releases a pod that was built but never run (Run releases its own
// resources when it returns).
func (p *Pod) Close() error {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	if p.pub == nil {
		return nil
	}
	err := p.pub.Close()
	p.pub = nil
	return err
}
