package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// testdata/reference_python.json holds what reference/000's generator
// (Python) builds for five flag sets: per request its id, input words,
// output tokens, launch time (Python's repr of the float seconds), the
// first 16 hex digits of the prompt's SHA-256 and the prompt's length.
type pythonSet struct {
	Name    string `json:"name"`
	Options struct {
		Seed             int64   `json:"seed"`
		Total            int     `json:"total"`
		HeavySeeds       int     `json:"heavy_seeds"`
		InlineEvery      int     `json:"inline_every"`
		InlineHeavyCount int     `json:"inline_heavy_count"`
		SeedInterval     float64 `json:"seed_interval"`
		BurstStart       float64 `json:"burst_start"`
		BurstInterval    float64 `json:"burst_interval"`
		Jitter           float64 `json:"jitter"`
		InlineExtraGap   float64 `json:"inline_extra_gap"`
	} `json:"options"`
	Requests [][]any `json:"requests"`
}

func TestReferenceMatchesPythonGenerator(t *testing.T) {
	b, err := os.ReadFile("testdata/reference_python.json")
	if err != nil {
		t.Fatal(err)
	}
	var sets []pythonSet
	if err := json.Unmarshal(b, &sets); err != nil {
		t.Fatal(err)
	}
	if len(sets) != 5 {
		t.Fatalf("%d flag sets in testdata, want 5", len(sets))
	}
	for _, set := range sets {
		t.Run(set.Name, func(t *testing.T) {
			po := set.Options
			o := DefaultReference()
			o.Seed, o.Total, o.HeavySeeds, o.InlineEvery, o.InlineHeavyCount = po.Seed, po.Total, po.HeavySeeds, po.InlineEvery, po.InlineHeavyCount
			o.SeedInterval, o.BurstStart, o.BurstInterval, o.Jitter, o.InlineExtraGap = po.SeedInterval, po.BurstStart, po.BurstInterval, po.Jitter, po.InlineExtraGap
			w, err := Reference(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Validate(); err != nil {
				t.Fatal(err)
			}
			if len(w.Requests) != len(set.Requests) {
				t.Fatalf("%d requests, Python built %d", len(w.Requests), len(set.Requests))
			}
			for i, want := range set.Requests {
				got := w.Requests[i]
				id, isl, osl := want[0].(string), int(want[1].(float64)), int(want[2].(float64))
				at, err := strconv.ParseFloat(want[3].(string), 64)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte(got.Prompt))
				if got.ID != id || got.ISLWords != isl || got.MaxTokens != osl || got.At != seconds(at) {
					t.Fatalf("request %d = %s isl=%d osl=%d at=%v, Python: %s isl=%d osl=%d at=%v", i, got.ID, got.ISLWords, got.MaxTokens, got.At, id, isl, osl, seconds(at))
				}
				if h, n := hex.EncodeToString(sum[:])[:16], int(want[5].(float64)); h != want[4].(string) || len(got.Prompt) != n {
					t.Fatalf("request %s: prompt sha %s (%d chars), Python %s (%d chars); prompt starts %q", id, h, len(got.Prompt), want[4], n, got.Prompt[:min(60, len(got.Prompt))])
				}
				if k := kindOf(id); got.Kind != k {
					t.Fatalf("request %s: kind %s, want %s", id, got.Kind, k)
				}
			}
		})
	}
}

func kindOf(id string) string {
	switch {
	case strings.HasPrefix(id, "S"):
		return KindHeavy
	case strings.HasPrefix(id, "I"):
		return KindInlineHeavy
	case strings.HasSuffix(id, "_SHORT"):
		return KindShort
	}
	return KindMedium
}

// The reference command's mix, as reference/000 describes it: 800
// requests, 400 heavy seeds at time 0 (100 of each heavy spec, the fourth
// one the super-heavy), 16 inline heavies, 192 short and 192 medium.
func TestReferenceCommandMix(t *testing.T) {
	w, err := Reference(ReferenceCommand())
	if err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	if len(w.Requests) != 800 || c[KindHeavy] != 400 || c[KindInlineHeavy] != 16 || c[KindShort] != 192 || c[KindMedium] != 192 {
		t.Fatalf("counts %v of %d", c, len(w.Requests))
	}
	perSpec := map[[2]int]int{}
	for _, r := range w.Requests[:400] {
		if r.At != 0 {
			t.Fatalf("seed %s at %v, want 0", r.ID, r.At)
		}
		perSpec[[2]int{r.ISLWords, r.MaxTokens}]++
	}
	for _, s := range heavySpecs {
		if perSpec[s] != 100 {
			t.Fatalf("heavy spec %v: %d seeds, want 100", s, perSpec[s])
		}
	}
	if d := w.Duration().Seconds(); d < 200 || d > 220 {
		t.Fatalf("burst ends at %.1fs; 400 requests 0.5s±0.5s apart plus 16 gaps of 0.5s from 5s should end near 213s", d)
	}
	if !strings.HasPrefix(w.Summary[0], "[Workload] workers=4 total=800 | seed_heavy=400, inline_heavy=16, nonheavy=384 (short=192, med=192)") {
		t.Fatalf("summary %q", w.Summary[0])
	}
}

