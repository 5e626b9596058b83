package flight_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/flight"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func checkCounts(t *testing.T, tr *tracker, want map[string]int, names ...string) {
	t.Helper()
	for _, n := range names {
		if got := tr.InFlight(n); got != want[n] {
			t.Errorf("InFlight(%s) = %d, want %d", n, got, want[n])
		}
	}
}

func TestTrackerStartDone(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.Start("a", []string{"pod-0"})
	tr.Start("b", []string{"pod-0", "pod-1"})
	tr.Start("c", nil)
	checkCounts(t, tr, map[string]int{"pod-0": 2, "pod-1": 1}, "pod-0", "pod-1", "pod-2")
	if tr.Len() != 3 {
		t.Errorf("Len = %d, want 3", tr.Len())
	}
	tr.Done("b")
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0", "pod-1")
	tr.Done("a")
	tr.Done("c")
	checkCounts(t, tr, nil, "pod-0", "pod-1")
	if tr.Len() != 0 {
		t.Errorf("Len = %d, want 0", tr.Len())
	}
}

func TestTrackerManyEndpoints(t *testing.T) {
	tr := newTracker(time.Minute, newFakeClock().Now)
	names := []string{"p0", "p1", "p2", "p3", "p4"}
	tr.Start("x", names)
	names[0] = "mutated" // the tracker keeps its own copy
	want := map[string]int{"p0": 1, "p1": 1, "p2": 1, "p3": 1, "p4": 1}
	checkCounts(t, tr, want, "p0", "p1", "p2", "p3", "p4", "mutated")
	tr.Done("x")
	checkCounts(t, tr, nil, "p0", "p1", "p2", "p3", "p4")
}

func TestTrackerStartTwiceCountsOnce(t *testing.T) {
	tr := newTracker(time.Minute, newFakeClock().Now)
	tr.Start("a", []string{"pod-0"})
	tr.Start("a", []string{"pod-0"})
	tr.Start("a", []string{"pod-1"}) // still the same request
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0", "pod-1")
	if tr.Len() != 1 {
		t.Errorf("Len = %d, want 1", tr.Len())
	}
	tr.Done("a")
	checkCounts(t, tr, nil, "pod-0", "pod-1")
}

func TestTrackerDoneUnknownAndTwice(t *testing.T) {
	tr := newTracker(time.Minute, newFakeClock().Now)
	tr.Done("nobody")
	tr.Done("")
	tr.Start("a", []string{"pod-0"})
	tr.Start("b", []string{"pod-0"})
	tr.Done("nobody")
	checkCounts(t, tr, map[string]int{"pod-0": 2}, "pod-0")
	tr.Done("a")
	tr.Done("a")
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0")
	tr.Done("b")
	tr.Done("b")
	checkCounts(t, tr, nil, "pod-0")
	if tr.Len() != 0 {
		t.Errorf("Len = %d, want 0", tr.Len())
	}
}

// The empty key is an ordinary key: unique keys are the caller's job (the
// scorer uses decision ids).
func TestTrackerEmptyKeyIsAKey(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.Start("", []string{"pod-0"})
	tr.Start("", []string{"pod-0"}) // the same request again
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0")
	tr.Done("")
	checkCounts(t, tr, nil, "pod-0")
}

func TestTrackerExpiry(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.Start("a", []string{"pod-0"})
	clock.Advance(20 * time.Second)
	tr.Start("b", []string{"pod-0", "pod-1"})
	clock.Advance(20 * time.Second)
	tr.Start("c", []string{"pod-1"})
	tr.Done("b")
	clock.Advance(20*time.Second - time.Millisecond) // a: 59.999s old
	checkCounts(t, tr, map[string]int{"pod-0": 1, "pod-1": 1}, "pod-0", "pod-1")
	clock.Advance(2 * time.Millisecond) // a: 60.001s old
	checkCounts(t, tr, map[string]int{"pod-1": 1}, "pod-0", "pod-1")
	// Completing an expired request does not go below zero or touch others.
	tr.Start("d", []string{"pod-0"})
	tr.Done("a")
	checkCounts(t, tr, map[string]int{"pod-0": 1, "pod-1": 1}, "pod-0", "pod-1")
	clock.Advance(40 * time.Second) // c: 60.001s old, d: 40s old
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0", "pod-1")
	clock.Advance(time.Minute)
	checkCounts(t, tr, nil, "pod-0", "pod-1")
	if tr.Len() != 0 {
		t.Errorf("Len = %d, want 0", tr.Len())
	}
}

