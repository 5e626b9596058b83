package openai

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// Observation is what a way in saw of one routed request: the completion
// event's timings and token counts are built from it.
type Observation struct {
	// PickedAt is when the decision was taken; End when the response
	// ended (or broke off).
	PickedAt, End time.Time
	// Streamed says the client asked for a stream.
	Streamed bool
	// PromptTokenIDs is how many token ids the prompt was given as (0: it
	// was text): its prompt tokens when the answer reports none.
	PromptTokenIDs int
	// Observed is what the response's Accountant saw (zero: no response
	// came).
	Observed
}

// Fill sets ev's duration, time to first token, token counts and time per
// output token. Token counts come from the response's usage; a stream
// without one counts its events, and a prompt of token ids counts them. Time per output token is measured on
// streams only: a non-streamed answer arrives at once at the end.
func (o Observation) Fill(ev *eventsv1.RequestCompleted) {
	ev.Duration = durationpb.New(o.End.Sub(o.PickedAt))
	if !o.FirstToken.IsZero() {
		ev.Ttft = durationpb.New(o.FirstToken.Sub(o.PickedAt))
	}
	completion := int64(o.Events)
	if o.HaveUsage {
		ev.PromptTokens, ev.CachedTokens, completion = o.Usage.PromptTokens, o.Usage.CachedTokens, o.Usage.CompletionTokens
	} else {
		ev.PromptTokens = int64(o.PromptTokenIDs)
	}
	if o.Streamed || o.HaveUsage {
		ev.CompletionTokens = completion
	}
	if o.Streamed && completion > 1 && !o.FirstToken.IsZero() {
		ev.Tpot = durationpb.New(o.End.Sub(o.FirstToken) / time.Duration(completion-1))
	}
}

// Outcome labels of metrics, by completion outcome.
const (
	OutcomeSuccess       = "success"
	OutcomeUpstreamError = "upstream_error"
	OutcomeCanceled      = "canceled"
	OutcomeFailed        = "failed"
)

// OutcomeLabel is a completion outcome's metric label.
func OutcomeLabel(o eventsv1.CompletionOutcome) string {
	switch o {
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS:
		return OutcomeSuccess
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR:
		return OutcomeUpstreamError
	case eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED:
		return OutcomeCanceled
	}
	return OutcomeFailed
}
