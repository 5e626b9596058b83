// Package enginemetrics decodes what a model server reports about its load:
// its Prometheus exposition (/metrics) into [Metrics]. Its OpenAI model
// list (/v1/models) is parsed by libs/plugins/datalayer, the one parser
// of it, which the collector polls with.
//
// # Metrics read
//
// vLLM (spec/vllm-wire.md section 4), Engine "vllm":
//
//	vllm:num_requests_waiting          Waiting        sum over series
//	vllm:num_requests_running          Running        sum over series
//	vllm:kv_cache_usage_perc           KVCacheUsage   mean over series, clamped to 0..1
//	vllm:gpu_cache_usage_perc          KVCacheUsage   only when kv_cache_usage_perc is absent (vLLM < 0.10)
//	vllm:cache_config_info             BlockSize (largest label block_size), NumGPUBlocks (sum of label num_gpu_blocks)
//	vllm:lora_requests_info            MaxLoRA, RunningLoRAAdapters, WaitingLoRAAdapters of the series with the highest value (a timestamp)
//	vllm:prompt_tokens_total           PromptTokensTotal
//	vllm:generation_tokens_total       GenerationTokensTotal
//	vllm:prefix_cache_queries_total    PrefixCacheQueriesTotal
//	vllm:prefix_cache_hits_total       PrefixCacheHitsTotal
//	vllm:num_preemptions_total         PreemptionsTotal
//	vllm:request_success_total         RequestSuccessTotal (every finished_reason)
//
// Counters are summed over their series (model_name, engine, finished_reason),
// as are the request gauges, so a server with several model_name or engine
// label values reports its totals. KV-cache usage is a fraction, so it is
// averaged instead of summed: with data-parallel engines of equal size that
// is the usage of the whole server.
//
// SGLang (https://docs.sglang.io/references/production_metrics.html),
// Engine "sglang", mapped onto the same fields:
//
//	sglang:num_queue_reqs              Waiting
//	sglang:num_running_reqs            Running
//	sglang:token_usage                 KVCacheUsage (token slots in use, 0..1)
//	sglang:prompt_tokens_total         PromptTokensTotal, and PrefixCacheQueriesTotal: SGLang
//	                                   looks every prompt token up in its radix cache
//	sglang:generation_tokens_total     GenerationTokensTotal
//	sglang:cached_tokens_total         PrefixCacheHitsTotal (every cache_source)
//	sglang:num_requests_total          RequestSuccessTotal (finished requests)
//
// SGLang has no block size, GPU block count, LoRA info or preemption counter
// in this form; those fields stay 0. A body with sglang: metrics and no
// vllm: ones is SGLang's; anything else is vLLM's. Every other metric is
// ignored, as are samples that are NaN or infinite.
//
// # Parsing and cost
//
// The exposition is decoded by the text parser of
// github.com/prometheus/common/expfmt, with UTF-8 name validation so that
// quoted names parse too. Decoding a whole vLLM exposition that way costs
// about ten thousand allocations, nearly all for histogram buckets that the
// collector does not read, so [Parser] first checks the syntax of every line
// itself (names, label sets, escapes, UTF-8, values and timestamps, without
// allocating) and hands expfmt only the samples of the metrics above, cut
// to what is read: the value, and the labels of the two info metrics. A
// malformed line anywhere is an error that names it ([ParseError]).
// Semantic checks that only expfmt makes (a label name twice, HELP or TYPE
// twice or late) thus apply only to what it sees, the labels of the info
// metrics; none of them changes a value read. A wanted name that a # TYPE
// line makes a histogram or summary is not read, as expfmt would. Every body that expfmt accepts whole
// is accepted, with the same result (FuzzParse checks both), but for one
// quirk of expfmt left out: a name with a quoted part inside (foo"bar",
// which expfmt reads as foobar) is an error. Parse is more lenient than
// expfmt about blanks after a value, a missing final newline and CRLF line
// ends.
//
// OpenMetrics 1.0 (application/openmetrics-text), which expfmt can write but
// not read, is accepted by normalising it on the way: metadata lines
// (# TYPE, # HELP, # UNIT) are skipped, as are exemplars and timestamps
// (float seconds in OpenMetrics); the body ends at "# EOF". Counters keep
// their _total sample names, so they map as in the text format. The protobuf exposition is not accepted: the collector
// never asks for it.
package enginemetrics
