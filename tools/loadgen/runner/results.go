package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"time"
)

// Result is one request as the client saw it. Times are simulated seconds
// (wall-clock seconds times the run's speed).
type Result struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Status is the HTTP status; 0 when no answer came (Error says why).
	Status int `json:"status"`
	// Scheduled and Sent are when the request was due and when it left,
	// after the start of the run.
	Scheduled float64 `json:"scheduled_s"`
	Sent      float64 `json:"sent_s"`
	// Latency is from sending to the end of the answer.
	Latency float64 `json:"latency_s"`
	// TTFT is the time to the first token (streamed requests only).
	TTFT *float64 `json:"ttft_s,omitempty"`
	// Pod is the pod that served the request (the gateway's
	// x-decoder-host-port, named when the pod is known).
	Pod string `json:"pod,omitempty"`
	// RequestID is the gateway's x-request-id.
	RequestID        string `json:"request_id,omitempty"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	// CachedTokens are the prompt tokens the engine found in its prefix
	// cache (usage.prompt_tokens_details.cached_tokens).
	CachedTokens int    `json:"cached_tokens,omitempty"`
	Error        string `json:"error,omitempty"`
	Text         string `json:"resp_text,omitempty"`
}

// OK reports whether the request succeeded.
func (r *Result) OK() bool { return r.Status == 200 && r.Error == "" }

// QueueSample is one reading of a pod's queues.
type QueueSample struct {
	T       float64 `json:"t"`
	Waiting float64 `json:"waiting"`
	Running float64 `json:"running"`
}

// QueueSeries is a pod's queue lengths over the run.
type QueueSeries struct {
	Pod     string        `json:"pod"`
	Address string        `json:"address"`
	Samples []QueueSample `json:"samples"`
	// Errors counts samples that could not be read.
	Errors int `json:"errors,omitempty"`
}

// Summary is the reference's summary over the successful requests, in
// simulated seconds, plus failures and TTFT when streamed.
type Summary struct {
	Count    int     `json:"count"`
	Failed   int     `json:"failed"`
	Avg      float64 `json:"avg"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P95      float64 `json:"p95"`
	P99      float64 `json:"p99"`
	Max      float64 `json:"max"`
	TotalE2E float64 `json:"total_e2e"`
	TTFTP50  float64 `json:"ttft_p50,omitempty"`
	TTFTP90  float64 `json:"ttft_p90,omitempty"`
	TTFTP99  float64 `json:"ttft_p99,omitempty"`
	// Throughput is successful requests per second of TotalE2E, and
	// OutputTokens their completion tokens per second.
	Throughput   float64 `json:"throughput_rps"`
	OutputTokens float64 `json:"output_tokens_per_s"`
	// HitRate is the share of prompt tokens served from prefix caches.
	HitRate float64 `json:"prefix_hit_rate"`
	// PerPod counts the requests each pod served.
	PerPod map[string]int `json:"per_pod,omitempty"`
}

// Results are a run's results: what results JSON files hold.
type Results struct {
	Workload string        `json:"workload"`
	Target   string        `json:"target"`
	Speed    float64       `json:"speed"`
	Stream   bool          `json:"stream"`
	Started  time.Time     `json:"started"`
	Requests []Result      `json:"requests"`
	Queues   []QueueSeries `json:"queues,omitempty"`
	Summary  Summary       `json:"summary"`
}