func TestTrackerStartAt(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.StartAt("a", []string{"pod-0"}, clock.Now().Add(-50*time.Second))
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0")
	clock.Advance(11 * time.Second)
	checkCounts(t, tr, nil, "pod-0")
}

func TestTrackerNilClockUsesWallClock(t *testing.T) {
	tr := newTracker(time.Hour, nil)
	tr.Start("a", []string{"pod-0"})
	checkCounts(t, tr, map[string]int{"pod-0": 1}, "pod-0")
	short := newTracker(time.Nanosecond, nil)
	short.StartAt("a", []string{"pod-0"}, time.Now().Add(-time.Second))
	checkCounts(t, short, nil, "pod-0")
}

// Thousands of requests complete out of order while one long request stays
// open at the head of the queue: the counts stay exact, and once the clock
// passes the timeout everything returns to zero.
func TestTrackerCompactionKeepsCounts(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	rng := rand.New(rand.NewPCG(1, 2))
	endpoints := []string{"pod-0", "pod-1", "pod-2", "pod-3"}
	all := append([]string{"pod-long"}, endpoints...)
	want := map[string]int{"pod-long": 1}
	tr.Start("long", []string{"pod-long"})

	type req struct {
		id  string
		eps []string
	}
	var open []req
	kept := 0
	n := 0
	for batch := range 60 {
		for range 100 {
			n++
			id := "req-" + strconv.Itoa(n)
			eps := []string{endpoints[n%4]}
			if n%3 == 0 {
				eps = append(eps, endpoints[(n+1)%4])
			}
			tr.Start(id, eps)
			for _, e := range eps {
				want[e]++
			}
			open = append(open, req{id, eps})
		}
		clock.Advance(10 * time.Millisecond)
		// Complete a random ~80% of what is open, in random order, but keep
		// every 997th request open for good.
		rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
		cut := len(open) / 5
		for _, r := range open[cut:] {
			if keepOpen(r.id) {
				kept++
				continue
			}
			tr.Done(r.id)
			tr.Done(r.id) // redelivered
			for _, e := range r.eps {
				want[e]--
			}
		}
		open = open[:cut]
		if batch%10 == 0 {
			checkCounts(t, tr, want, all...)
		}
	}
	for _, r := range open {
		if keepOpen(r.id) {
			kept++
			continue
		}
		tr.Done(r.id)
		for _, e := range r.eps {
			want[e]--
		}
	}
	checkCounts(t, tr, want, all...)
	if got := tr.Len(); got != 1+kept {
		t.Errorf("Len = %d, want %d (long + %d kept)", got, 1+kept, kept)
	}
	if kept == 0 {
		t.Fatal("test setup: no request kept open")
	}
	var sum int
	for _, e := range endpoints {
		sum += tr.InFlight(e)
	}
	if sum == 0 {
		t.Errorf("kept requests are not counted")
	}

	clock.Advance(time.Minute)
	checkCounts(t, tr, nil, all...)
	if got := tr.Len(); got != 0 {
		t.Errorf("after timeout Len = %d, want 0", got)
	}
	// The tracker keeps working after the queue emptied.
	tr.Start("again", []string{"pod-0"})
	checkCounts(t, tr, map[string]int{"pod-0": 1}, all...)
	tr.Done("again")
	checkCounts(t, tr, nil, all...)
}

// keepOpen selects the requests of TestTrackerCompactionKeepsCounts that
// never complete.
func keepOpen(id string) bool {
	k, _ := strconv.Atoi(id[len("req-"):])
	return k%997 == 0
}

