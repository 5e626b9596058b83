package enginemetrics

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file   string
		format Format
		want   Metrics
	}{
		{
			// Captured from vllm-sim with LoRA adapters, 6 running, 6 waiting.
			file: "vllm-sim.prom",
			want: Metrics{
				Engine: EngineVLLM, Waiting: 6, Running: 6, KVCacheUsage: 0.859375,
				BlockSize: 16, NumGPUBlocks: 128,
				MaxLoRA: 2, RunningLoRAAdapters: []string{"chat-lora"}, WaitingLoRAAdapters: []string{"sql-lora"},
				PromptTokensTotal: 2963, GenerationTokensTotal: 1376,
				PrefixCacheQueriesTotal: 2963, PrefixCacheHitsTotal: 2496,
				PreemptionsTotal: 0, RequestSuccessTotal: 3,
			},
		},
		{
			// The same simulator later: preemptions, no waiting adapter.
			file: "vllm-sim-preempted.prom",
			want: Metrics{
				Engine: EngineVLLM, Waiting: 1, Running: 6, KVCacheUsage: 0.7265625,
				BlockSize: 16, NumGPUBlocks: 128,
				MaxLoRA: 2, RunningLoRAAdapters: []string{"sql-lora"},
				PromptTokensTotal: 4651, GenerationTokensTotal: 3399,
				PrefixCacheQueriesTotal: 4651, PrefixCacheHitsTotal: 4160,
				PreemptionsTotal: 4, RequestSuccessTotal: 8,
			},
		},
		{
			// vLLM V0: gpu_cache_usage_perc, three lora_requests_info series
			// (the middle one is the newest), _created series.
			file: "vllm-legacy.prom",
			want: Metrics{
				Engine: EngineVLLM, Waiting: 2, Running: 3, KVCacheUsage: 0.4125,
				BlockSize: 16, NumGPUBlocks: 7281,
				MaxLoRA: 4, RunningLoRAAdapters: []string{"sql-lora", "chat-lora"}, WaitingLoRAAdapters: []string{"math-lora"},
				PromptTokensTotal: 52011, GenerationTokensTotal: 19230,
				PreemptionsTotal: 12, RequestSuccessTotal: 177,
			},
		},
		{
			file: "vllm-multi.prom",
			want: Metrics{
				Engine: EngineVLLM, Waiting: 3, Running: 8, KVCacheUsage: 0.5,
				BlockSize: 32, NumGPUBlocks: 2000,
				PromptTokensTotal: 1500, GenerationTokensTotal: 300,
				PrefixCacheQueriesTotal: 1500, PrefixCacheHitsTotal: 768,
				PreemptionsTotal: 3, RequestSuccessTotal: 22,
			},
		},
		{
			file: "sglang.prom",
			want: Metrics{
				Engine: EngineSGLang, Waiting: 31, Running: 162, KVCacheUsage: 0.28,
				PromptTokensTotal: 8.128902e+06, GenerationTokensTotal: 7.557572e+06,
				PrefixCacheQueriesTotal: 8.128902e+06, PrefixCacheHitsTotal: 3.45e+06,
				RequestSuccessTotal: 41233,
			},
		},
		{
			file:   "vllm-openmetrics.prom",
			format: FormatOpenMetrics,
			want: Metrics{
				Engine: EngineVLLM, Waiting: 7, Running: 2, KVCacheUsage: 0.5,
				BlockSize: 16, NumGPUBlocks: 512,
				PromptTokensTotal: 100, GenerationTokensTotal: 50, RequestSuccessTotal: 7,
			},
		},
	}
	p := NewParser()
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := readTestdata(t, tc.file)
			got, err := p.Parse(body, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tc.want)
			}
			if tc.format == FormatText {
				// The filtered parse reads what a parse of the whole body reads.
				if full := parseFull(t, body); !reflect.DeepEqual(full, got) {
					t.Errorf("whole-body parse differs:\n got %+v\nfull %+v", got, full)
				}
			}
		})
	}
}

// parseFull decodes a whole body with expfmt, without the line filter.
func parseFull(t testing.TB, body []byte) Metrics {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	return extract(families)
}

func TestParseEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Metrics
	}{
		{"empty body", "", Metrics{Engine: EngineVLLM}},
		{"only other metrics", "# TYPE go_goroutines gauge\ngo_goroutines 12\n", Metrics{Engine: EngineVLLM}},
		{"no final newline", "vllm:num_requests_running 4", Metrics{Engine: EngineVLLM, Running: 4}},
		{"CRLF line ends", "vllm:num_requests_running 4\r\nvllm:num_requests_waiting 2\r\n", Metrics{Engine: EngineVLLM, Running: 4, Waiting: 2}},
		{"untyped, blanks and timestamp", "  vllm:num_requests_waiting  {model_name=\"a\"}\t 3 1717001291000 \n", Metrics{Engine: EngineVLLM, Waiting: 3}},
		{"quoted name", "{\"vllm:num_requests_running\",model_name=\"m\"} 5\n", Metrics{Engine: EngineVLLM, Running: 5}},
		{"escaped label values", `vllm:lora_requests_info{max_lora="3",running_lora_adapters="a\\b, c",waiting_lora_adapters="x\"y"} 1` + "\n",
			Metrics{Engine: EngineVLLM, MaxLoRA: 3, RunningLoRAAdapters: []string{`a\b`, "c"}, WaitingLoRAAdapters: []string{`x"y`}}},
		{"NaN and Inf ignored", "vllm:num_requests_running NaN\nvllm:num_requests_waiting +Inf\nvllm:kv_cache_usage_perc -Inf\n", Metrics{Engine: EngineVLLM}},
		{"usage clamped", "vllm:kv_cache_usage_perc 1.5\n", Metrics{Engine: EngineVLLM, KVCacheUsage: 1}},
		{"negative gauge is zero", "vllm:num_requests_running -3\n", Metrics{Engine: EngineVLLM}},
		{"fractional gauge rounds", "vllm:num_requests_running 2.6\n", Metrics{Engine: EngineVLLM, Running: 3}},
		{"new usage wins over legacy", "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.1\n", Metrics{Engine: EngineVLLM, KVCacheUsage: 0.1}},
		{"cache config None", `vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1` + "\n", Metrics{Engine: EngineVLLM, BlockSize: 16}},
		{"lora empty adapters", `vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 5` + "\n", Metrics{Engine: EngineVLLM, MaxLoRA: 1}},
		{"vllm wins over sglang", "sglang:num_running_reqs 9\nvllm:num_requests_running 1\n", Metrics{Engine: EngineVLLM, Running: 1}},
		{"wanted name in a histogram ignored", "# TYPE vllm:num_requests_running histogram\nvllm:num_requests_running_bucket{le=\"+Inf\"} 3\nvllm:num_requests_running_count 3\nvllm:num_requests_running_sum 4\n", Metrics{Engine: EngineVLLM}},
	}
	p := NewParser()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tc.body), FormatText)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestParseErrors checks that malformed lines are errors naming the line,
// and that expfmt rejects each body too (Parse is no stricter).
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		line int
		msg  string
	}{
		{"html", "<html><body>Bad gateway</body></html>\n", 1, "invalid metric name"},
		{"json", "{\"error\":\"x\"}\n", 1, "expected ',' or '}'"},
		{"bad value in skipped family", "vllm:num_requests_running 1\ngo_goroutines one\n", 2, `expected float as value, got "one"`},
		{"bad value in wanted family", "# a comment\n\nvllm:num_requests_running 1x\n", 3, `expected float as value, got "1x"`},
		{"missing value", "go_goroutines{a=\"b\"}\n", 1, "missing sample value"},
		{"unterminated labels", "go_info{version=\"go1.26\"\n", 1, "unterminated"},
		{"unquoted label value", "go_info{version=go1}\n", 1, `expected '"' at start of label value`},
		{"bad escape", "go_info{version=\"a\\q\"} 1\n", 1, "invalid escape sequence"},
		{"bad timestamp", "go_goroutines 1 yesterday\n", 1, "expected integer as timestamp"},
		{"text after timestamp", "go_goroutines 1 17 x\n", 1, "unexpected text after timestamp"},
		{"unknown type", "# TYPE go_goroutines gauges\ngo_goroutines 1\n", 1, "unknown metric type"},
		{"reserved label", "go_goroutines{__name__=\"x\"} 1\n", 1, "reserved"},
		{"hex value", "go_goroutines 0x1p3\n", 1, "expected float"},
		{"digit separator", "go_goroutines 1_000\n", 1, "expected float"},
		{"two names in braces", "{\"a\",\"b\"} 1\n", 1, "more than one metric name"},
		{"no name in braces", "{a=\"b\"} 1\n", 1, "without a metric name"},
		{"invalid UTF-8 label value", "go_info{v=\"\xff\"} 1\n", 1, "UTF-8"},
		// expfmt's own checks, on the lines it decodes.
		{"duplicate label in cache_config_info", "go_goroutines 1\nvllm:cache_config_info{a=\"1\",a=\"2\"} 1\n", 2, "duplicate label names"},
	}
	p := NewParser()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Parse([]byte(tc.body), FormatText)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("error %q, want line %d and %q", err, tc.line, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "parse exposition: line ") {
				t.Errorf("error %q does not name the operation and the line", err)
			}
			tp := expfmt.NewTextParser(model.UTF8Validation)
			if _, err := tp.TextToMetricFamilies(strings.NewReader(tc.body)); err == nil {
				t.Errorf("expfmt accepts the body that Parse rejects")
			}
		})
	}
}