func TestReferenceOptionErrorsNameTheFlag(t *testing.T) {
	o := DefaultReference()
	o.InlineEvery, o.Jitter = -1, -0.1
	_, err := Reference(o)
	if err == nil || !strings.Contains(err.Error(), "--inline-every") || !strings.Contains(err.Error(), "--jitter") {
		t.Fatalf("err = %v", err)
	}
}

func TestReferenceIsDeterministicAndSeeded(t *testing.T) {
	o := DefaultReference()
	o.Total = 120
	a, _ := Reference(o)
	b, _ := Reference(o)
	o.Seed = 43
	c, _ := Reference(o)
	same, differs := true, false
	for i := range a.Requests {
		same = same && a.Requests[i].At == b.Requests[i].At && a.Requests[i].Prompt == b.Requests[i].Prompt
		differs = differs || a.Requests[i].ISLWords != c.Requests[i].ISLWords || a.Requests[i].At != c.Requests[i].At
	}
	if !same || !differs {
		t.Fatalf("same options same workload: %v; another seed another workload: %v", same, differs)
	}
}

func TestSharedPrefixConversationsGrowFromTheirSystemPrompt(t *testing.T) {
	o := DefaultSharedPrefix()
	o.Customers, o.Turns = 5, 3
	w, err := SharedPrefix(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Validate(); err != nil || len(w.Requests) != 15 {
		t.Fatalf("%d requests, %v", len(w.Requests), err)
	}
	for c := range 5 {
		t1, t2, t3 := w.Requests[3*c], w.Requests[3*c+1], w.Requests[3*c+2]
		// each turn's prompt extends the previous one's (plus its answer)
		if !strings.HasPrefix(t2.Prompt, t1.Prompt) || !strings.HasPrefix(t3.Prompt, t2.Prompt) || t1.Kind != KindFirstTurn || t2.Kind != KindFollowUp {
			t.Fatalf("customer %d: turns do not share their prefix", c)
		}
		if len(t1.Prompt) < 4*o.SystemTokens || t2.At-t1.At != o.ThinkTime {
			t.Fatalf("customer %d: prompt of %d chars, turns %v apart", c, len(t1.Prompt), t2.At-t1.At)
		}
		if c > 0 && strings.HasPrefix(t1.Prompt[:200], w.Requests[0].Prompt[:200]) {
			t.Fatal("two customers share a system prompt")
		}
	}
	o.PreambleTokens = 500
	pre, err := SharedPrefix(o)
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c < 5; c++ {
		a, b := pre.Requests[0].Prompt, pre.Requests[3*c].Prompt
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		if n < 4*o.PreambleTokens || n > 4*o.PreambleTokens+200 {
			t.Fatalf("customers 0 and %d share %d characters, want the %d-token preamble", c, n, o.PreambleTokens)
		}
	}
	o.PreambleTokens = 0
	again, _ := SharedPrefix(o)
	if again.Requests[7].Prompt != w.Requests[7].Prompt || again.Requests[7].At != w.Requests[7].At {
		t.Fatal("not deterministic")
	}
	o.Rate = 0
	if _, err := SharedPrefix(o); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("rate 0: %v", err)
	}
}

func TestSteadyArrivesAtItsRate(t *testing.T) {
	w, err := Steady(SteadyOptions{Requests: 2000, Rate: 5, PromptTokens: 40, MaxTokens: 10, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	rate := float64(len(w.Requests)) / w.Duration().Seconds()
	if rate < 4.5 || rate > 5.5 {
		t.Fatalf("%.2f requests/s, want about 5", rate)
	}
	if _, err := Steady(SteadyOptions{Requests: 1, Rate: 0, PromptTokens: 1, MaxTokens: 1}); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("rate 0: %v", err)
	}
}