// Summarize computes the summary the way the reference does: the median
// for p50, and for pXX the sorted latency at index max(0, int(n·XX/100)-1).
func Summarize(reqs []Result, totalE2E float64) Summary {
	s := Summary{TotalE2E: totalE2E, PerPod: map[string]int{}}
	var lat, ttft []float64
	for i := range reqs {
		r := &reqs[i]
		if !r.OK() {
			s.Failed++
			continue
		}
		lat = append(lat, r.Latency)
		if r.TTFT != nil {
			ttft = append(ttft, *r.TTFT)
		}
		if r.Pod != "" {
			s.PerPod[r.Pod]++
		}
	}
	s.Count = len(lat)
	if len(lat) == 0 {
		return s
	}
	var prompt, cached, output int
	for i := range reqs {
		if r := &reqs[i]; r.OK() {
			prompt, cached, output = prompt+r.PromptTokens, cached+r.CachedTokens, output+r.CompletionTokens
		}
	}
	if prompt > 0 {
		s.HitRate = float64(cached) / float64(prompt)
	}
	if totalE2E > 0 {
		s.Throughput, s.OutputTokens = float64(len(lat))/totalE2E, float64(output)/totalE2E
	}
	slices.Sort(lat)
	var sum float64
	for _, l := range lat {
		sum += l
	}
	s.Avg, s.P50, s.Max = sum/float64(len(lat)), median(lat), lat[len(lat)-1]
	s.P90, s.P95, s.P99 = rank(lat, 0.90), rank(lat, 0.95), rank(lat, 0.99)
	if len(ttft) > 0 {
		slices.Sort(ttft)
		s.TTFTP50, s.TTFTP90, s.TTFTP99 = median(ttft), rank(ttft, 0.90), rank(ttft, 0.99)
	}
	return s
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func rank(sorted []float64, q float64) float64 {
	return sorted[max(0, int(math.Floor(float64(len(sorted))*q))-1)]
}

// Quantile is the q-quantile of sorted values as every summary computes
// it: the median for 0.5, else the value at index max(0, floor(n·q)-1);
// 0 for no values.
func Quantile(sorted []float64, q float64) float64 {
	switch {
	case len(sorted) == 0:
		return 0
	case q == 0.5:
		return median(sorted)
	}
	return rank(sorted, q)
}

// PrintSummary prints the reference's summary lines.
func (r *Results) PrintSummary(w io.Writer) {
	s := r.Summary
	if s.Count > 0 {
		fmt.Fprintln(w, "\n=== Latency Summary (successful requests) ===")
		fmt.Fprintf(w, "count=%d avg=%.3fs p50=%.3fs p95=%.3fs p99=%.3fs\n", s.Count, s.Avg, s.P50, s.P95, s.P99)
		if s.TTFTP50 > 0 {
			fmt.Fprintf(w, "ttft p50=%.3fs p90=%.3fs p99=%.3fs\n", s.TTFTP50, s.TTFTP90, s.TTFTP99)
		}
		fmt.Fprintf(w, "throughput=%.2f req/s %.0f output tokens/s prefix cache hit rate=%.1f%%\n", s.Throughput, s.OutputTokens, 100*s.HitRate)
	}
	if s.Failed > 0 {
		fmt.Fprintf(w, "failed=%d\n", s.Failed)
		for _, f := range r.FailureCauses(3) {
			fmt.Fprintf(w, "  %d x %s\n", f.Count, f.Cause)
		}
	}
	fmt.Fprintln(w, "\n=== Total End-to-End (E2E) Latency ===")
	fmt.Fprintf(w, "All requests completed in %.3f seconds\n", s.TotalE2E)
}

// FailureCause is one reason requests failed and how many did for it.
type FailureCause struct {
	Cause string
	Count int
}

// FailureCauses returns the n commonest reasons requests failed: their
// HTTP status and error, most frequent first.
func (r *Results) FailureCauses(n int) []FailureCause {
	counts := map[string]int{}
	for i := range r.Requests {
		q := &r.Requests[i]
		if q.OK() {
			continue
		}
		cause := q.Error
		if q.Status != 0 {
			cause = fmt.Sprintf("HTTP %d: %s", q.Status, q.Error)
		}
		counts[cause]++
	}
	out := make([]FailureCause, 0, len(counts))
	for c, k := range counts {
		out = append(out, FailureCause{Cause: c, Count: k})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Cause < out[j].Cause
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// WriteFile saves the results as indented JSON.
func (r *Results) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// ReadFile loads results saved by WriteFile.
func ReadFile(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	return &r, nil
}
