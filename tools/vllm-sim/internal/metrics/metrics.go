// Package metrics exposes a simulated engine's Prometheus metrics with
// vLLM's names, types, labels and histogram buckets, so that anything that
// scrapes vLLM (Hermod's collector, dashboards, autoscalers) reads the
// simulator unchanged. Times are simulated seconds.
package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// vLLM's histogram buckets.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	// request_latency_buckets: e2e, queue, inference, prefill and decode times.
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}
)

// Buckets125 returns vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50,
// ... up to and including the last value not above max.
func Buckets125(maxValue int) []float64 {
	var out []float64
	for exp := 1; ; exp *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * exp
			if v > maxValue {
				return out
			}
			out = append(out, float64(v))
		}
	}
}

// Options describe the engine the metrics belong to.
type Options struct {
	// Model is the served model name (label model_name).
	Model string
	// Engine is the engine index (label engine), "0" for a single engine.
	Engine string
	// Config is the engine configuration (cache_config_info, buckets).
	Config engine.Config
	// Snapshot reads the engine state for the gauges.
	Snapshot func() engine.Snapshot
	// Legacy also exports vllm:gpu_cache_usage_perc (vLLM before 0.10).
	Legacy bool
	// Now is the wall clock of lora_requests_info (time.Now when nil).
	Now func() time.Time
}

// Metrics is an engine.Observer that records into a Prometheus registry.
type Metrics struct {
	reg *prometheus.Registry

	ttft, itl, tpot, iterationTokens            prometheus.Observer
	queries, hits, promptTokens, genTokens, pre prometheus.Counter
	success                                     *prometheus.CounterVec
	// finished are the histograms of the requests that end well.
	finished []finishedHist
}

// finishedHist is a histogram of a figure of the requests that end well.
// A sampling one describes sampling parameters, which pooling requests
// have none of: they are not observed for them. A perRequest one is
// observed once per request, for the last of its n sequences to finish
// (vLLM observes every other figure per sequence, each a child request).
type finishedHist struct {
	h          prometheus.Observer
	value      func(engine.RequestStats) float64
	sampling   bool
	perRequest bool
}

var _ engine.Observer = (*Metrics)(nil)

// processTTL is how long the process metrics are served from the last
// collection.
const processTTL = time.Second

