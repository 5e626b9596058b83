package enginemetrics

import (
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// accumulator gathers the samples of one engine's metric names.
type accumulator struct {
	seen bool
	// sums holds the summed fields (counters and request gauges).
	sums [numFields]float64
	// kv and kvLegacy hold the sum and count of the usage series.
	kvSum, kvLegacySum float64
	kvN, kvLegacyN     int
	blockSize          int64
	numGPUBlocks       int64
	// lora is the newest vllm:lora_requests_info series.
	lora   *dto.Metric
	loraTS float64
}

// extract turns the families of the wanted names into Metrics.
func extract(families map[string]*dto.MetricFamily) Metrics {
	var acc [numSources]accumulator
	for name, mf := range families {
		w, ok := wantedNames[name]
		if !ok {
			continue
		}
		a := &acc[w.src]
		for _, m := range mf.GetMetric() {
			if v, ok := SampleValue(m); ok {
				a.seen = true
				a.add(w.field, m, v)
			}
		}
	}
	if !acc[sourceVLLM].seen && acc[sourceSGLang].seen {
		return acc[sourceSGLang].metrics(sourceSGLang)
	}
	return acc[sourceVLLM].metrics(sourceVLLM)
}

// add records the sample m of value v of a field.
func (a *accumulator) add(f field, m *dto.Metric, v float64) {
	switch f {
	case fieldKVUsage:
		a.kvSum += v
		a.kvN++
	case fieldKVUsageLegacy:
		a.kvLegacySum += v
		a.kvLegacyN++
	case fieldCacheConfig:
		if bs, ok := labelInt(m, labelBlockSize); ok {
			a.blockSize = max(a.blockSize, bs)
		}
		if n, ok := labelInt(m, labelNumGPUBlocks); ok {
			a.numGPUBlocks = addSaturating(a.numGPUBlocks, n)
		}
	case fieldLoRAInfo:
		if a.lora == nil || v > a.loraTS {
			a.lora, a.loraTS = m, v
		}
	default:
		a.sums[f] += v
	}
}

// metrics returns what a holds, as the metrics of engine src.
func (a *accumulator) metrics(src source) Metrics {
	m := Metrics{
		Engine:                  EngineVLLM,
		Waiting:                 toCount(a.sums[fieldWaiting]),
		Running:                 toCount(a.sums[fieldRunning]),
		BlockSize:               a.blockSize,
		NumGPUBlocks:            a.numGPUBlocks,
		PromptTokensTotal:       a.sums[fieldPromptTokens],
		GenerationTokensTotal:   a.sums[fieldGenerationTokens],
		PrefixCacheQueriesTotal: a.sums[fieldPrefixQueries],
		PrefixCacheHitsTotal:    a.sums[fieldPrefixHits],
		PreemptionsTotal:        a.sums[fieldPreemptions],
		RequestSuccessTotal:     a.sums[fieldRequestSuccess],
	}
	switch {
	case a.kvN > 0:
		m.KVCacheUsage = clamp01(a.kvSum / float64(a.kvN))
	case a.kvLegacyN > 0:
		m.KVCacheUsage = clamp01(a.kvLegacySum / float64(a.kvLegacyN))
	}
	if a.lora != nil {
		m.MaxLoRA, _ = labelInt(a.lora, labelMaxLoRA)
		m.RunningLoRAAdapters = splitAdapters(labelValue(a.lora, labelRunningAdapters))
		m.WaitingLoRAAdapters = splitAdapters(labelValue(a.lora, labelWaitingAdapters))
	}
	if src == sourceSGLang {
		m.Engine = EngineSGLang
		// SGLang looks every prompt token up in its radix cache.
		m.PrefixCacheQueriesTotal = m.PromptTokensTotal
	}
	return m
}

// SampleValue returns the value of a counter, gauge or untyped sample, if
// it is finite.
func SampleValue(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.Gauge.GetValue()
	case m.Counter != nil:
		v = m.Counter.GetValue()
	case m.Untyped != nil:
		v = m.Untyped.GetValue()
	default:
		return 0, false
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// labelInt returns a label's value as a non-negative integer.
func labelInt(m *dto.Metric, name string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(labelValue(m, name)), 10, 64)
	return n, err == nil && n >= 0
}

// splitAdapters splits a comma-separated adapter list; empty is none.
func splitAdapters(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// toCount rounds a gauge to a non-negative int64.
func toCount(v float64) int64 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	default:
		return int64(math.Round(v))
	}
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
