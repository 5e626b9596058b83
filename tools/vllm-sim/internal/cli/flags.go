// Package cli parses vllm-sim's command line: vLLM's own flags where vLLM
// has them (so `vllm serve` and `vllm-sim serve` take the same arguments),
// and simulator-only flags, which may also be set as HERMOD_<FLAG>
// environment variables.
package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
	"github.com/hermod/hermod/tools/vllm-sim/internal/server"
)

// Options is the parsed command line.
type Options struct {
	Model         string
	ServedNames   []string
	Host          string
	Port          int
	Engine        engine.Config
	EnableLoRA    bool
	LoRAModules   map[string]string
	LoRAOrder     []string
	KVEvents      server.KVEventsConfig
	DetailsTokens bool
	Seed          uint64
	APIKey        string
	// AutoToolChoice and ToolCallParser are --enable-auto-tool-choice and
	// --tool-call-parser; MaxLogprobs is --max-logprobs.
	AutoToolChoice bool
	ToolCallParser string
	MaxLogprobs    int
	// Runner is --runner (auto is RunnerGenerate); EmbeddingDim the size
	// of a pooling model's embeddings.
	Runner        server.Runner
	EmbeddingDim  int
	Speed         float64
	Pods          int
	PodName       string
	FirstPodIndex int
	PodSpeeds     []float64
	EventEncoding events.Encoding
	ReplayFraming kvzmq.ReplayFraming
	Faults        server.Faults
	LegacyMetrics bool
	EtcdEndpoints []string
	Etcd          bootstrap.EtcdSecurity
	Pool          string
	RegisterTTL   time.Duration
	Advertise     string
	// NodeAddress is the address of the node the fleet's pods run on:
	// registered as theirs (empty: Advertise), and where the DCGM page
	// listens.
	NodeAddress string
	// DCGMPort, when set, serves a DCGM exporter's page for the fleet's
	// pods (a node's DaemonSet exporter) on NodeAddress:DCGMPort.
	DCGMPort       int
	Labels         map[string]string
	PodLabels      map[int]map[string]string
	Verbosity      int
	LogFormat      string
	IgnoredFlags   []string
	kvEventsConfig string
}

// multiValue flags take several following arguments (argparse nargs='+').
var multiValue = map[string]bool{"served-model-name": true, "lora-modules": true}

// ignoredValue and ignoredBool are vLLM flags that change nothing the
// simulator models; they are accepted so real command lines run unchanged.
var ignoredValue = []string{
	"tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "gpu-memory-utilization", "dtype",
	"max-lora-rank", "max-cpu-loras", "swap-space", "tokenizer", "download-dir", "load-format", "quantization",
	"kv-cache-dtype", "generation-config", "uvicorn-log-level", "prefix-caching-hash-algo", "tokenizer-mode",
	"revision", "chat-template", "distributed-executor-backend", "cpu-offload-gb", "disable-log-stats-interval",
}

var ignoredBool = []string{
	"trust-remote-code", "enable-prefix-caching", "no-enable-prefix-caching", "enable-chunked-prefill",
	"no-enable-chunked-prefill", "disable-log-requests", "disable-log-stats", "enforce-eager",
	"disable-frontend-multiprocessing",
}

// Parse parses args (without the program name). A leading "serve MODEL"
// is accepted as vLLM's CLI has it.
func Parse(args []string, stderr io.Writer) (*Options, error) {
	o := &Options{Engine: engine.DefaultConfig(""), LoRAModules: map[string]string{}, PodLabels: map[int]map[string]string{}}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			o.Model = args[0]
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("vllm-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	simOnly := o.define(fs)
	args, err := expandMultiValue(args)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	// Simulator-only flags may come from HERMOD_<FLAG>; the command line wins.
	if err := cmdline.ApplyEnv(fs, func(name string) bool { return simOnly[name] }); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(f *flag.Flag) {
		for _, n := range append(append([]string{}, ignoredValue...), ignoredBool...) {
			if f.Name == n {
				o.IgnoredFlags = append(o.IgnoredFlags, "--"+n)
			}
		}
	})
	return o, o.finish()
}

