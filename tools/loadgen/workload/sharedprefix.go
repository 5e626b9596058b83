package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// SharedPrefixOptions shape a multi-customer chat workload in the manner
// of llm-d's "150 customers x 6k tokens" test: every customer has a long
// system prompt of its own, and its conversation's turns resend it with
// the turns so far, so a pod that served a customer holds most of its next
// prompt in its prefix cache.
type SharedPrefixOptions struct {
	// Customers is how many customers converse.
	Customers int
	// PreambleTokens is the length of a preamble every customer's system
	// prompt starts with (an agent's shared instructions and tool catalog),
	// in tokens; 0 for none.
	PreambleTokens int
	// SystemTokens is the length of each customer's system prompt, in
	// tokens (about 4 characters each).
	SystemTokens int
	// Turns is how many requests each conversation makes.
	Turns int
	// QuestionTokens and AnswerTokens size each turn; AnswerTokens is the
	// request's max_tokens.
	QuestionTokens, AnswerTokens int
	// Rate is how many conversations start per second (Poisson).
	Rate float64
	// ThinkTime is the time between a conversation's turns.
	ThinkTime time.Duration
	Seed      int64
}

// DefaultSharedPrefix scales llm-d's test to one machine: 64 customers
// with 6000-token system prompts, 5 turns each.
func DefaultSharedPrefix() SharedPrefixOptions {
	return SharedPrefixOptions{Customers: 64, SystemTokens: 6000, Turns: 5, QuestionTokens: 40, AnswerTokens: 64, Rate: 2, ThinkTime: 6 * time.Second, Seed: 1}
}

// Kinds of the shared-prefix workload.
const (
	KindFirstTurn = "FIRST"
	KindFollowUp  = "FOLLOW_UP"
)

// Validate checks the options.
func (o SharedPrefixOptions) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Customers > 0, "customers: must be positive (got %d)", o.Customers)
	check(o.SystemTokens >= 0, "system tokens: must not be negative (got %d)", o.SystemTokens)
	check(o.PreambleTokens >= 0, "preamble tokens: must not be negative (got %d)", o.PreambleTokens)
	check(o.Turns > 0, "turns: must be positive (got %d)", o.Turns)
	check(o.QuestionTokens > 0 && o.AnswerTokens > 0, "question and answer tokens: must be positive")
	check(o.Rate > 0 && !math.IsInf(o.Rate, 0), "rate: must be positive (got %v)", o.Rate)
	check(o.ThinkTime >= 0, "think time: must not be negative (got %v)", o.ThinkTime)
	return errors.Join(errs...)
}

// SharedPrefix builds the workload, deterministically from the seed.
func SharedPrefix(o SharedPrefixOptions) (*Workload, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	w := &Workload{Name: "shared-prefix"}
	start := 0.0
	preamble := ""
	if o.PreambleTokens > 0 {
		preamble = text(rng, "You are a support agent of the platform. Shared instructions and tool catalog follow.", o.PreambleTokens) + "\n"
	}
	for c := range o.Customers {
		start += rng.ExpFloat64() / o.Rate
		var convo strings.Builder
		convo.WriteString(preamble)
		convo.WriteString(text(rng, fmt.Sprintf("You are the support assistant of customer %d. Policies and manuals follow.", c), o.SystemTokens))
		for turn := range o.Turns {
			convo.WriteString("\nUser: ")
			convo.WriteString(text(rng, fmt.Sprintf("Question %d of customer %d:", turn+1, c), o.QuestionTokens))
			convo.WriteString("\nAssistant:")
			kind := KindFollowUp
			if turn == 0 {
				kind = KindFirstTurn
			}
			at := start + float64(turn)*o.ThinkTime.Seconds()
			w.Requests = append(w.Requests, Request{
				ID: fmt.Sprintf("C%03d_T%d", c, turn+1), Kind: kind, At: seconds(at),
				ISLWords: (o.PreambleTokens + o.SystemTokens + (turn+1)*(o.QuestionTokens+o.AnswerTokens)) / 4, MaxTokens: o.AnswerTokens, Prompt: convo.String(),
			})
			// the next turn resends this one with an answer (the model's
			// real answer is not known in advance; any text of its length
			// keeps the prompt's shape)
			convo.WriteString(" ")
			convo.WriteString(text(rng, "", o.AnswerTokens))
		}
	}
	w.Summary = append(w.Summary, fmt.Sprintf("[Workload] shared-prefix: %d customers x %d turns, %d-token system prompts after a %d-token preamble common to all, %.1f conversations/s, %v between turns",
		o.Customers, o.Turns, o.SystemTokens, o.PreambleTokens, o.Rate, o.ThinkTime))
	return w, nil
}

// words are drawn to fill prompts.
var words = strings.Fields(`account refund shipping warranty invoice routing cluster policy manual device
firmware update password reset billing address subscription renewal upgrade downgrade support ticket
escalation priority network latency throughput region replica capacity storage backup restore audit`)

// text is a header followed by random words, about tokens*4 characters.
func text(rng *rand.Rand, header string, tokens int) string {
	var b strings.Builder
	b.WriteString(header)
	for b.Len() < tokens*4 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}
