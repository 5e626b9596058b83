package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// Centralized mode: pods connect to the indexer's bound socket; their
// topics name them by registry name or by address.
func TestCentralIngestsConnectingPods(t *testing.T) {
	port := freePort(t)
	sink := newGatedSink()
	close(sink.gate)
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	c := mg.NewCentral(fmt.Sprintf("tcp://127.0.0.1:%d", port), "")
	c.SetPods([]Target{{Pod: "pod-a", Model: model}, {Pod: "pod-b", Model: model}}, map[string][]string{"pod-b": {"10.1.2.3", "10.1.2.3:8000"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	bound := make(chan error, 1)
	go func() { done <- c.Run(ctx, bound) }()
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	pubs := map[string]*kvzmq.Publisher{}
	for _, topic := range []string{"kv@pod-a@m", "kv@10.1.2.3:8000@m", "kv@stranger@m"} {
		p, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", port), Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pubs[topic] = p
	}
	time.Sleep(200 * time.Millisecond) // connections and subscriptions settle
	payloads := workload(20, 3)
	for _, p := range payloads {
		for _, pub := range pubs {
			if _, err := pub.Publish(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		per := map[string]int{}
		for _, b := range sink.batches() {
			per[b.GetPod()]++
		}
		if per["pod-a"] == 20 && per["pod-b"] == 20 {
			if len(per) != 2 {
				t.Fatalf("batches of an unregistered pod went on: %v", per)
			}
			break
		}
		select {
		case <-deadline:
			t.Fatalf("batches per pod %v, want 20 each of pod-a and pod-b", per)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, b := range sink.batches() {
		if b.GetClearPod() != (b.GetSeq() == 0) {
			t.Fatalf("batch %d of %s: clear %v", b.GetSeq(), b.GetPod(), b.GetClearPod())
		}
	}
}

// A pod that connects loses batches to a slow indexer at the end of a
// burst; the quiet pod's replay socket fills the tail.
func TestCentralRepairsALostTail(t *testing.T) {
	port, replay := freePort(t), freePort(t)
	sink := newGatedSink()
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: sink, HWM: 4, PodQueue: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	c := mg.NewCentral(fmt.Sprintf("tcp://127.0.0.1:%d", port), "")
	c.SetPods([]Target{{Pod: "pod-a", Model: model, Replay: fmt.Sprintf("tcp://127.0.0.1:%d", replay)}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, bound := make(chan error, 1), make(chan error, 1)
	go func() { done <- c.Run(ctx, bound) }()
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	pub, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", port), ReplayEndpoint: fmt.Sprintf("tcp://*:%d", replay), Topic: "kv@pod-a@m", HWM: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	time.Sleep(200 * time.Millisecond)
	payloads := workload(400, 5)
	for _, p := range payloads {
		if _, err := pub.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	sink.mu.Lock()
	close(sink.gate) // the indexer was stuck while the burst went out
	sink.mu.Unlock()
	deadline := time.After(15 * time.Second)
	for {
		got := sink.batches()
		if n := len(got); n > 0 && got[n-1].GetSeq() == uint64(len(payloads)-1) {
			for i, b := range got {
				if b.GetSeq() != uint64(i) {
					t.Fatalf("batch %d has seq %d", i, b.GetSeq())
				}
			}
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%d batches handed on, not up to seq %d", len(sink.batches()), len(payloads)-1)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