// New creates an engine's metrics in a registry of their own (one /metrics
// endpoint per simulated pod), with the Go runtime and process collectors
// a Python vLLM process would not have left out.
func New(o Options) *Metrics {
	if o.Engine == "" {
		o.Engine = "0"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(newCachedCollector(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), processTTL, o.Now))
	labels := prometheus.Labels{"model_name": o.Model, "engine": o.Engine}

	gauge := func(name, help string, f func(engine.Snapshot) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(o.Snapshot()) }))
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(s engine.Snapshot) float64 { return float64(s.Running) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(s engine.Snapshot) float64 { return float64(s.Waiting) })
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(s engine.Snapshot) float64 { return s.KVCacheUsage })
	if o.Legacy {
		gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", func(s engine.Snapshot) float64 { return s.KVCacheUsage })
	}

	cfg := o.Config
	cacheInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info",
		Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			"engine":                   o.Engine,
			"block_size":               strconv.Itoa(cfg.BlockSize),
			"num_gpu_blocks":           strconv.Itoa(cfg.NumGPUBlocks),
			"num_gpu_blocks_override":  strconv.Itoa(cfg.NumGPUBlocks),
			"num_cpu_blocks":           "0",
			"cache_dtype":              "auto",
			"enable_prefix_caching":    "True",
			"prefix_caching_hash_algo": "sha256_cbor",
			"gpu_memory_utilization":   "0.9",
			"swap_space":               "4",
		},
	})
	cacheInfo.Set(1)
	m.reg.MustRegister(cacheInfo)
	if len(cfg.Adapters) > 0 {
		m.reg.MustRegister(&loraInfo{maxLoRAs: cfg.MaxLoRAs, snapshot: o.Snapshot, now: o.Now})
	}

	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		m.reg.MustRegister(c)
		return c
	}
	m.queries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.hits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.pre = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	m.reg.MustRegister(m.success)
	for _, r := range []string{engine.FinishStop, engine.FinishLength, engine.FinishAbort, engine.FinishError} {
		m.success.WithLabelValues(r) // present from the start, as in vLLM
	}

	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		m.reg.MustRegister(h)
		return h
	}
	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tpotBuckets)
	m.tpot = hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds (alias of inter_token_latency).", tpotBuckets)
	m.iterationTokens = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationTokenBuckets)
	lenBuckets := Buckets125(cfg.MaxModelLen)
	for _, f := range []struct {
		name, help           string
		buckets              []float64
		value                func(engine.RequestStats) float64
		sampling, perRequest bool
	}{
		{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets, func(s engine.RequestStats) float64 { return s.E2E.Seconds() }, false, false},
		{"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets, func(s engine.RequestStats) float64 { return s.Queue.Seconds() }, false, false},
		{"vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets, func(s engine.RequestStats) float64 { return s.Inference.Seconds() }, false, false},
		{"vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets, func(s engine.RequestStats) float64 { return s.Prefill.Seconds() }, false, false},
		{"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets, func(s engine.RequestStats) float64 { return s.Decode.Seconds() }, false, false},
		{"vllm:request_prompt_tokens", "Number of prefill tokens processed.", lenBuckets, func(s engine.RequestStats) float64 { return float64(s.PromptTokens) }, false, false},
		{"vllm:request_generation_tokens", "Number of generation tokens processed.", lenBuckets, func(s engine.RequestStats) float64 { return float64(s.GenerationTokens) }, false, false},
		{"vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", lenBuckets, func(s engine.RequestStats) float64 { return float64(s.MaxGenerationTokens) }, true, true},
		{"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", lenBuckets, func(s engine.RequestStats) float64 { return float64(s.MaxTokens) }, true, false},
		{"vllm:request_params_n", "Histogram of the n request parameter.", paramsNBuckets, func(s engine.RequestStats) float64 { return float64(s.N) }, true, true},
	} {
		m.finished = append(m.finished, finishedHist{hist(f.name, f.help, f.buckets), f.value, f.sampling, f.perRequest})
	}
	return m
}

// Registry is the registry to serve.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Step implements engine.Observer.
func (m *Metrics) Step(tokens int) { m.iterationTokens.Observe(float64(tokens)) }

// PrefixCache implements engine.Observer.
func (m *Metrics) PrefixCache(queries, hits int) {
	m.queries.Add(float64(queries))
	m.hits.Add(float64(hits))
}

// FirstToken implements engine.Observer.
func (m *Metrics) FirstToken(ttft time.Duration, promptTokens int) {
	m.ttft.Observe(ttft.Seconds())
	m.promptTokens.Add(float64(promptTokens))
	m.genTokens.Inc()
}

// Pooled implements engine.Observer: a pooling request's prompt tokens, and
// its time to the pooled output as its TTFT (vLLM counts its first output
// so); it generates no token.
func (m *Metrics) Pooled(ttft time.Duration, promptTokens int) {
	m.ttft.Observe(ttft.Seconds())
	m.promptTokens.Add(float64(promptTokens))
}

// Token implements engine.Observer.
func (m *Metrics) Token(gap time.Duration) {
	m.itl.Observe(gap.Seconds())
	m.tpot.Observe(gap.Seconds())
	m.genTokens.Inc()
}

// Preempted implements engine.Observer.
func (m *Metrics) Preempted() { m.pre.Inc() }

// Finished implements engine.Observer.
func (m *Metrics) Finished(s engine.RequestStats) {
	m.success.WithLabelValues(s.FinishReason).Inc()
	if s.FinishReason == engine.FinishAbort || s.FinishReason == engine.FinishError {
		return
	}
	for _, f := range m.finished {
		if (!f.sampling || !s.Pooling) && (!f.perRequest || s.N > 0) {
			f.h.Observe(f.value(s))
		}
	}
}

// loraInfo exports vllm:lora_requests_info: one series whose labels are the
// current adapter sets and whose value is the time they were read (newest
// series wins), without model_name or engine labels, as vLLM does.
type loraInfo struct {
	maxLoRAs int
	snapshot func() engine.Snapshot
	now      func() time.Time
}

var loraDesc = prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
	[]string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"}, nil)

func (l *loraInfo) Describe(ch chan<- *prometheus.Desc) { ch <- loraDesc }

func (l *loraInfo) Collect(ch chan<- prometheus.Metric) {
	s := l.snapshot()
	ch <- prometheus.MustNewConstMetric(loraDesc, prometheus.GaugeValue, float64(l.now().UnixNano())/1e9,
		strconv.Itoa(l.maxLoRAs), strings.Join(s.WaitingAdapters, ","), strings.Join(s.RunningAdapters, ","))
}