// define declares the flags and returns the names of the simulator-only
// ones (vLLM does not have them; HERMOD_<NAME> sets them too).
func (o *Options) define(fs *flag.FlagSet) map[string]bool {
	simOnly := map[string]bool{}
	e := &o.Engine
	if o.Model == "" {
		o.Model = "meta-llama/Llama-3.1-8B-Instruct"
	}
	// vLLM's flags
	fs.StringVar(&o.Model, "model", o.Model, "model name or path (also the positional argument of serve)")
	fs.Var(stringList{&o.ServedNames}, "served-model-name", "names the API serves the model under (several allowed); default: --model")
	fs.StringVar(&o.Host, "host", "0.0.0.0", "address to listen on")
	fs.IntVar(&o.Port, "port", 8000, "HTTP port (pod i of --pods listens on port+i)")
	fs.IntVar(&e.BlockSize, "block-size", e.BlockSize, "tokens per KV-cache block")
	fs.IntVar(&e.NumGPUBlocks, "num-gpu-blocks-override", e.NumGPUBlocks, "KV-cache blocks per pod")
	fs.IntVar(&e.MaxNumSeqs, "max-num-seqs", e.MaxNumSeqs, "sequences per step")
	fs.IntVar(&e.MaxNumBatchedTokens, "max-num-batched-tokens", e.MaxNumBatchedTokens, "tokens per step (chunked prefill)")
	fs.IntVar(&e.MaxModelLen, "max-model-len", e.MaxModelLen, "prompt plus output tokens")
	fs.BoolVar(&o.EnableLoRA, "enable-lora", false, "serve LoRA adapters")
	fs.Var(loraList{o}, "lora-modules", "LoRA adapters: name=path, or JSON {\"name\":...,\"path\":...} (several allowed)")
	fs.IntVar(&e.MaxLoRAs, "max-loras", e.MaxLoRAs, "LoRA adapters loaded at once")
	fs.StringVar(&o.kvEventsConfig, "kv-events-config", "", `KV events, vLLM's JSON: {"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv@{pod}@{model}","buffer_steps":10000,"hwm":100000}; pod i adds i to both ports; {pod}, {model} and {index} in the topic are replaced`)
	fs.BoolVar(&o.DetailsTokens, "enable-prompt-tokens-details", true, "report usage.prompt_tokens_details.cached_tokens (on by default in the simulator)")
	fs.Func("seed", "seed of generated text (default 0)", func(v string) error {
		x, err := strconv.ParseUint(v, 10, 64)
		o.Seed = x
		return err
	})
	fs.StringVar(&o.APIKey, "api-key", "", "require this key on /v1 endpoints, as Authorization: Bearer <key> or x-api-key: <key>")
	fs.BoolVar(&o.AutoToolChoice, "enable-auto-tool-choice", false, `let tool_choice "auto" call tools (needs --tool-call-parser): a call when the last user message names a tool`)
	fs.StringVar(&o.ToolCallParser, "tool-call-parser", "", "format of \"auto\" tool calls: llama3_json or llama4_json (Llama 3.1's JSON), any other name Hermes' <tool_call> tags")
	fs.IntVar(&o.MaxLogprobs, "max-logprobs", server.DefaultMaxLogprobs, "most logprobs a request may ask for per token (-1: the vocabulary)")
	o.Runner = server.RunnerGenerate
	fs.Func("runner", "what the model does: generate (completions, chat, Messages, generate) or pooling (embeddings, pooling, score, rerank); auto (the default) is generate", func(v string) error {
		switch v {
		case "auto", "generate":
			o.Runner = server.RunnerGenerate
		case "pooling":
			o.Runner = server.RunnerPooling
		default:
			return errors.New("must be auto, generate or pooling")
		}
		return nil
	})
	for _, n := range ignoredValue {
		fs.String(n, "", "accepted for vLLM compatibility; no effect")
	}
	for _, n := range ignoredBool {
		fs.Bool(n, false, "accepted for vLLM compatibility; no effect")
	}
	fs.Func("tp", "alias of --tensor-parallel-size (no effect)", func(string) error { return nil })
	o.defineSimulator(fs, func(name string) string { simOnly[name] = true; return name })
	o.defineFaultsAndRegistry(fs, func(name string) string { simOnly[name] = true; return name })
	return simOnly
}

