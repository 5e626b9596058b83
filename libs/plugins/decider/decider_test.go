package decider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/decider"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func newPrefixBased(t *testing.T, nonCached int) scheduling.PrefillDecider {
	t.Helper()
	return schedulingtest.New[scheduling.PrefillDecider](t, schedulingtest.NewHandle(), decider.PrefixBasedType, "",
		fmt.Sprintf(`{"nonCachedTokens": %d}`, nonCached))
}

// tokens returns a request whose tokenized prompt has n tokens.
func tokens(n int) *scheduling.Request {
	req := schedulingtest.Completion("r", "m", "short")
	req.TokenIDs = make([]uint32, n)
	for i := range req.TokenIDs {
		req.TokenIDs[i] = uint32(i + 1)
	}
	return req
}

// stateWithMatch is a cycle state holding, under scheduling.PrefixMatchKey,
// a prefix match with the given block size and matched blocks per endpoint.
func stateWithMatch(blockSize int, matched map[string]int) *scheduling.CycleState {
	cs := schedulingtest.CycleState(1)
	m := &scheduling.PrefixMatch{BlockSizeTokens: blockSize, TotalBlocks: 10}
	for name, blocks := range matched {
		m.Set(name, scheduling.NameHash(name), blocks)
	}
	cs.Write(scheduling.PrefixMatchKey, m)
	return cs
}

func target(ep *scheduling.Endpoint) scheduling.Target {
	return scheduling.Target{Endpoint: ep, Port: ep.Port}
}

func TestDecidersRegistered(t *testing.T) {
	h := schedulingtest.NewHandle()
	if _, ok := schedulingtest.New[scheduling.Plugin](t, h, decider.PrefixBasedType, "", "").(scheduling.PrefillDecider); !ok {
		t.Errorf("%s is not a prefill decider", decider.PrefixBasedType)
	}
	if _, ok := schedulingtest.New[scheduling.Plugin](t, h, decider.AlwaysPDType, "", "").(scheduling.PrefillDecider); !ok {
		t.Errorf("%s is not a prefill decider", decider.AlwaysPDType)
	}
	if _, ok := schedulingtest.New[scheduling.Plugin](t, h, decider.MultimodalType, "", "").(scheduling.EncodeDecider); !ok {
		t.Errorf("%s is not an encode decider", decider.MultimodalType)
	}
	for _, typ := range []string{decider.PrefixBasedType, decider.AlwaysPDType, decider.MultimodalType} {
		p := schedulingtest.New[scheduling.Plugin](t, h, typ, "custom-"+typ, "")
		if got := p.TypedName(); got.Type != typ || got.Name != "custom-"+typ {
			t.Errorf("TypedName() = %+v, want type %s name custom-%s", got, typ, typ)
		}
	}
}

func TestPrefixBasedDefaultNeverDisaggregates(t *testing.T) {
	d := schedulingtest.New[scheduling.PrefillDecider](t, schedulingtest.NewHandle(), decider.PrefixBasedType, "", "")
	eps := schedulingtest.Endpoints(2)
	long := schedulingtest.Completion("r", "m", strings.Repeat("x", 100000))
	for _, req := range []*scheduling.Request{long, tokens(100000)} {
		if d.ShouldPrefill(context.Background(), schedulingtest.CycleState(1), req, target(eps[1])) {
			t.Errorf("nonCachedTokens unset (0): ShouldPrefill = true, want never")
		}
	}
	rep, ok := d.(scheduling.ParameterReporter)
	if !ok {
		t.Fatalf("%T does not report its parameters", d)
	}
	if got, ok := rep.Parameters().(decider.PrefixBasedParams); !ok || got.NonCachedTokens != 0 {
		t.Errorf("Parameters() = %#v, want nonCachedTokens 0", rep.Parameters())
	}
}

func TestPrefixBasedExplicitZeroNeverDisaggregates(t *testing.T) {
	d := newPrefixBased(t, 0)
	eps := schedulingtest.Endpoints(1)
	if d.ShouldPrefill(context.Background(), schedulingtest.CycleState(1), tokens(5000), target(eps[0])) {
		t.Errorf("nonCachedTokens 0: ShouldPrefill = true, want never")
	}
}

