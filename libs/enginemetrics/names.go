package enginemetrics

// field is a quantity of Metrics that one or more metric names feed.
type field uint8

const (
	fieldNone field = iota
	fieldWaiting
	fieldRunning
	fieldKVUsage
	fieldKVUsageLegacy
	fieldCacheConfig
	fieldLoRAInfo
	fieldPromptTokens
	fieldGenerationTokens
	fieldPrefixQueries
	fieldPrefixHits
	fieldPreemptions
	fieldRequestSuccess
	numFields
)

// source is the engine a metric name belongs to.
type source uint8

const (
	sourceVLLM source = iota
	sourceSGLang
	numSources
)

// wanted is a metric name the collector reads.
type wanted struct {
	src   source
	field field
	// bit is the name's own bit, for sets of names.
	bit uint32
}

// wantedNames maps every sample name the collector reads to its field. The
// parser hands expfmt only the samples of these names.
var wantedNames = withBits(map[string]wanted{
	"vllm:num_requests_waiting":       {src: sourceVLLM, field: fieldWaiting},
	"vllm:num_requests_running":       {src: sourceVLLM, field: fieldRunning},
	"vllm:kv_cache_usage_perc":        {src: sourceVLLM, field: fieldKVUsage},
	"vllm:gpu_cache_usage_perc":       {src: sourceVLLM, field: fieldKVUsageLegacy},
	"vllm:cache_config_info":          {src: sourceVLLM, field: fieldCacheConfig},
	"vllm:lora_requests_info":         {src: sourceVLLM, field: fieldLoRAInfo},
	"vllm:prompt_tokens_total":        {src: sourceVLLM, field: fieldPromptTokens},
	"vllm:generation_tokens_total":    {src: sourceVLLM, field: fieldGenerationTokens},
	"vllm:prefix_cache_queries_total": {src: sourceVLLM, field: fieldPrefixQueries},
	"vllm:prefix_cache_hits_total":    {src: sourceVLLM, field: fieldPrefixHits},
	"vllm:num_preemptions_total":      {src: sourceVLLM, field: fieldPreemptions},
	"vllm:request_success_total":      {src: sourceVLLM, field: fieldRequestSuccess},

	"sglang:num_queue_reqs":          {src: sourceSGLang, field: fieldWaiting},
	"sglang:num_running_reqs":        {src: sourceSGLang, field: fieldRunning},
	"sglang:token_usage":             {src: sourceSGLang, field: fieldKVUsage},
	"sglang:prompt_tokens_total":     {src: sourceSGLang, field: fieldPromptTokens},
	"sglang:generation_tokens_total": {src: sourceSGLang, field: fieldGenerationTokens},
	"sglang:cached_tokens_total":     {src: sourceSGLang, field: fieldPrefixHits},
	"sglang:num_requests_total":      {src: sourceSGLang, field: fieldRequestSuccess},
})

// withBits gives each name of m a bit of its own.
func withBits(m map[string]wanted) map[string]wanted {
	if len(m) > 32 {
		panic("enginemetrics: more than 32 wanted names")
	}
	var bit uint32 = 1
	for name, w := range m {
		w.bit = bit
		m[name] = w
		bit <<= 1
	}
	return m
}

// Label names of the info metrics.
const (
	labelBlockSize       = "block_size"
	labelNumGPUBlocks    = "num_gpu_blocks"
	labelMaxLoRA         = "max_lora"
	labelRunningAdapters = "running_lora_adapters"
	labelWaitingAdapters = "waiting_lora_adapters"
)
