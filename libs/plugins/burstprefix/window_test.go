package burstprefix

import (
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// A window holding maxBatchSize requests turns the next away; the next
// window takes it.
func TestFullWindowTurnsRequestsAway(t *testing.T) {
	p := schedulingtest.New[*Producer](t, schedulingtest.NewHandle(), Type, "burst", `{"windowDurationMs": 30, "maxBatchSize": 2}`)
	m := Member{Hashes: []uint64{1}, Candidates: []string{"a"}}
	w1, _, ok1 := p.join(m)
	_, _, ok2 := p.join(m)
	_, _, ok3 := p.join(m)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("joins %v %v %v, want the third turned away", ok1, ok2, ok3)
	}
	select {
	case <-w1.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the window never closed")
	}
	if w1.assign[0] != "a" || w1.assign[1] != "a" {
		t.Errorf("assigned %v", w1.assign)
	}
	w2, i, ok := p.join(m)
	if !ok || w2 == w1 || i != 0 {
		t.Fatalf("after the close: joined %v at %d of a new window %v", ok, i, w2 != w1)
	}
	<-w2.done
}
