package saturation

import (
	"fmt"
	"testing"
	"time"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// benchModel is a model of 4 variants x 25 replicas with varied load, a
// fifth of them with a saturated queue (observations).
func benchModel() *scaling.Model {
	m := &scaling.Model{ID: "bench", Namespace: "ns", GatewayQueue: 12, Now: time.Unix(1, 0)}
	for vi := range 4 {
		v := &scaling.Variant{Name: fmt.Sprintf("v%d", vi), Accelerator: []string{"H100", "A100"}[vi%2], Current: 25, Ready: 25}
		for ri := range 25 {
			i := float64(vi*25 + ri)
			v.Replicas = append(v.Replicas, scaling.Replica{
				Name: fmt.Sprintf("v%d-%d", vi, ri), Variant: v.Name,
				KVUsage: float64(ri%10) / 10, Queue: float64(ri % 6),
				KVCapacityTokens: 200000, TokensInUse: 1000 * i,
				AvgInputTokens: 500 + 10*i, AvgOutputTokens: 50 + 7*i, PrefixHitRate: 0.3,
			})
		}
		m.Variants = append(m.Variants, v)
	}
	return m
}

// BenchmarkAnalyze100Replicas times both analyzers on one 100-replica
// model (the token analyzer with a new snapshot time each run, so every run
// pushes its observations).
func BenchmarkAnalyze100Replicas(b *testing.B) {
	b.Run("percentage", func(b *testing.B) {
		m := benchModel()
		b.ReportAllocs()
		for b.Loop() {
			AnalyzePercentage(m, DefaultPercentageConfig())
		}
	})
	b.Run("token", func(b *testing.B) {
		m := benchModel()
		ta := NewTokenAnalyzer()
		b.ReportAllocs()
		for b.Loop() {
			m.Now = m.Now.Add(time.Second)
			ta.Analyze(m, DefaultTokenConfig())
		}
	})
}
