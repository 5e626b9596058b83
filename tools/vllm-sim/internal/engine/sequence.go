package engine

import (
	"sync"
	"time"

	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/vllm-sim/internal/blockhash"
)

// Finish reasons, as vLLM reports them.
const (
	FinishLength = "length"
	FinishStop   = "stop"
	FinishAbort  = "abort"
	FinishError  = "error"
)

// Request is what a client asks the engine to do.
type Request struct {
	ID string
	// Adapter is the LoRA adapter to serve the request with ("" = base model).
	Adapter string
	// Prompt is the tokenized prompt.
	Prompt []uint32
	// MaxTokens is the output limit the client set; 0 when it set none.
	MaxTokens int
	// Chat marks chat requests (their default output length differs).
	Chat bool
	// Seed determines the output tokens.
	Seed uint64
	// Output, when set, is the text the model writes, as tokens (a tool
	// call): the sequence generates these instead of tokens drawn from
	// Seed, and stops after the last (its finish reason "stop"), unless
	// MaxTokens or the context length cuts it short ("length").
	Output []uint32
	// Pooling marks a pooling model's request (an embedding, a score): its
	// prompt is prefilled, as a generating request's is, and it finishes
	// there, generating nothing (MaxTokens must be 0).
	Pooling bool
}

type seqState uint8

const (
	stateWaiting seqState = iota
	stateRunning
	stateDone
)

// Sequence is a request inside the engine. Readers follow its output
// through Progress and Updates; the engine owns the rest.
type Sequence struct {
	req          Request
	extra        []any // block hash extra keys (the LoRA name)
	loraID       int
	target       int // output tokens to produce
	finishReason string
	arrival      time.Duration
	// group is the request's sequences when it asked for several outputs
	// (nil for one); leader is the group's first sequence (nil for the
	// first itself).
	group  *group
	leader *Sequence

	// engine-owned
	state          seqState
	numComputed    int // tokens whose KV is computed
	generated      int
	blocks         []int32
	digests        []blockhash.Digest // full blocks so far
	stored         int                // leading blocks cached (stored here or taken from the cache)
	cachedTokens   int
	admittedBefore bool
	aborted        bool
	firstScheduled time.Duration
	firstToken     time.Duration
	lastToken      time.Duration
	// planned is the tokens the step being planned schedules for the
	// sequence (0 when it schedules none).
	planned int

	mu       sync.Mutex
	progress Progress
	updates  chan struct{}
}

// Progress is a sequence's output so far.
type Progress struct {
	// Generated output tokens so far.
	Generated int
	// Done is set once the sequence finished (or failed).
	Done bool
	// FinishReason is "length" or "stop" (or "abort"/"error" when Err is set).
	FinishReason string
	// Err is set when the engine dropped the sequence (a restart).
	Err error
	// PromptTokens and CachedTokens are the prompt's length and the part of
	// it served from the prefix cache.
	PromptTokens int
	CachedTokens int
	// TTFT is the simulated time to the first token.
	TTFT time.Duration
}

// ID returns the request id.
func (s *Sequence) ID() string { return s.req.ID }

// Seed returns the seed of the output tokens.
func (s *Sequence) Seed() uint64 { return s.req.Seed }

// OutputToken is the sequence's output token i (its Output, else the
// token Seed draws).
func (s *Sequence) OutputToken(i int) uint32 {
	if s.req.Output != nil {
		return s.req.Output[i]
	}
	return OutputToken(s.req.Seed, i)
}

// Target returns the number of output tokens the sequence will produce.
func (s *Sequence) Target() int { return s.target }

// Progress returns the current progress.
func (s *Sequence) Progress() Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}

// Updates is signalled (coalesced) whenever Progress changes.
func (s *Sequence) Updates() <-chan struct{} { return s.updates }

func (s *Sequence) update(f func(p *Progress)) {
	s.mu.Lock()
	f(&s.progress)
	s.mu.Unlock()
	select {
	case s.updates <- struct{}{}:
	default:
	}
}

// contextLen is the number of tokens whose KV the next generated token
// needs: the prompt and every token generated so far.
func (s *Sequence) contextLen() int { return len(s.req.Prompt) + s.generated }

// token returns the token at position pos of the prompt-plus-output text.
func (s *Sequence) token(pos int) uint32 {
	if pos < len(s.req.Prompt) {
		return s.req.Prompt[pos]
	}
	return s.OutputToken(pos - len(s.req.Prompt))
}

// tokens appends positions [from, to) to dst.
func (s *Sequence) tokens(dst []uint32, from, to int) []uint32 {
	if to <= len(s.req.Prompt) {
		return append(dst, s.req.Prompt[from:to]...)
	}
	for pos := from; pos < to; pos++ {
		dst = append(dst, s.token(pos))
	}
	return dst
}

// outputWords are the words generated text is made of. Each is at most
// three letters, so a word with its leading space is exactly one piece of
// the built-in tokenizer: the text a response returns tokenizes back to the
// output tokens the engine cached, and the next turn of a conversation hits
// them, as with a real model.
var outputWords = [...]string{
	"the", "of", "and", "to", "in", "a", "is", "it", "for", "as", "was", "be", "by", "on", "not", "he",
	"are", "or", "his", "at", "but", "an", "had", "you", "one", "all", "we", "can", "her", "has", "if", "so",
	"no", "key", "gpu", "cpu", "run", "map", "log", "job", "set", "get", "new", "old", "use", "way",
	"day", "out", "up", "who", "now", "see", "two", "how", "its", "our", "may", "any", "too", "yes",
	"why", "let", "put", "say", "she", "try", "own", "far", "big", "few", "end", "net", "bit", "tag",
	"row", "sum", "fit", "top", "low", "hot", "raw", "max", "min", "add", "mix", "fix", "ask", "act",
}

// OutputWords returns the words generated text is made of: each is one
// token of the built-in tokenizer alone (the first word of an output) and
// with the space before it (the others).
func OutputWords() []string { return append([]string(nil), outputWords[:]...) }

// outputTexts[0][w] is word w's text at the start of the output, [1][w]
// with the space before it.
var outputTexts = func() (texts [2][len(outputWords)]string) {
	for w, word := range outputWords {
		texts[0][w], texts[1][w] = word, " "+word
	}
	return texts
}()

// outputIDs[0][w] is word w's token at the start of the output, [1][w]
// with the space that precedes it elsewhere.
var outputIDs = func() (ids [2][len(outputWords)]uint32) {
	for w, word := range outputWords {
		for lead, text := range []string{word, " " + word} {
			t := tokenizer.Builtin{}.Encode(nil, text)
			if len(t) != 1 {
				panic("output word " + word + " is not one token")
			}
			ids[lead][w] = t[0]
		}
	}
	return ids
}()

func outputWord(seed uint64, i int) int {
	return int(splitmix64(seed+uint64(i)*0x9e3779b97f4a7c15) % uint64(len(outputWords)))
}

// OutputToken is the i-th output token of a sequence seeded with seed.
func OutputToken(seed uint64, i int) uint32 {
	lead := 0
	if i > 0 {
		lead = 1
	}
	return outputIDs[lead][outputWord(seed, i)]
}

// AppendOutputText appends the text of output token i of a sequence seeded
// with seed: its word, after a space unless it is the first.
func AppendOutputText(dst []byte, seed uint64, i int) []byte {
	return append(dst, OutputText(seed, i)...)
}

// OutputText is the text of output token i of a sequence seeded with seed
// (AppendOutputText's).
func OutputText(seed uint64, i int) string {
	lead := 0
	if i > 0 {
		lead = 1
	}
	return outputTexts[lead][outputWord(seed, i)]
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
