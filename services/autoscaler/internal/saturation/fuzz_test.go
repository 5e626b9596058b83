package saturation

import (
	"testing"
	"time"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// FuzzTokenAnalyze feeds random replica values to the token analyzer: no
// output may be NaN, infinite or negative, whatever the inputs. The seed
// corpus is in testdata/fuzz/FuzzTokenAnalyze.
func FuzzTokenAnalyze(f *testing.F) {
	f.Add(100000.0, 60000.0, 5.0, 1000.0, 200.0, 0.5, 3.0, 8192, 256, uint8(0))
	f.Fuzz(func(t *testing.T, kvTokens, inUse, queue, in, out, hit, gateway float64, batched, seqs int, shape uint8) {
		role := func(bit uint8, r scaling.Role) scaling.Role {
			if shape&bit != 0 {
				return r
			}
			return scaling.RoleBoth
		}
		v1 := &scaling.Variant{
			Name: "v1", Accelerator: "H100", MaxNumBatchedTokens: batched, MaxNumSeqs: seqs,
			Replicas: []scaling.Replica{
				{Name: "r0", Role: role(1, scaling.RolePrefill), KVCapacityTokens: kvTokens, TokensInUse: inUse,
					Queue: queue, AvgInputTokens: in, AvgOutputTokens: out, PrefixHitRate: hit, KVUsage: hit},
				{Name: "r1", Role: role(2, scaling.RoleDecode), KVCapacityTokens: inUse, TokensInUse: kvTokens,
					Queue: out, AvgInputTokens: queue, AvgOutputTokens: in, PrefixHitRate: 1 - hit},
			},
		}
		v1.Ready = len(v1.Replicas)
		v1.Current = v1.Ready + int(shape>>4&3)
		v2 := &scaling.Variant{
			Name: "v2", Accelerator: "A100", MaxNumBatchedTokens: seqs, MaxNumSeqs: batched,
			Replicas: []scaling.Replica{
				{Name: "r2", Role: role(4, scaling.RoleDecode), KVCapacityTokens: kvTokens * 0.5, TokensInUse: inUse * 2,
					Queue: queue + 5, AvgInputTokens: in, PrefixHitRate: hit},
			},
			Ready: 1, Current: 1,
		}
		v3 := &scaling.Variant{Name: "v3", Current: int(shape >> 6)}
		ta := NewTokenAnalyzer()
		for i := range 3 {
			m := &scaling.Model{ID: "m", Variants: []*scaling.Variant{v1, v2, v3}, GatewayQueue: gateway,
				Now: time.Unix(int64(i), 0)}
			if shape&8 != 0 && i == 2 {
				v1.Replicas, v1.Ready = nil, 0 // scaled to zero: cached capacity
			}
			as := ta.Analyze(m, DefaultTokenConfig())
			if len(as) == 0 {
				t.Fatal("no analysis")
			}
			for _, a := range as {
				checkFinite(t, a)
			}
			checkFinite(t, AnalyzePercentage(m, DefaultPercentageConfig()))
		}
	})
}
