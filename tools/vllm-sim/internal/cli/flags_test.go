package cli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/tools/vllm-sim/internal/server"
)

// A vLLM command line parses unchanged.
func TestVLLMCommandLine(t *testing.T) {
	o, err := Parse(strings.Fields(`serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port 9000
		--served-model-name llama llama-3 --block-size 32 --num-gpu-blocks-override 1000 --max-num-seqs 128
		--max-num-batched-tokens 4096 --max-model-len 8192 --enable-lora --lora-modules sql=/loras/sql chat=/loras/chat
		--max-loras 2 --tensor-parallel-size 2 --gpu-memory-utilization 0.9 --enable-prefix-caching --trust-remote-code
		--seed 7 --tp 2`), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := o.Engine
	if o.Model != "meta-llama/Llama-3.1-8B-Instruct" || o.Host != "127.0.0.1" || o.Port != 9000 ||
		strings.Join(o.ServedNames, ",") != "llama,llama-3" || e.BlockSize != 32 || e.NumGPUBlocks != 1000 ||
		e.MaxNumSeqs != 128 || e.MaxNumBatchedTokens != 4096 || e.MaxModelLen != 8192 || e.MaxLoRAs != 2 ||
		strings.Join(e.Adapters, ",") != "sql,chat" || o.LoRAModules["chat"] != "/loras/chat" || o.Seed != 7 || e.Model != "llama" {
		t.Errorf("parsed %+v", o)
	}
	if strings.Join(o.IgnoredFlags, " ") != "--enable-prefix-caching --gpu-memory-utilization --tensor-parallel-size --trust-remote-code" {
		t.Errorf("ignored flags %v", o.IgnoredFlags)
	}
}

func TestKVEventsConfig(t *testing.T) {
	o, err := Parse([]string{"--kv-events-config", `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv@{pod}@{model}","buffer_steps":500,"hwm":2000}`,
		"--kv-events-encoding", "map", "--kv-events-replay-framing", "legacy"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	k := o.KVEvents
	if !k.Enabled || k.Endpoint != "tcp://*:5557" || k.ReplayEndpoint != "tcp://*:5558" || k.BufferSteps != 500 || k.HWM != 2000 ||
		o.EventEncoding != events.EncodingMap || o.ReplayFraming != kvzmq.FramingLegacy {
		t.Errorf("parsed %+v", o)
	}
	o, err = Parse([]string{"--kv-events-config", `{"enable_kv_cache_events":true}`}, io.Discard)
	if err != nil || o.KVEvents.Endpoint != "tcp://*:5557" || o.KVEvents.BufferSteps != 10000 || o.KVEvents.HWM != 100000 {
		t.Errorf("defaults: %+v %v", o.KVEvents, err)
	}
}

func TestSimulatorFlagsAndEnv(t *testing.T) {
	t.Setenv("HERMOD_SPEED", "5")
	t.Setenv("HERMOD_PODS", "4")
	o, err := Parse([]string{"--pods", "2", "--pod-speed", "1,0.5", "--step-overhead", "5ms", "--prefill-per-token", "20us",
		"--failure-rate-429", "0.1", "--extra-latency", "50ms", "--etcd-endpoints", "a:2379,b:2379", "--pod-labels", "1:role=decode"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Speed != 5 || o.Pods != 2 || len(o.PodSpeeds) != 2 || o.PodSpeeds[1] != 0.5 || o.Engine.Cost.StepOverhead != 5*time.Millisecond ||
		o.Engine.Cost.PrefillPerToken != 20*time.Microsecond || o.Faults.ErrorRates["429"] != 0.1 || o.Faults.ExtraLatency.Std() != 50*time.Millisecond ||
		strings.Join(o.EtcdEndpoints, " ") != "a:2379 b:2379" || o.PodLabels[1]["role"] != "decode" {
		t.Errorf("parsed %+v", o)
	}
}

// vLLM's --runner picks the APIs a pod serves; auto (vLLM's default,
// chosen from the model's architecture) is generate in the simulator.
func TestRunner(t *testing.T) {
	for _, c := range []struct {
		args []string
		want server.Runner
		dim  int
	}{
		{nil, server.RunnerGenerate, server.DefaultEmbeddingDim},
		{[]string{"--runner", "auto"}, server.RunnerGenerate, server.DefaultEmbeddingDim},
		{[]string{"--runner", "generate"}, server.RunnerGenerate, server.DefaultEmbeddingDim},
		{[]string{"serve", "BAAI/bge-small-en-v1.5", "--runner", "pooling", "--embedding-dim", "768"}, server.RunnerPooling, 768},
	} {
		o, err := Parse(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if o.Runner != c.want || o.EmbeddingDim != c.dim {
			t.Errorf("%v: runner %q, dim %d; want %q, %d", c.args, o.Runner, o.EmbeddingDim, c.want, c.dim)
		}
	}
	t.Setenv("HERMOD_EMBEDDING_DIM", "1024")
	if o, err := Parse([]string{"--runner=pooling"}, io.Discard); err != nil || o.EmbeddingDim != 1024 {
		t.Errorf("HERMOD_EMBEDDING_DIM: %+v %v", o, err)
	}
}

// vLLM's tool calling and logprobs flags.
func TestToolAndLogprobsFlags(t *testing.T) {
	o, err := Parse(strings.Fields("serve llama --enable-auto-tool-choice --tool-call-parser llama3_json --max-logprobs 5"), io.Discard)
	if err != nil || !o.AutoToolChoice || o.ToolCallParser != "llama3_json" || o.MaxLogprobs != 5 || len(o.IgnoredFlags) != 0 {
		t.Errorf("parsed %+v, %v", o, err)
	}
	o, err = Parse(nil, io.Discard)
	if err != nil || o.AutoToolChoice || o.MaxLogprobs != server.DefaultMaxLogprobs {
		t.Errorf("defaults %+v, %v", o, err)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--max-num-seqs", "0"}, "max num seqs: must be positive"},
		{[]string{"--lora-modules", "sql=/x"}, "--lora-modules: needs --enable-lora"},
		{[]string{"--enable-lora", "--lora-modules", "bad"}, `must be name=path`},
		{[]string{"--pods", "2", "--pod-speed", "1,1,1"}, "--pod-speed: 3 values for 2 pods"},
		{[]string{"--pod-speed", "-1"}, "not a positive number"},
		{[]string{"--kv-events-config", `{"enable_kv_cache_events":true,"bogus":1}`}, `unknown field "bogus"`},
		{[]string{"--kv-events-config", `{"enable_kv_cache_events":true,"publisher":"nats"}`}, "only zmq is simulated"},
		{[]string{"--failure-rate-500", "0.7", "--failure-rate-503", "0.6"}, "add up to"},
		{[]string{"--served-model-name"}, "needs at least one value"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--kv-events-encoding", "xml"}, "must be array or map"},
		{[]string{"--pod-labels", "5:a=b"}, "pod 5 does not exist"},
		{[]string{"--first-pod-index", "-1"}, "--first-pod-index: must not be negative"},
		{[]string{"--runner", "draft"}, "must be auto, generate or pooling"},
		{[]string{"--embedding-dim", "0"}, "--embedding-dim: must be between 1 and"},
		{[]string{"--enable-auto-tool-choice"}, "--enable-auto-tool-choice requires --tool-call-parser"},
		{[]string{"--max-logprobs", "-2"}, "--max-logprobs: must be positive or -1"},
	}
	for _, c := range cases {
		_, err := Parse(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
