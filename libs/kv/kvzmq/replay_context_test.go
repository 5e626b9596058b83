package kvzmq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A replay endpoint that is gone holds a caller for the whole timeout;
// with a context, the caller is free within milliseconds of cancelling.
func TestReplayContextEndsWithItsContext(t *testing.T) {
	gone := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)) // nothing listens
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := ReplayContext(ctx, gone, 0, time.Minute)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if took > 300*time.Millisecond {
		t.Fatalf("the replay ended %v after it started, 50ms after its context was cancelled", took)
	}
	t.Logf("cancelled replay returned after %v", took)

	start = time.Now()
	if _, err := ReplayContext(context.Background(), gone, 0, 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("error %v, want ErrTimeout", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > time.Second {
		t.Fatalf("a 100ms replay timeout took %v", took)
	}
}

// ReplayContext answers as Replay does: every buffered batch from start,
// in order, in both framings.
func TestReplayContextReplays(t *testing.T) {
	for _, framing := range []ReplayFraming{FramingTopic, FramingLegacy} {
		port := freePort(t)
		p, err := NewPublisher(PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), ReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", port), Topic: "kv@pod@m", Framing: framing})
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(5) {
			if _, err := p.Publish(payload(i)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ReplayContext(context.Background(), fmt.Sprintf("tcp://127.0.0.1:%d", port), 2, 5*time.Second)
		_ = p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Seq != 2 || got[2].Seq != 4 || string(got[1].Payload) != string(payload(3)) {
			t.Fatalf("framing %d: replayed %+v", framing, got)
		}
	}
}

// A replay holds at most its byte bound: past it, it ends with the
// batches that fit, in order, and ErrReplayTooLarge.
func TestReplayContextBoundsBytes(t *testing.T) {
	prev := maxReplayBytes
	maxReplayBytes = 10 << 10
	defer func() { maxReplayBytes = prev }()
	port := freePort(t)
	p, err := NewPublisher(PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), ReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", port), Topic: "kv@pod@m"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	batch := make([]byte, 1<<10)
	for range 50 {
		if _, err := p.Publish(batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReplayContext(context.Background(), fmt.Sprintf("tcp://127.0.0.1:%d", port), 0, 5*time.Second)
	if !errors.Is(err, ErrReplayTooLarge) {
		t.Fatalf("a 50 KiB replay over a 10 KiB bound: %d batches, %v", len(got), err)
	}
	if len(got) != 10 || got[0].Seq != 0 || got[9].Seq != 9 {
		t.Fatalf("replayed %d batches (%v ... ), want the first 10", len(got), got[0].Seq)
	}
}
