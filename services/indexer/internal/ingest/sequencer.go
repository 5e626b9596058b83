// Package ingest follows the KV-cache events of a pool's engines over ZMQ
// and hands them on repaired: per pod in engine order, without holes, with
// engine restarts and lost history marked as resets (spec/vllm-wire.md
// §1).
package ingest

import (
	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// replayFunc fetches a pod's buffered batches from a sequence number on.
type replayFunc func(from uint64) ([]kvzmq.Message, error)

// emitFunc hands on one batch; reset says the pod's earlier blocks must be
// forgotten before it is applied.
type emitFunc func(m kvzmq.Message, reset bool)

// seqStats count what a sequencer repaired.
type seqStats struct {
	gaps, replays, replayFailures, historyLost, restarts, duplicates uint64
}

// sequencer repairs one pod's stream of batches as they come off the live
// socket. vLLM numbers batches from 0 per engine process (llm-d's simulator
// from 1), and the live socket drops batches when the subscriber is slow:
//
//   - the first batch seen starts the pod afresh (reset); unless it is a
//     clean start (seq 0 or 1), the batches before it are replayed first;
//   - a gap is filled by replaying from the first missing batch; if the
//     engine no longer has it, the pod starts afresh from what remains;
//   - a batch the replay already delivered is a duplicate, skipped;
//   - a sequence number below one the live socket already delivered is an
//     engine restart: the pod starts afresh (replaying what the new
//     process published before it).
type sequencer struct {
	replay replayFunc
	emit   emitFunc

	started  bool
	next     uint64 // the next sequence number to emit
	lastLive uint64 // the last sequence number off the live socket
	stats    seqStats
}

// cleanStart reports whether seq is the first batch of an engine process.
func cleanStart(seq uint64) bool { return seq <= 1 }

// receive takes a batch off the live socket.
func (s *sequencer) receive(m kvzmq.Message) {
	switch {
	case !s.started:
		s.started = true
		s.restartAt(m)
	case m.Seq == s.next:
		s.emit(m, false)
		s.next++
	case m.Seq > s.next:
		s.stats.gaps++
		s.emitLive(m, s.catchUp(false, true))
	case m.Seq > s.lastLive:
		s.stats.duplicates++ // a replay delivered it already
	default:
		s.stats.restarts++
		s.restartAt(m)
	}
	s.lastLive = m.Seq
}

// restartAt starts the pod afresh at m: its earlier blocks are forgotten,
// and what its engine published before m is replayed first.
func (s *sequencer) restartAt(m kvzmq.Message) {
	if cleanStart(m.Seq) {
		s.emit(m, true)
		s.next = m.Seq + 1
		return
	}
	s.next = 0
	s.emitLive(m, s.catchUp(true, true))
}

// emitLive emits the live batch m unless a replay delivered it already; a
// reset still due goes with it.
func (s *sequencer) emitLive(m kvzmq.Message, reset bool) {
	if reset || m.Seq >= s.next {
		s.emit(m, reset)
		s.next = m.Seq + 1
	}
}

// begin replays a pod's history when following starts, so that an idle
// pod's blocks are known before it publishes again. Without a replay (none
// offered, nothing buffered) the first live batch starts the pod.
func (s *sequencer) begin() {
	msgs, err := s.replay(0)
	if err != nil {
		s.stats.replayFailures++
	}
	if len(msgs) == 0 {
		return
	}
	s.stats.replays++
	s.started = true
	for i, r := range msgs {
		s.emit(r, i == 0)
		s.next = r.Seq + 1
	}
}

// resume catches up a pod followed before (by this replica or another):
// what its engine published since the last batch on the stream is
// replayed. Nothing new is fine; a failed replay leaves it to the live
// batches to show the gap.
func (s *sequencer) resume() {
	s.catchUp(false, false)
}

// catchUp replays from s.next and emits what comes back, the reset (if
// any) on the first batch. A replay that starts later than asked means the
// engine's buffer moved on: blocks stored or removed in the lost batches
// would stay wrong, so the pod starts afresh from what remains; so does an
// empty or failed replay when emptyIsLoss (a live batch proved batches are
// missing). It returns whether a reset is still due (nothing was emitted
// to carry it).
func (s *sequencer) catchUp(reset, emptyIsLoss bool) bool {
	from := s.next
	msgs, err := s.replay(from)
	if err != nil {
		s.stats.replayFailures++
	}
	if len(msgs) > 0 {
		s.stats.replays++ // replays that delivered something
	}
	lost := (len(msgs) == 0 && emptyIsLoss) || (len(msgs) > 0 && msgs[0].Seq > from && (from != 0 || !cleanStart(msgs[0].Seq)))
	if lost && !reset {
		s.stats.historyLost++
	}
	reset = reset || lost
	for _, r := range msgs {
		if r.Seq < s.next {
			continue
		}
		s.emit(r, reset)
		reset = false
		s.next = r.Seq + 1
	}
	return reset
}
