package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// streamedEvents is what a client read of a Responses stream: every
// event's type and sequence number, the text of its deltas, the response
// id, and the response of its final event.
type streamedEvents struct {
	types []string
	seqs  []int64
	text  strings.Builder
	id    string
	final responses.Response
}

// read reads s; stop > 0 ends the read after that many events.
func (e *streamedEvents) read(s *ssestream.Stream[responses.ResponseStreamEventUnion], stop int) error {
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		e.types = append(e.types, ev.Type)
		e.seqs = append(e.seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.created":
			e.id = ev.Response.ID
		case "response.output_text.delta":
			e.text.WriteString(ev.Delta)
		case "response.completed", "response.incomplete", "response.failed":
			e.final = ev.Response
		}
		if stop > 0 && len(e.types) == stop {
			return nil
		}
	}
	return s.Err()
}

func (e *streamedEvents) last() int64 { return e.seqs[len(e.seqs)-1] }

// numberedFrom checks that the sequence numbers run on from first.
func (e *streamedEvents) numberedFrom(t *testing.T, what string, first int64) {
	t.Helper()
	for i, seq := range e.seqs {
		if seq != first+int64(i) {
			t.Fatalf("%s: event %d (%s) is number %d, want %d; all: %v", what, i, e.types[i], seq, first+int64(i), e.seqs)
		}
	}
}

// A background response created with stream: true streams as its run
// goes; a client that drops the stream and comes back with
// starting_after gets the rest, numbered on, and a client reading it
// afterwards gets the same events from the store. A gateway killed in the
// middle of a run leaves the events sent so far readable after its
// restart, and the response ends failed (its events cannot be taken back)
// rather than restarting behind the client's back.
func TestBackgroundStreamLive(t *testing.T) {
	s := startStack(t, "--pods", "1", "--slow-pods", "0", "--speed", "1")
	client := openai.NewClient(option.WithBaseURL(s.url("/v1/")), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	params := responses.ResponseNewParams{Model: s.state.Model, Background: openai.Bool(true), MaxOutputTokens: openai.Int(40),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about rivers.")}}

	live := &streamedEvents{}
	sctx, drop := context.WithCancel(ctx)
	err := live.read(client.Responses.NewStreaming(sctx, params), 6)
	drop()
	if err != nil || live.id == "" {
		t.Fatalf("the live stream: %v (%v)", err, live.types)
	}
	if got := strings.Join(live.types, " "); got != "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta" {
		t.Fatalf("the live stream began %s", got)
	}
	live.numberedFrom(t, "live", 0)
	rest := &streamedEvents{}
	if err := rest.read(client.Responses.GetStreaming(ctx, live.id, responses.ResponseGetParams{StartingAfter: openai.Int(live.last())}), 0); err != nil {
		t.Fatal(err)
	}
	rest.numberedFrom(t, "resumed", live.last()+1)
	done, err := client.Responses.Get(ctx, live.id, responses.ResponseGetParams{})
	if err != nil || (done.Status != responses.ResponseStatusCompleted && done.Status != responses.ResponseStatusIncomplete) {
		t.Fatalf("after the stream: %s %v", done.RawJSON(), err)
	}
	if text := live.text.String() + rest.text.String(); text != done.OutputText() || rest.final.OutputText() != text || text == "" {
		t.Fatalf("streamed %q then %q; the response holds %q", live.text.String(), rest.text.String(), done.OutputText())
	}
	whole := &streamedEvents{}
	if err := whole.read(client.Responses.GetStreaming(ctx, live.id, responses.ResponseGetParams{}), 0); err != nil {
		t.Fatal(err)
	}
	whole.numberedFrom(t, "read again", 0)
	if len(whole.types) != len(live.types)+len(rest.types) || whole.text.String() != done.OutputText() {
		t.Fatalf("read again: %d events, %q; want %d and %q", len(whole.types), whole.text.String(), len(live.types)+len(rest.types), done.OutputText())
	}

	// the gateway running it is killed mid-stream
	params.MaxOutputTokens = openai.Int(2000)
	before := &streamedEvents{}
	sctx, drop = context.WithCancel(ctx)
	err = before.read(client.Responses.NewStreaming(sctx, params), 8)
	drop()
	if err != nil || before.id == "" {
		t.Fatalf("the second stream: %v (%v)", err, before.types)
	}
	st := readState(t, s.stateFile)
	gw, ok := st.Child("gateway")
	if !ok || gw.Role != stackstate.RoleGateway {
		t.Fatalf("no gateway in the state file: %+v", st.Children)
	}
	if err := syscall.Kill(gw.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the gateway restarted", func() bool {
		st, err := stackstate.Read(s.stateFile)
		if err != nil {
			return false
		}
		c, _ := st.Child("gateway")
		return c.Restarts == gw.Restarts+1 && c.Ready()
	})
	after := &streamedEvents{}
	if err := after.read(client.Responses.GetStreaming(ctx, before.id, responses.ResponseGetParams{StartingAfter: openai.Int(before.last())}), 0); err != nil {
		t.Fatal(err)
	}
	after.numberedFrom(t, "after the restart", before.last()+1)
	if after.types[len(after.types)-1] != "response.failed" || !strings.Contains(after.final.Error.Message, "interrupted") {
		t.Fatalf("after the restart: %v, final %s", after.types, after.final.RawJSON())
	}
	got, err := client.Responses.Get(ctx, before.id, responses.ResponseGetParams{})
	if err != nil || got.Status != responses.ResponseStatusFailed {
		t.Fatalf("the interrupted response: %s %v", got.RawJSON(), err)
	}
	t.Logf("interrupted after %d events streamed live and %d more before the kill", len(before.types), len(after.types)-1)
}