func TestPrefixBasedTokenIDsBoundary(t *testing.T) {
	eps := schedulingtest.Endpoints(2)
	req := tokens(100)
	for _, c := range []struct {
		n    int
		want bool
	}{{1, true}, {99, true}, {100, true}, {101, false}, {1000, false}} {
		d := newPrefixBased(t, c.n)
		got := d.ShouldPrefill(context.Background(), schedulingtest.CycleState(1), req, target(eps[0]))
		if got != c.want {
			t.Errorf("100 prompt tokens, nothing cached, nonCachedTokens %d: ShouldPrefill = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestPrefixBasedCachedTokensFromPrefixMatch(t *testing.T) {
	eps := schedulingtest.Endpoints(2) // pod-0, pod-1
	req := tokens(100)
	matched := map[string]int{"pod-0": 3} // 3 x 16 = 48 cached tokens on pod-0
	for _, c := range []struct {
		n      int
		decode int
		want   bool
	}{
		{52, 0, true},   // 100 - 48 = 52 >= 52
		{53, 0, false},  // 52 < 53
		{53, 1, true},   // pod-1 caches nothing: 100 >= 53
		{100, 1, true},  // 100 >= 100
		{101, 1, false}, // 100 < 101
	} {
		d := newPrefixBased(t, c.n)
		got := d.ShouldPrefill(context.Background(), stateWithMatch(16, matched), req, target(eps[c.decode]))
		if got != c.want {
			t.Errorf("nonCachedTokens %d, decode %s: ShouldPrefill = %v, want %v", c.n, eps[c.decode].Name, got, c.want)
		}
	}
}

func TestPrefixBasedCachedTokensUseBlockSize(t *testing.T) {
	eps := schedulingtest.Endpoints(1)
	req := tokens(200)
	matched := map[string]int{"pod-0": 3} // 3 x 32 = 96 cached tokens
	if !newPrefixBased(t, 104).ShouldPrefill(context.Background(), stateWithMatch(32, matched), req, target(eps[0])) {
		t.Errorf("200 - 96 = 104 >= 104: ShouldPrefill = false, want true")
	}
	if newPrefixBased(t, 105).ShouldPrefill(context.Background(), stateWithMatch(32, matched), req, target(eps[0])) {
		t.Errorf("200 - 96 = 104 < 105: ShouldPrefill = true, want false")
	}
}

func TestPrefixBasedFullyCachedNotDisaggregated(t *testing.T) {
	eps := schedulingtest.Endpoints(1)
	req := tokens(64)
	cs := stateWithMatch(16, map[string]int{"pod-0": 4})
	if newPrefixBased(t, 1).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("every prompt token cached: ShouldPrefill = true, want false")
	}
}

func TestPrefixBasedPromptCharsWithoutTokens(t *testing.T) {
	eps := schedulingtest.Endpoints(1)
	// 403 characters -> 100 estimated tokens (4 characters per token)
	req := schedulingtest.Completion("r", "m", strings.Repeat("a", 403))
	if len(req.PrefixText())/4 != 100 {
		t.Fatalf("test setup: prefix text of %d bytes", len(req.PrefixText()))
	}
	cs := schedulingtest.CycleState(1)
	if !newPrefixBased(t, 100).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("100 estimated tokens, nonCachedTokens 100: ShouldPrefill = false, want true")
	}
	if newPrefixBased(t, 101).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("100 estimated tokens, nonCachedTokens 101: ShouldPrefill = true, want false")
	}
	// with 3 blocks of 16 cached: 100 - 48 = 52
	matched := stateWithMatch(16, map[string]int{"pod-0": 3})
	if !newPrefixBased(t, 52).ShouldPrefill(context.Background(), matched, req, target(eps[0])) {
		t.Errorf("52 non-cached estimated tokens, nonCachedTokens 52: ShouldPrefill = false, want true")
	}
	if newPrefixBased(t, 53).ShouldPrefill(context.Background(), matched, req, target(eps[0])) {
		t.Errorf("52 non-cached estimated tokens, nonCachedTokens 53: ShouldPrefill = true, want false")
	}
}

func TestPrefixBasedChatPromptCharsAreMessageJSON(t *testing.T) {
	eps := schedulingtest.Endpoints(1)
	req := schedulingtest.Chat("r", "m", strings.Repeat("q", 200), strings.Repeat("a", 200))
	n := len(req.PrefixText()) / 4 // the JSON of the messages, 4 characters per token
	if n <= 100 {
		t.Fatalf("test setup: chat prefix text gives only %d tokens", n)
	}
	cs := schedulingtest.CycleState(1)
	if !newPrefixBased(t, n).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("chat with %d estimated tokens, nonCachedTokens %d: ShouldPrefill = false, want true", n, n)
	}
	if newPrefixBased(t, n+1).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("chat with %d estimated tokens, nonCachedTokens %d: ShouldPrefill = true, want false", n, n+1)
	}
}

