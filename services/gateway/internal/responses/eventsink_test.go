package responses

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
)

// refusingLog is a store whose event log refuses every append, as one
// that is away does.
type refusingLog struct {
	responsesv1.ResponsesStoreClient
	tries int
}

func (r *refusingLog) AppendEvents(context.Context, *responsesv1.AppendEventsRequest, ...grpc.CallOption) (*responsesv1.AppendEventsResponse, error) {
	r.tries++
	return nil, status.Error(codes.Unavailable, "the store is away")
}

// A run whose events the store does not take holds them for the next
// try, up to maxPendingEventBytes: past it the sink refuses the write,
// which stops the run, instead of holding the rest of the answer.
func TestEventSinkBoundsWhatTheStoreHasNotTaken(t *testing.T) {
	store := &refusingLog{}
	h := &Handler{o: Options{Store: store, StoreTimeout: time.Second}}
	sink := newEventSink(context.Background(), h, "resp_1", "token", 0)
	event := make([]byte, 64<<10)
	written := 0
	var err error
	for range 2 * maxPendingEventBytes / len(event) {
		if _, err = sink.Write(event); err != nil {
			break
		}
		written += len(event)
		sink.flush() // refused: the events stay pending
	}
	if !errors.Is(err, errEventsBehind) {
		t.Fatalf("after %d bytes the store refused: %v", written, err)
	}
	if written > maxPendingEventBytes || sink.pendingBytes != written || store.tries == 0 || sink.err == nil {
		t.Fatalf("held %d bytes (%d counted) of a %d bound after %d refused appends (err %v)", written, sink.pendingBytes, maxPendingEventBytes, store.tries, sink.err)
	}
	sink.committed(len(sink.pending)) // the completion took them
	if _, err := sink.Write(event); err != nil || sink.pendingBytes != len(event) {
		t.Fatalf("a write once the events landed: %v, %d bytes held", err, sink.pendingBytes)
	}
}
