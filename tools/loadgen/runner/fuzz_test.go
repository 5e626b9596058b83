package runner

import (
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzParseQueues feeds arbitrary expositions to the queue parser: it
// never panics, and what it returns is a sum of numbers it found.
func FuzzParseQueues(f *testing.F) {
	f.Add("vllm:num_requests_waiting{engine=\"0\"} 4\nvllm:num_requests_running 7\n")
	f.Add("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1e3 1700000000\n")
	f.Add("vllm:num_requests_waiting{a=\"}\"} NaN\n")
	f.Add("vllm:num_requests_running{} +Inf\nvllm:num_requests_waitingx 3\n")
	f.Fuzz(func(t *testing.T, text string) {
		w, r, err := parseQueues(strings.NewReader(text))
		if err != nil {
			if w != 0 || r != 0 {
				t.Fatalf("error %v with values %v, %v", err, w, r)
			}
			return
		}
		if !strings.Contains(text, metricWaiting) && !strings.Contains(text, metricRunning) {
			t.Fatalf("values %v, %v from a text without the metrics", w, r)
		}
		if !strings.Contains(text, metricWaiting) && w != 0 && !math.IsNaN(w) {
			t.Fatalf("waiting %v without the waiting metric", w)
		}
	})
}

// FuzzReadStream feeds arbitrary SSE bodies to the stream reader: it never
// panics, and a stream without [DONE] is an error.
func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n")
	f.Add("event: x\ndata: not json\n\n")
	f.Add("data:[DONE]")
	f.Fuzz(func(t *testing.T, body string) {
		r := &run{o: Options{Speed: 1, KeepText: true}}
		var res Result
		r.readStream(strings.NewReader(body), nowForTest(), &res)
		if !strings.Contains(body, "[DONE]") && res.Error == "" {
			t.Fatalf("a stream without [DONE] read without error: %q", body)
		}
	})
}

func nowForTest() time.Time { return time.Now() }