// defineSimulator declares the simulator's own flags (sim names each one).
func (o *Options) defineSimulator(fs *flag.FlagSet, sim func(string) string) {
	e := &o.Engine
	fs.Float64Var(&o.Speed, sim("speed"), 1, "simulated time runs this many times faster than real time")
	fs.IntVar(&o.Pods, sim("pods"), 1, "pods to run in this process, on consecutive HTTP and ZMQ ports")
	fs.StringVar(&o.PodName, sim("pod-name"), "vllm-sim", "pod names are <pod-name>-<index>")
	fs.IntVar(&o.FirstPodIndex, sim("first-pod-index"), 0, "index of this process's first pod in its name (several processes serving one pool)")
	fs.Func(sim("pod-speed"), "speed factor per pod, one value for all or a comma list (0.5 = half speed)", func(v string) error {
		o.PodSpeeds = nil
		for _, f := range strings.Split(v, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || x <= 0 {
				return fmt.Errorf("%q is not a positive number", f)
			}
			o.PodSpeeds = append(o.PodSpeeds, x)
		}
		return nil
	})
	fs.DurationVar(&e.Cost.StepOverhead, sim("step-overhead"), e.Cost.StepOverhead, "cost model: fixed time per engine step")
	fs.DurationVar(&e.Cost.PrefillPerToken, sim("prefill-per-token"), e.Cost.PrefillPerToken, "cost model: time per prefilled prompt token")
	fs.DurationVar(&e.Cost.DecodePerSeq, sim("decode-per-seq"), e.Cost.DecodePerSeq, "cost model: time per decoding sequence")
	fs.DurationVar(&e.Cost.AttentionPerKVToken, sim("attention-per-kv-token"), e.Cost.AttentionPerKVToken, "cost model: time per context token attended")
	fs.DurationVar(&e.Cost.LoRALoad, sim("lora-load-time"), e.Cost.LoRALoad, "cost model: time to load a LoRA adapter")
	fs.IntVar(&o.EmbeddingDim, sim("embedding-dim"), server.DefaultEmbeddingDim, "size of a pooling model's embeddings (--runner pooling)")
	fs.IntVar(&e.DefaultChatOutput, sim("default-chat-output"), e.DefaultChatOutput, "chat requests without max_tokens stop after 1..this tokens")
	fs.StringVar(&e.HashSeed, sim("hash-seed"), e.HashSeed, "PYTHONHASHSEED of the prefix-cache block hashes (sha256_cbor)")
	fs.Func(sim("kv-events-encoding"), "msgpack layout of KV events: array (vLLM < 0.26) or map",
		either(&o.EventEncoding, "array", events.EncodingArray, "map", events.EncodingMap))
	fs.Func(sim("kv-events-replay-framing"), "replay framing: topic (newer vLLM) or legacy",
		either(&o.ReplayFraming, "topic", kvzmq.FramingTopic, "legacy", kvzmq.FramingLegacy))
}

// either returns the Set of a flag that is one of two names: name a sets
// *dst to va, name b to vb.
func either[T any](dst *T, a string, va T, b string, vb T) func(string) error {
	return func(v string) error {
		switch v {
		case a:
			*dst = va
		case b:
			*dst = vb
		default:
			return errors.New("must be " + a + " or " + b)
		}
		return nil
	}
}

// defineFaultsAndRegistry declares the fault injection, registration and
// logging flags (sim names each one).
func (o *Options) defineFaultsAndRegistry(fs *flag.FlagSet, sim func(string) string) {
	rate := func(code string) {
		fs.Func(sim("failure-rate-"+code), "fraction of requests answered "+code+" at once", func(v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return err
			}
			if o.Faults.ErrorRates == nil {
				o.Faults.ErrorRates = map[string]float64{}
			}
			o.Faults.ErrorRates[code] = x
			return nil
		})
	}
	rate("429")
	rate("500")
	rate("503")
	fs.Func(sim("extra-latency"), "delay before a request reaches the engine (simulated time)", func(v string) error {
		d, err := time.ParseDuration(v)
		o.Faults.ExtraLatency = scheduling.Duration(d)
		return err
	})
	fs.BoolVar(&o.LegacyMetrics, sim("legacy-metrics"), false, "also export vllm:gpu_cache_usage_perc")
	fs.Func(sim("etcd-endpoints"), "register each pod in etcd (comma list of endpoints)", func(v string) error {
		o.EtcdEndpoints = splitList(v)
		return nil
	})
	o.Etcd.RegisterFlags(fs)
	for _, name := range bootstrap.EtcdSecurityFlags {
		sim(name)
	}
	fs.StringVar(&o.Pool, sim("pool"), "default", "pool the pods register in")
	fs.DurationVar(&o.RegisterTTL, sim("registration-ttl"), 10*time.Second, "lease TTL of each pod's registration")
	fs.StringVar(&o.Advertise, sim("advertise-address"), "127.0.0.1", "address registered for the pods")
	fs.StringVar(&o.NodeAddress, sim("node-address"), "", "address of the pods' node, registered as theirs and where the DCGM page listens (default: --advertise-address)")
	fs.IntVar(&o.DCGMPort, sim("dcgm-port"), 0, "serve a DCGM exporter DaemonSet's page (DCGM_FI_DEV_GPU_UTIL per pod, from its load or the gpu_utilization fault) on the node address at this port; 0: none")
	fs.Func(sim("labels"), "labels of every pod: k=v,k=v", func(v string) error {
		m, err := parseLabels(v)
		o.Labels = m
		return err
	})
	fs.Func(sim("pod-labels"), "labels of one pod: INDEX:k=v,k=v (repeat for several pods)", func(v string) error {
		idx, rest, ok := strings.Cut(v, ":")
		i, err := strconv.Atoi(idx)
		if !ok || err != nil || i < 0 {
			return errors.New("must be INDEX:k=v[,k=v]")
		}
		m, err := parseLabels(rest)
		o.PodLabels[i] = m
		return err
	})
	fs.IntVar(&o.Verbosity, sim("v"), 0, "log verbosity 0..5")
	fs.StringVar(&o.LogFormat, sim("log-format"), "text", "log format: text or json")
}

