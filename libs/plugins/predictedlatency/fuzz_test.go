package predictedlatency_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// FuzzApplyEffect: whatever values a decision event carries and whatever
// a completion reports, the plugin neither panics nor lets a value that is
// not a measurement into its model: predictions stay finite and positive.
func FuzzApplyEffect(f *testing.F) {
	good := make([]byte, 0, 8*22)
	for _, v := range []float64{1, 1, 0.5, 0, 0.1, 0.2, 0, 0, 0.1, 1, 0.01, 0.02, 0.5, 0.3, 500, 500, 100, 0.05, 0.01, 0, 0} {
		good = binary.LittleEndian.AppendUint64(good, math.Float64bits(v))
	}
	f.Add(good, int64(50e6), int64(5e6), int64(100), true)
	f.Add(good[:40], int64(-1), int64(-1), int64(-5), false)
	nan := binary.LittleEndian.AppendUint64(append([]byte(nil), good[:8]...), math.Float64bits(math.NaN()))
	f.Add(append(nan, good[16:]...), int64(math.MaxInt64), int64(1), int64(1<<40), true)
	f.Fuzz(func(t *testing.T, raw []byte, ttft, tpot, output int64, streamed bool) {
		h := schedulingtest.NewHandle()
		p := schedulingtest.New[*predictedlatency.Plugin](t, h, predictedlatency.Type, "", "")
		var vals []float64
		for len(raw) >= 8 {
			vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(raw)))
			raw = raw[8:]
		}
		e := &scheduling.Effect{Plugin: p.TypedName(), Endpoints: []string{"pod-0"}, Values: vals}
		for id := uint64(1); id <= 3; id++ {
			p.ApplyEffect(id, h.Clock(), e)
			resp := &scheduling.Response{DecisionID: id, StatusCode: 200, Streamed: streamed, Time: h.Clock().Add(time.Second),
				Usage: scheduling.Usage{PromptTokens: 100, CompletionTokens: int(output % (1 << 31)), TTFT: time.Duration(ttft), TPOT: time.Duration(tpot), Duration: time.Duration(ttft)}}
			p.ResponseComplete(context.Background(), resp)
		}
		p.Refit()
		if t1, t2, ok := p.Predict("pod-0", e); ok && (t1 <= 0 || t2 <= 0) {
			t.Fatalf("predictions %v %v from %v", t1, t2, vals)
		}
		scores := schedulingtest.Score(p, schedulingtest.CycleState(1), schedulingtest.Completion("r", "m", "hello there"), schedulingtest.Endpoints(2))
		for _, s := range scores {
			if math.IsNaN(s) || s < 0 || s > 1 {
				t.Fatalf("score %v from %v", s, vals)
			}
		}
	})
}
