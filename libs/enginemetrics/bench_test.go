package enginemetrics

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// BenchmarkParse decodes a vllm-sim exposition (356 lines, 29 KB: the
// families a vLLM pod exposes, histograms included) with a reused Parser,
// as a scrape loop does.
func BenchmarkParse(b *testing.B) {
	for _, file := range []string{"vllm-sim.prom", "vllm-legacy.prom", "sglang.prom"} {
		b.Run(file, func(b *testing.B) {
			body := readTestdata(b, file)
			p := NewParser()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := p.Parse(body, FormatText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseWholeBody is the baseline Parse improves on: expfmt
// decoding the whole vllm-sim body, histograms included.
func BenchmarkParseWholeBody(b *testing.B) {
	body := readTestdata(b, "vllm-sim.prom")
	tp := expfmt.NewTextParser(model.UTF8Validation)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_ = extract(families)
	}
}
