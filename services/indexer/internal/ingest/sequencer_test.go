package ingest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// engine is a publisher with a replay buffer of the last `keep` batches.
type engine struct {
	published []kvzmq.Message
	keep      int
	down      bool
}

func (e *engine) publish(seq uint64) kvzmq.Message {
	m := kvzmq.Message{Seq: seq, Payload: []byte(fmt.Sprint(seq))}
	e.published = append(e.published, m)
	return m
}

func (e *engine) replay(from uint64) ([]kvzmq.Message, error) {
	if e.down {
		return nil, errors.New("replay endpoint down")
	}
	buf := e.published
	if e.keep > 0 && len(buf) > e.keep {
		buf = buf[len(buf)-e.keep:]
	}
	var out []kvzmq.Message
	for _, m := range buf {
		if m.Seq >= from {
			out = append(out, m)
		}
	}
	return out, nil
}

type emitted struct {
	out []string
}

func (e *emitted) emit(m kvzmq.Message, reset bool) {
	s := fmt.Sprint(m.Seq)
	if reset {
		s = "R" + s
	}
	e.out = append(e.out, s)
}

func (e *emitted) String() string { return strings.Join(e.out, " ") }

func newSeq(e *engine) (*sequencer, *emitted) {
	out := &emitted{}
	return &sequencer{replay: e.replay, emit: out.emit}, out
}

func TestSequencerRepairs(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(e *engine, s *sequencer)
		want string
	}{
		{"clean start, in order", func(e *engine, s *sequencer) {
			for i := range 4 {
				s.receive(e.publish(uint64(i)))
			}
		}, "R0 1 2 3"},
		{"llm-d's simulator starts at 1", func(e *engine, s *sequencer) {
			for i := 1; i <= 3; i++ {
				s.receive(e.publish(uint64(i)))
			}
		}, "R1 2 3"},
		{"joining late replays from 0", func(e *engine, s *sequencer) {
			for i := range 5 {
				e.publish(uint64(i))
			}
			s.receive(e.publish(5))
			s.receive(e.publish(6))
		}, "R0 1 2 3 4 5 6"},
		{"a gap is replayed; the live copies of replayed batches are skipped", func(e *engine, s *sequencer) {
			s.receive(e.publish(0))
			s.receive(e.publish(1))
			e.publish(2)
			e.publish(3)
			m4 := e.publish(4)
			m5 := e.publish(5) // published before the replay is asked
			s.receive(m4)      // gap: 2, 3 missing; the replay returns 2..5
			s.receive(m5)      // already emitted
			s.receive(e.publish(6))
		}, "R0 1 2 3 4 5 6"},
		{"history lost: the pod starts afresh from what remains", func(e *engine, s *sequencer) {
			e.keep = 2
			s.receive(e.publish(0))
			for i := 1; i <= 5; i++ {
				e.publish(uint64(i))
			}
			s.receive(e.publish(6)) // replay from 1 starts at 5
			s.receive(e.publish(7))
		}, "R0 R5 6 7"},
		{"replay down: the live batch carries the reset", func(e *engine, s *sequencer) {
			s.receive(e.publish(0))
			e.publish(1)
			e.down = true
			s.receive(e.publish(2))
			s.receive(e.publish(3))
		}, "R0 R2 3"},
		{"an engine restart goes back to 0", func(e *engine, s *sequencer) {
			for i := range 3 {
				s.receive(e.publish(uint64(i)))
			}
			e.published = nil
			s.receive(e.publish(0))
			s.receive(e.publish(1))
		}, "R0 1 2 R0 1"},
		{"a restart seen late replays the new process from 0", func(e *engine, s *sequencer) {
			for i := range 6 {
				s.receive(e.publish(uint64(i)))
			}
			e.published = nil
			e.publish(0)
			e.publish(1)
			s.receive(e.publish(2))
		}, "R0 1 2 3 4 5 R0 1 2"},
		{"beginning replays an idle pod's history", func(e *engine, s *sequencer) {
			for i := range 3 {
				e.publish(uint64(i))
			}
			s.begin()
			s.receive(e.publish(3))
		}, "R0 1 2 3"},
		{"beginning with nothing buffered waits for the live batches", func(e *engine, s *sequencer) {
			s.begin()
			s.receive(e.publish(0))
		}, "R0"},
		{"resuming replays what was published meanwhile", func(e *engine, s *sequencer) {
			for i := range 4 {
				e.publish(uint64(i)) // 0..2 are on the stream already
			}
			s.started, s.next, s.lastLive = true, 3, 2
			s.resume()
			s.receive(e.publish(4))
		}, "3 4"},
		{"resuming with nothing new", func(e *engine, s *sequencer) {
			e.publish(0)
			s.started, s.next, s.lastLive = true, 1, 0
			s.resume()
			s.receive(e.publish(1))
		}, "1"},
		{"resuming after the engine's buffer moved on", func(e *engine, s *sequencer) {
			e.keep = 2
			for i := range 6 {
				e.publish(uint64(i))
			}
			s.started, s.next, s.lastLive = true, 2, 1
			s.resume()
		}, "R4 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &engine{}
			s, out := newSeq(e)
			c.run(e, s)
			if got := out.String(); got != c.want {
				t.Fatalf("emitted %q, want %q (stats %+v)", got, c.want, s.stats)
			}
		})
	}
}