func TestPrefixBasedTokenIDsTakePrecedence(t *testing.T) {
	eps := schedulingtest.Endpoints(1)
	req := schedulingtest.Completion("r", "m", strings.Repeat("x", 4000)) // 1000 estimated from text
	req.TokenIDs = make([]uint32, 10)
	cs := schedulingtest.CycleState(1)
	if !newPrefixBased(t, 10).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("10 prompt tokens, nonCachedTokens 10: ShouldPrefill = false, want true")
	}
	if newPrefixBased(t, 11).ShouldPrefill(context.Background(), cs, req, target(eps[0])) {
		t.Errorf("10 prompt tokens (text would estimate 1000), nonCachedTokens 11: ShouldPrefill = true, want false")
	}
}

func TestPrefixBasedInvalidParams(t *testing.T) {
	for _, params := range []string{`{"nonCachedTokens": -1}`, `{"nonCachedTokens": "many"}`, `{"nonCachedTokens": 2.5}`} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), decider.PrefixBasedType, "", params)
		if err == nil {
			t.Errorf("%s: no error", params)
			continue
		}
		if !strings.Contains(err.Error(), "parameters.nonCachedTokens") {
			t.Errorf("%s: error %q does not name parameters.nonCachedTokens", params, err)
		}
	}
}

func TestAlwaysPD(t *testing.T) {
	d := schedulingtest.New[scheduling.PrefillDecider](t, schedulingtest.NewHandle(), decider.AlwaysPDType, "", "")
	eps := schedulingtest.Endpoints(2)
	cs := stateWithMatch(16, map[string]int{"pod-0": 100})
	for _, req := range []*scheduling.Request{
		schedulingtest.Completion("r", "m", ""),
		schedulingtest.Completion("r", "m", "hi"),
		schedulingtest.Chat("r", "m", "hello"),
		tokens(1),
	} {
		for _, ep := range eps {
			if !d.ShouldPrefill(context.Background(), cs, req, target(ep)) {
				t.Errorf("always-disagg-pd-decider: ShouldPrefill = false for %q on %s", req.PrefixText(), ep.Name)
			}
		}
	}
}

func TestMultimodal(t *testing.T) {
	d := schedulingtest.New[scheduling.EncodeDecider](t, schedulingtest.NewHandle(), decider.MultimodalType, "", "")
	withMedia := func(m openai.MediaKind, at int) *scheduling.Request {
		req := schedulingtest.Chat("r", "m", "describe this", "ok", "and this?")
		req.Body.Messages[at].Media = m
		return req
	}
	cases := []struct {
		name string
		req  *scheduling.Request
		want bool
	}{
		{"text chat", schedulingtest.Chat("r", "m", "hello", "hi"), false},
		{"completion", schedulingtest.Completion("r", "m", "an image of a cat"), false},
		{"empty chat", schedulingtest.Chat("r", "m"), false},
		{"image", withMedia(openai.MediaImage, 0), true},
		{"audio", withMedia(openai.MediaAudio, 2), true},
		{"video", withMedia(openai.MediaVideo, 1), true},
		{"image and audio", withMedia(openai.MediaImage|openai.MediaAudio, 2), true},
	}
	for _, c := range cases {
		if got := d.ShouldEncode(context.Background(), schedulingtest.CycleState(1), c.req); got != c.want {
			t.Errorf("%s: ShouldEncode = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMultimodalParsedContentBlocks(t *testing.T) {
	d := schedulingtest.New[scheduling.EncodeDecider](t, schedulingtest.NewHandle(), decider.MultimodalType, "", "")
	cases := []struct {
		body string
		want bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"plain"}]}`, false},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"plain"}]}]}`, false},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, true},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, true},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"http://x/v.mp4"}}]}]}`, true},
	}
	for _, c := range cases {
		req, err := schedulingtest.ParseRequest(openai.APIChatCompletions, []byte(c.body))
		if err != nil {
			t.Fatalf("ParseRequest(%s): %v", c.body, err)
		}
		if got := d.ShouldEncode(context.Background(), schedulingtest.CycleState(1), req); got != c.want {
			t.Errorf("%s: ShouldEncode = %v, want %v", c.body, got, c.want)
		}
	}
}