// Many requests expiring at once (the consumed head of the queue) while
// later ones are still open.
func TestTrackerMassExpiry(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	for i := range 5000 {
		tr.Start("old-"+strconv.Itoa(i), []string{"pod-" + strconv.Itoa(i%3)})
	}
	clock.Advance(30 * time.Second)
	for i := range 2000 {
		tr.Start("new-"+strconv.Itoa(i), []string{"pod-" + strconv.Itoa(i%4)})
	}
	for i := 0; i < 2000; i += 2 {
		tr.Done("new-" + strconv.Itoa(i))
	}
	clock.Advance(31 * time.Second)
	// old-* expired; new-* with odd i remain: 1000 split over pod-1 and pod-3.
	checkCounts(t, tr, map[string]int{"pod-1": 500, "pod-3": 500}, "pod-0", "pod-1", "pod-2", "pod-3")
	if got := tr.Len(); got != 1000 {
		t.Errorf("Len = %d, want 1000", got)
	}
	for i := 1; i < 2000; i += 4 {
		tr.Done("new-" + strconv.Itoa(i))
	}
	checkCounts(t, tr, map[string]int{"pod-3": 500}, "pod-0", "pod-1", "pod-2", "pod-3")
	clock.Advance(30 * time.Second)
	checkCounts(t, tr, nil, "pod-0", "pod-1", "pod-2", "pod-3")
	if got := tr.Len(); got != 0 {
		t.Errorf("Len = %d, want 0", got)
	}
}

// modelTracker is a straightforward reference implementation. Ids are
// never reused, so a FIFO in start order finds expired requests.
type modelTracker struct {
	timeout time.Duration
	reqs    map[string]modelReq
	fifo    []string
	count   map[string]int
}

type modelReq struct {
	started time.Time
	eps     []string
}

func (m *modelTracker) start(id string, now time.Time, eps []string) {
	m.reqs[id] = modelReq{now, eps}
	m.fifo = append(m.fifo, id)
	for _, e := range eps {
		m.count[e]++
	}
}

func (m *modelTracker) done(id string) {
	if r, ok := m.reqs[id]; ok {
		for _, e := range r.eps {
			m.count[e]--
		}
		delete(m.reqs, id)
	}
}

func (m *modelTracker) expire(now time.Time) {
	for len(m.fifo) > 0 {
		id := m.fifo[0]
		if r, ok := m.reqs[id]; ok {
			if now.Sub(r.started) <= m.timeout {
				return
			}
			m.done(id)
		}
		m.fifo = m.fifo[1:]
	}
}

