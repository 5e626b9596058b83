package kvzmq

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func payload(i uint64) []byte { return []byte(fmt.Sprintf("batch-%d", i)) }

// publishUntilSubscribed publishes until the subscriber sees a message (the
// SUB may join after the first messages: ZeroMQ's slow-joiner behaviour)
// and returns the sequence number it saw first.
func publishUntilSubscribed(t *testing.T, p *Publisher, s *Subscriber) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		seq, err := p.Publish(payload(p.seq))
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.Recv(20 * time.Millisecond)
		if err == nil {
			if m.Seq > seq {
				t.Fatalf("received seq %d before publishing it", m.Seq)
			}
			// drain what is already in flight
			for {
				n, err := s.Recv(50 * time.Millisecond)
				if err != nil {
					return m.Seq
				}
				m = n
			}
		}
	}
	t.Fatal("the subscriber never received anything")
	return 0
}

func TestPublishSubscribeInOrder(t *testing.T) {
	for _, mode := range []string{"tcp-connect", "tcp-centralized", "ipc"} {
		t.Run(mode, func(t *testing.T) {
			var pubEP, subEP string
			bind := false
			switch mode {
			case "tcp-connect": // discovery mode: the pod binds, the indexer connects
				port := freePort(t)
				pubEP, subEP = fmt.Sprintf("tcp://*:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port)
			case "tcp-centralized": // the indexer binds, the pod connects
				port := freePort(t)
				pubEP, subEP, bind = fmt.Sprintf("tcp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port), true
			case "ipc":
				ep := "ipc://" + filepath.Join(t.TempDir(), "kv.sock")
				pubEP, subEP = ep, ep
			}
			var sub *Subscriber
			var err error
			if bind {
				if sub, err = Subscribe(subEP, true, "kv@", 0); err != nil {
					t.Fatal(err)
				}
			}
			p, err := NewPublisher(PublisherConfig{Endpoint: pubEP, Topic: "kv@pod-0@llama"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if !bind {
				if sub, err = Subscribe(subEP, false, "kv@", 0); err != nil {
					t.Fatal(err)
				}
			}
			defer sub.Close()
			publishUntilSubscribed(t, p, sub)
			first := p.seq
			const n = 500
			for range n {
				if _, err := p.Publish(payload(p.seq)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range uint64(n) {
				m, err := sub.Recv(2 * time.Second)
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if m.Topic != "kv@pod-0@llama" || m.Seq != first+i || !bytes.Equal(m.Payload, payload(first+i)) {
					t.Fatalf("message %d: topic %q seq %d payload %q", i, m.Topic, m.Seq, m.Payload)
				}
			}
		})
	}
}

func TestTopicFilter(t *testing.T) {
	port := freePort(t)
	p, err := NewPublisher(PublisherConfig{Endpoint: fmt.Sprintf("tcp://*:%d", port), Topic: ""})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sub, err := Subscribe(fmt.Sprintf("tcp://127.0.0.1:%d", port), false, "kv@", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// vLLM's default topic is "": a kv@ subscriber receives nothing.
	for range 20 {
		_, _ = p.Publish([]byte("x"))
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := sub.Recv(200 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("a kv@ subscriber received a message with an empty topic: %v", err)
	}
}

// A subscriber that falls behind loses messages past the high-water mark;
// the replay socket returns exactly the missing batches.
func TestGapRecoveredByReplay(t *testing.T) {
	for _, framing := range []ReplayFraming{FramingTopic, FramingLegacy} {
		t.Run(fmt.Sprint("framing-", framing), func(t *testing.T) {
			port, replayPort := freePort(t), freePort(t)
			p, err := NewPublisher(PublisherConfig{
				Endpoint: fmt.Sprintf("tcp://*:%d", port), ReplayEndpoint: fmt.Sprintf("tcp://*:%d", replayPort),
				Topic: "kv@pod@m", HWM: 10, BufferSteps: 5000, Framing: framing,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			sub, err := Subscribe(fmt.Sprintf("tcp://127.0.0.1:%d", port), false, "kv@", 10)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			publishUntilSubscribed(t, p, sub)
			first := p.seq
			// publish far past both high-water marks without reading
			big := bytes.Repeat([]byte("k"), 4096)
			for range 3000 {
				if _, err := p.Publish(append(payload(p.seq), big...)); err != nil {
					t.Fatal(err)
				}
			}
			last := p.seq - 1
			got := map[uint64]bool{}
			for {
				m, err := sub.Recv(300 * time.Millisecond)
				if err != nil {
					break
				}
				got[m.Seq] = true
			}
			var missing []uint64
			for s := first; s <= last; s++ {
				if !got[s] {
					missing = append(missing, s)
				}
			}
			if len(missing) == 0 {
				t.Fatal("no message was dropped; the test did not exercise a gap")
			}
			replayed, err := Replay(fmt.Sprintf("tcp://127.0.0.1:%d", replayPort), missing[0], 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(replayed) == 0 || replayed[0].Seq != missing[0] || replayed[len(replayed)-1].Seq != last {
				t.Fatalf("replay from %d returned %d messages", missing[0], len(replayed))
			}
			for i, m := range replayed {
				want := missing[0] + uint64(i)
				if m.Seq != want || !bytes.HasPrefix(m.Payload, payload(want)) {
					t.Fatalf("replayed %d: seq %d", i, m.Seq)
				}
				if framing == FramingTopic && m.Topic != "kv@pod@m" {
					t.Fatalf("replayed topic %q", m.Topic)
				}
				got[m.Seq] = true
			}
			for s := first; s <= last; s++ {
				if !got[s] {
					t.Fatalf("batch %d neither received nor replayed", s)
				}
			}
		})
	}
}

// A replay from before the buffer starts later: the first sequence number
// above the one asked for tells the caller history was lost.
func TestReplayOlderThanBuffer(t *testing.T) {
	replayPort := freePort(t)
	p, err := NewPublisher(PublisherConfig{Endpoint: "inproc://lost", ReplayEndpoint: fmt.Sprintf("tcp://*:%d", replayPort), Topic: "kv@x@m", BufferSteps: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 25 {
		if _, err := p.Publish([]byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Replay(fmt.Sprintf("tcp://127.0.0.1:%d", replayPort), 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0].Seq != 15 || got[9].Seq != 24 {
		t.Fatalf("replay of a 10-batch buffer after 25 batches: %d messages from %d", len(got), got[0].Seq)
	}
	// Asking beyond the last batch returns nothing, not an error.
	got, err = Replay(fmt.Sprintf("tcp://127.0.0.1:%d", replayPort), 100, 5*time.Second)
	if err != nil || len(got) != 0 {
		t.Fatalf("replay from the future: %d messages, %v", len(got), err)
	}
}

func TestShouldBind(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://*:5557": true, "tcp://[::]:5557": true, "ipc:///tmp/x": true, "inproc://x": true,
		"tcp://indexer:5557": false, "tcp://10.0.0.1:5557": false,
	} {
		if ShouldBind(ep) != want {
			t.Errorf("ShouldBind(%q) = %v", ep, !want)
		}
	}
}

func BenchmarkPublish(b *testing.B) {
	p, err := NewPublisher(PublisherConfig{Endpoint: "inproc://bench", Topic: "kv@p@m"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	msg := bytes.Repeat([]byte("x"), 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Publish(msg); err != nil {
			b.Fatal(err)
		}
	}
}
