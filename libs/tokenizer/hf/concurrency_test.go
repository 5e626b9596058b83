package hf

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// Many goroutines encoding at once (sharing the word cache) get the ids
// one goroutine gets alone. Run with -race.
func TestConcurrentEncode(t *testing.T) {
	corpus := readCorpus(t)
	toks := map[string]*Tokenizer{"tiny": tiny(t, nil)}
	switch tok, err := tryLoadReal(npmtokenizers.Qwen3); {
	case errors.Is(err, npmtokenizers.ErrUnreachable):
		t.Logf("qwen3 not tested: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		toks["qwen3"] = tok
	}
	for name, tok := range toks {
		t.Run(name, func(t *testing.T) {
			want := make([][]uint32, len(corpus))
			for i, text := range corpus {
				want[i] = tok.Encode(nil, text)
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for k := range len(corpus) {
						i := (k*7 + g*13) % len(corpus)
						if got := tok.Encode(nil, corpus[i]); !slices.Equal(got, want[i]) {
							t.Errorf("goroutine %d, %q: %v, want %v", g, corpus[i], got, want[i])
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