// Random operations checked against the reference model. The clock moves
// in whole milliseconds and the timeout is not a whole number of them, so
// no request is ever exactly requestTimeout old.
func TestTrackerMatchesModel(t *testing.T) {
	clock := newFakeClock()
	const timeout = 20*time.Second + time.Nanosecond
	tr := newTracker(timeout, clock.Now)
	m := &modelTracker{timeout: timeout, reqs: map[string]modelReq{}, count: map[string]int{}}
	rng := rand.New(rand.NewPCG(7, 11))
	endpoints := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var done []string
	next := 0
	var order []string // non-anonymous ids in start order; may hold finished ones
	pick := func() (string, bool) {
		if len(order) > 2*len(m.reqs)+64 {
			live := order[:0]
			for _, id := range order {
				if _, ok := m.reqs[id]; ok {
					live = append(live, id)
				}
			}
			order = live
		}
		for range 32 {
			if len(order) == 0 {
				return "", false
			}
			id := order[rng.IntN(len(order))]
			if _, ok := m.reqs[id]; ok {
				return id, true
			}
		}
		return "", false
	}
	for op := range 30000 {
		now := clock.Now()
		m.expire(now)
		switch x := rng.IntN(100); {
		case x < 45: // new request
			next++
			id := "r" + strconv.Itoa(next)
			k := 1 + rng.IntN(3)
			perm := rng.Perm(len(endpoints))[:k]
			eps := make([]string, k)
			for i, p := range perm {
				eps[i] = endpoints[p]
			}
			tr.Start(id, eps)
			m.start(id, now, eps)
			order = append(order, id)
		case x < 50: // duplicate start of an in-flight request
			if id, ok := pick(); ok {
				tr.Start(id, []string{"z"})
			}
		case x < 88: // completion of an in-flight request
			if id, ok := pick(); ok {
				tr.Done(id)
				m.done(id)
				done = append(done, id)
			}
		case x < 92: // redelivered completion, or completion after expiry
			if len(done) > 0 {
				tr.Done(done[rng.IntN(len(done))])
			} else {
				tr.Done("r" + strconv.Itoa(next))
				m.done("r" + strconv.Itoa(next))
			}
		case x < 94: // a request on one endpoint
			eps := []string{endpoints[rng.IntN(len(endpoints))]}
			id := fmt.Sprintf("single-%d", op)
			tr.Start(id, eps)
			m.start(id, now, eps)
		default:
			clock.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		if op%7 == 0 || op > 29900 {
			m.expire(clock.Now())
			for _, e := range append(endpoints, "z") {
				if got := tr.InFlight(e); got != m.count[e] {
					t.Fatalf("op %d: InFlight(%s) = %d, want %d", op, e, got, m.count[e])
				}
			}
			if got := tr.Len(); got != len(m.reqs) {
				t.Fatalf("op %d: Len = %d, want %d", op, got, len(m.reqs))
			}
		}
	}
	// "older than requestTimeout": one nanosecond past it everything is gone.
	clock.Advance(timeout + time.Nanosecond)
	for _, e := range endpoints {
		if got := tr.InFlight(e); got != 0 {
			t.Errorf("after timeout InFlight(%s) = %d", e, got)
		}
	}
}

func TestTrackerConcurrent(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Hour, clock.Now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				id := fmt.Sprintf("g%d-%d", g, i)
				ep := "pod-" + strconv.Itoa(i%4)
				tr.Start(id, []string{ep})
				_ = tr.InFlight(ep)
				if i%2 == 1 {
					tr.Done(fmt.Sprintf("g%d-%d", g, i-1))
					tr.Done(id)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 1000 {
			clock.Advance(time.Millisecond)
			_ = tr.Len()
		}
	}()
	wg.Wait()
	checkCounts(t, tr, nil, "pod-0", "pod-1", "pod-2", "pod-3")
	if tr.Len() != 0 {
		t.Errorf("Len = %d, want 0", tr.Len())
	}
}

// A start redelivered after its request finished must not count it again.
func TestTrackerRedeliveredStartAfterDone(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.Start("r1", []string{"a"})
	tr.Done("r1")
	tr.Start("r1", []string{"a"})
	if got := tr.InFlight("a"); got != 0 {
		t.Fatalf("redelivered start counted again: InFlight = %d", got)
	}
	// Once the finished id is forgotten (after the timeout) the id may be
	// used again.
	clock.Advance(time.Minute + time.Nanosecond)
	tr.Start("r1", []string{"a"})
	if got := tr.InFlight("a"); got != 1 {
		t.Fatalf("reused id after timeout: InFlight = %d, want 1", got)
	}
}

// Exactly requestTimeout old is not "older than requestTimeout".
func TestTrackerTimeoutBoundary(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	tr.Start("r1", []string{"a"})
	clock.Advance(time.Minute)
	if tr.InFlight("a") != 1 {
		t.Fatal("dropped at exactly the timeout")
	}
	clock.Advance(time.Nanosecond)
	if tr.InFlight("a") != 0 {
		t.Fatal("kept past the timeout")
	}
}

// Starts arrive out of time order (a replayed decision after a live one, a
// completion marker between them): each expires at its own time, and a
// start already older than the timeout counts nothing, even redelivered
// after its id was forgotten.
func TestTrackerExpiresByStartTimeWhateverTheArrivalOrder(t *testing.T) {
	clock := newFakeClock()
	tr := newTracker(time.Minute, clock.Now)
	now := clock.Now()
	tr.StartAt("live", []string{"a"}, now)
	tr.Done("early") // completion before its decision
	tr.StartAt("replayed", []string{"a"}, now.Add(-50*time.Second))
	tr.StartAt("early", []string{"a"}, now.Add(-10*time.Second))
	if got := tr.InFlight("a"); got != 2 {
		t.Fatalf("InFlight = %d, want 2 (live and replayed)", got)
	}
	clock.Advance(11 * time.Second) // replayed is 61s old, live 11s
	if got := tr.InFlight("a"); got != 1 {
		t.Fatalf("after the replayed start's timeout: InFlight = %d, want 1", got)
	}
	tr.StartAt("stale", []string{"a"}, clock.Now().Add(-2*time.Minute))
	if got := tr.InFlight("a"); got != 1 {
		t.Fatalf("a start older than the timeout counted: InFlight = %d", got)
	}
	clock.Advance(2 * time.Minute)
	tr.StartAt("live", []string{"a"}, now) // redelivered long after
	if got, n := tr.InFlight("a"), tr.Len(); got != 0 || n != 0 {
		t.Fatalf("redelivered old start counted: InFlight = %d, Len = %d", got, n)
	}
}

// The same events in any order leave the same counts.
func TestTrackerOrderIndependent(t *testing.T) {
	type ev struct {
		start bool
		id    int
		at    time.Duration // before now
		ep    string
	}
	var evs []ev
	for i := range 60 {
		evs = append(evs, ev{start: true, id: i, at: time.Duration(i%90) * time.Second, ep: fmt.Sprint("pod-", i%4)})
		if i%3 == 0 {
			evs = append(evs, ev{id: i})
		}
	}
	counts := func(order []ev) [4]int {
		clock := newFakeClock()
		tr := flight.NewTracker[int, struct{}, struct{}](time.Minute, clock.Now)
		for _, e := range order {
			if e.start {
				tr.StartAt(e.id, []string{e.ep}, clock.Now().Add(-e.at))
			} else {
				tr.Done(e.id)
			}
		}
		var out [4]int
		for i := range out {
			out[i] = tr.InFlight(fmt.Sprint("pod-", i))
		}
		return out
	}
	want := counts(evs)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		shuffled := slices.Clone(evs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[:10]...)
		if got := counts(shuffled); got != want {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
}

type tracker = flight.Tracker[string, struct{}, struct{}]

func newTracker(timeout time.Duration, now func() time.Time) *tracker {
	return flight.NewTracker[string, struct{}, struct{}](timeout, now)
}

func newFakeClock() *schedulingtest.Clock { return schedulingtest.NewClock() }

// Start and done values pair once, whichever arrives first, and only the
// requests in flight are listed per endpoint with their start values.
func TestTrackerPairsAndLists(t *testing.T) {
	type pair struct {
		id   string
		s, d int
	}
	for _, doneFirst := range []bool{false, true} {
		clock := newFakeClock()
		tr := flight.NewTracker[string, int, int](time.Minute, clock.Now)
		var pairs []pair
		tr.SetPair(func(id string, _ time.Time, s, d *int) { pairs = append(pairs, pair{id, *s, *d}) })
		if doneFirst {
			tr.DoneWith("a", 20)
		}
		tr.StartWith("a", []string{"pod-0"}, clock.Now(), 10)
		tr.StartWith("b", []string{"pod-0"}, clock.Now(), 11)
		tr.StartWith("c", []string{"pod-1"}, clock.Now(), 12)
		if !doneFirst {
			tr.DoneWith("a", 20)
		}
		tr.DoneWith("a", 21) // redelivered: nothing
		tr.StartWith("a", []string{"pod-0"}, clock.Now(), 13)
		if want := []pair{{"a", 10, 20}}; !slices.Equal(pairs, want) {
			t.Fatalf("done first %v: pairs %v, want %v", doneFirst, pairs, want)
		}
		var listed []int
		tr.Each(scheduling.NameHash("pod-0"), func(_ time.Duration, s *int) { listed = append(listed, *s) })
		if !slices.Equal(listed, []int{11}) || tr.InFlight("pod-0") != 1 {
			t.Fatalf("done first %v: pod-0 lists %v, counts %d", doneFirst, listed, tr.InFlight("pod-0"))
		}
		clock.Advance(2 * time.Minute) // b and c expire unpaired
		listed = listed[:0]
		tr.Each(scheduling.NameHash("pod-1"), func(_ time.Duration, s *int) { listed = append(listed, *s) })
		if len(listed) != 0 || len(pairs) != 1 || tr.Len() != 0 {
			t.Fatalf("after expiry: listed %v, pairs %v, len %d", listed, pairs, tr.Len())
		}
	}
}
