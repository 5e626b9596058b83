package enginemetrics

// The engines [Metrics.Engine] names.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
)

// Metrics is what one /metrics body says about a model server, in the units
// of hermod.events.v1.PodMetrics (see the package documentation for the
// metric each field comes from). Fields a server does not report are zero.
type Metrics struct {
	// Engine is EngineVLLM or EngineSGLang.
	Engine string

	// Waiting and Running are the requests queued and in the running batch.
	Waiting int64
	Running int64
	// KVCacheUsage is the fraction of the KV cache in use, 0..1.
	KVCacheUsage float64

	// BlockSize is the tokens per KV-cache block and NumGPUBlocks the
	// blocks of the cache (vllm:cache_config_info).
	BlockSize    int64
	NumGPUBlocks int64

	// MaxLoRA is how many LoRA adapters fit at once; RunningLoRAAdapters
	// and WaitingLoRAAdapters name the adapters of running and waiting
	// requests (vllm:lora_requests_info, newest series). Nil when none.
	MaxLoRA             int64
	RunningLoRAAdapters []string
	WaitingLoRAAdapters []string

	// Counters since the engine started.
	PromptTokensTotal       float64
	GenerationTokensTotal   float64
	PrefixCacheQueriesTotal float64
	PrefixCacheHitsTotal    float64
	PreemptionsTotal        float64
	RequestSuccessTotal     float64
}