func (o *Options) finish() error {
	var errs []error
	if o.Model == "" {
		errs = append(errs, errors.New("--model: required"))
	}
	if len(o.ServedNames) == 0 {
		o.ServedNames = []string{o.Model}
	}
	if o.AutoToolChoice && o.ToolCallParser == "" {
		errs = append(errs, errors.New("--enable-auto-tool-choice requires --tool-call-parser"))
	}
	if o.MaxLogprobs == 0 || o.MaxLogprobs < -1 {
		errs = append(errs, fmt.Errorf("--max-logprobs: must be positive or -1 (got %d)", o.MaxLogprobs))
	}
	if len(o.LoRAModules) > 0 && !o.EnableLoRA {
		errs = append(errs, errors.New("--lora-modules: needs --enable-lora"))
	}
	o.Engine.Adapters = o.LoRAOrder
	o.Engine.Model = o.ServedNames[0]
	if o.Speed <= 0 {
		errs = append(errs, fmt.Errorf("--speed: must be positive (got %v)", o.Speed))
	}
	if o.FirstPodIndex < 0 {
		errs = append(errs, fmt.Errorf("--first-pod-index: must not be negative (got %d)", o.FirstPodIndex))
	}
	if o.EmbeddingDim < 1 || o.EmbeddingDim > server.MaxEmbeddingDim {
		errs = append(errs, fmt.Errorf("--embedding-dim: must be between 1 and %d (got %d)", server.MaxEmbeddingDim, o.EmbeddingDim))
	}
	if o.Pods < 1 {
		errs = append(errs, fmt.Errorf("--pods: must be at least 1 (got %d)", o.Pods))
	}
	if n := len(o.PodSpeeds); n > 1 && n != o.Pods {
		errs = append(errs, fmt.Errorf("--pod-speed: %d values for %d pods", n, o.Pods))
	}
	for i := range o.PodLabels {
		if i >= o.Pods {
			errs = append(errs, fmt.Errorf("--pod-labels: pod %d does not exist (--pods %d)", i, o.Pods))
		}
	}
	if err := o.Faults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("failure injection: %w", err))
	}
	if err := o.Engine.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.kvEventsConfig != "" {
		kc := server.KVEventsConfig{Endpoint: "tcp://*:5557", BufferSteps: kvzmq.DefaultBufferSteps, HWM: kvzmq.DefaultHWM}
		dec := json.NewDecoder(strings.NewReader(o.kvEventsConfig))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&kc); err != nil {
			errs = append(errs, fmt.Errorf("--kv-events-config: %w", err))
		} else if kc.Enabled && kc.Publisher != "" && kc.Publisher != "zmq" {
			errs = append(errs, fmt.Errorf("--kv-events-config: publisher %q: only zmq is simulated", kc.Publisher))
		}
		o.KVEvents = kc
	}
	return errors.Join(errs...)
}

// expandMultiValue rewrites "--flag a b c" (argparse nargs='+') as
// "--flag=a --flag=b --flag=c" for the flags that take several values.
func expandMultiValue(args []string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || strings.Contains(name, "=") || !multiValue[name] {
			out = append(out, a)
			continue
		}
		n := 0
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			out = append(out, "--"+name+"="+args[i])
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--%s: needs at least one value", name)
		}
	}
	return out, nil
}

type stringList struct{ dst *[]string }

func (s stringList) String() string {
	if s.dst == nil {
		return ""
	}
	return strings.Join(*s.dst, " ")
}

func (s stringList) Set(v string) error {
	*s.dst = append(*s.dst, v)
	return nil
}

// loraList parses --lora-modules values: name=path or a JSON object with
// name, path and base_model_name.
type loraList struct{ o *Options }

func (l loraList) String() string { return "" }

func (l loraList) Set(v string) error {
	var name, path string
	if strings.HasPrefix(strings.TrimSpace(v), "{") {
		var m struct {
			Name string `json:"name"`
			Path string `json:"path"`
			Base string `json:"base_model_name"`
		}
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		name, path = m.Name, m.Path
	} else {
		var ok bool
		name, path, ok = strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("%q: must be name=path", v)
		}
	}
	if name == "" || path == "" {
		return fmt.Errorf("%q: name and path are required", v)
	}
	if _, dup := l.o.LoRAModules[name]; !dup {
		l.o.LoRAOrder = append(l.o.LoRAOrder, name)
	}
	l.o.LoRAModules[name] = path
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseLabels(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitList(v) {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: labels are k=v", kv)
		}
		out[k] = val
	}
	return out, nil
}