func TestParseOpenMetrics(t *testing.T) {
	body := readTestdata(t, "vllm-openmetrics.prom")
	// Read as the text format, OpenMetrics' info and stateset types fail.
	if _, err := NewParser().Parse(body, FormatText); err == nil {
		t.Error("OpenMetrics body parsed as the text format: no error")
	}
	// Lines after # EOF are not read.
	got, err := NewParser().Parse(append(body, "vllm:num_requests_running 99\n"...), FormatOpenMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if got.Running != 2 {
		t.Errorf("Running %d after # EOF, want 2", got.Running)
	}
	if m, err := Parse(body, "application/openmetrics-text; version=1.0.0; charset=utf-8"); err != nil || m.Waiting != 7 {
		t.Errorf("Parse by content type: %+v, %v", m, err)
	}
	if _, err := NewParser().Parse([]byte("vllm:num_requests_running 1 1.5 x\n"), FormatOpenMetrics); err == nil {
		t.Error("text after an OpenMetrics timestamp: no error")
	}
}

func TestFormatOf(t *testing.T) {
	tests := map[string]Format{
		"": FormatText,
		"text/plain; version=0.0.4; charset=utf-8; escaping=underscores": FormatText,
		"application/openmetrics-text; version=1.0.0; charset=utf-8":     FormatOpenMetrics,
		"Application/OpenMetrics-Text":                                   FormatOpenMetrics,
		"application/json":                                               FormatText,
	}
	for ct, want := range tests {
		if got := FormatOf(ct); got != want {
			t.Errorf("FormatOf(%q) = %d, want %d", ct, got, want)
		}
	}
}

func TestFilterDoesNotAllocate(t *testing.T) {
	body := readTestdata(t, "vllm-sim.prom")
	p := NewParser()
	if err := p.filter(body, false); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.filter(body, false) }); n != 0 {
		t.Errorf("filter allocates %v times a body", n)
	}
}

func TestParseReusesParser(t *testing.T) {
	p := NewParser()
	a, b := readTestdata(t, "vllm-sim.prom"), readTestdata(t, "sglang.prom")
	for range 3 {
		for _, body := range [][]byte{a, b} {
			if _, err := p.Parse(body, FormatText); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.Parse([]byte("bad line\n"), FormatText); err == nil {
			t.Fatal("no error")
		}
	}
	got, err := p.Parse(a, FormatText)
	if err != nil || got.Running != 6 || got.Engine != EngineVLLM {
		t.Fatalf("after reuse: %+v, %v", got, err)
	}
}

func TestQuotedNamePart(t *testing.T) {
	for line, want := range map[string]bool{
		`foo"bar" 1`:            true,
		`  # TYPE foo"x" gauge`: true,
		`foo{a="b"} 1`:          false,
		`{"foo"} 1`:             false,
		`# HELP foo "quoted"`:   false,
	} {
		if got := quotedNamePart([]byte(line)); got != want {
			t.Errorf("quotedNamePart(%q) = %v", line, got)
		}
	}
}
