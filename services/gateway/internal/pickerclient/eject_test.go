package pickerclient

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

var quiet = slog.New(slog.DiscardHandler)

// hung is a replica that answers nothing until the call ends (a stopped
// process whose socket still accepts).
type hung struct {
	replica
}

func (h *hung) Pick(ctx context.Context, _ *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	h.mu.Lock()
	h.picks++
	h.mu.Unlock()
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (h *hung) Complete(ctx context.Context, _ *pickerv1.CompleteRequest) (*pickerv1.CompleteResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (h *hung) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.picks
}

// A replica that hangs costs one Pick the attempt timeout, then is passed
// over (its completions too) for a time that doubles while it keeps
// hanging; every Pick is served by the other replica.
func TestHungReplicaIsPassedOver(t *testing.T) {
	a, b := &hung{replica: replica{name: "a"}}, &replica{name: "b"}
	addrA, _ := serve(t, a)
	addrB, _ := serve(t, b)
	reg := prometheus.NewRegistry()
	o := plaintext
	o.AttemptTimeout, o.Metrics, o.Logger = 100*time.Millisecond, reg, quiet
	c, err := New([]string{addrA, addrB}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.ejected.base, c.ejected.max = 300*time.Millisecond, 600*time.Millisecond
	ctx := context.Background()
	pick := func() time.Duration {
		t.Helper()
		start := time.Now()
		d, err := c.Pick(ctx, &pickerv1.PickRequest{})
		if err != nil || d.GetReplica() != "b" {
			t.Fatalf("pick: %v %v", d.PickResponse, err)
		}
		return time.Since(start)
	}
	// The rotation starts on b, then a: the Pick that meets a waits out
	// the attempt timeout.
	var slow []time.Duration
	for range 4 {
		if d := pick(); d >= 100*time.Millisecond {
			slow = append(slow, d)
		}
	}
	if len(slow) < 1 || a.count() != 1 {
		t.Fatalf("%d slow picks (%v), %d on the hung replica; want one that met it, once", len(slow), slow, a.count())
	}
	// Passed over: its completions go to b at once.
	start := time.Now()
	if err := c.Complete(ctx, Decision{PickResponse: &pickerv1.PickResponse{}, replica: 0}, &eventsv1.RequestCompleted{DecisionId: "x"}); err != nil || time.Since(start) > time.Second {
		t.Errorf("complete of a's decision: %v after %s", err, time.Since(start))
	}
	// Once the ejection is over it is tried again, and passed over twice as
	// long.
	time.Sleep(400 * time.Millisecond)
	for range 2 {
		pick()
	}
	if a.count() != 2 {
		t.Fatalf("%d picks on the hung replica after its first ejection, want 2", a.count())
	}
	for range 2 {
		pick()
	}
	c.ejected.mu.Lock()
	inRow, left := c.ejected.inRow[0], time.Until(c.ejected.until[0])
	c.ejected.mu.Unlock()
	if a.count() != 2 || inRow != 2 || left <= 300*time.Millisecond {
		t.Fatalf("hung replica tried again %d times within its second ejection (%d in a row, %s left; want 600 ms)", a.count()-2, inRow, left)
	}
	if got := testutil.ToFloat64(c.ejections.WithLabelValues(addrA)); got != 2 {
		t.Errorf("ejections of a: %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "hermod_gateway_picker_ejections_total"); err != nil || n != 1 {
		t.Errorf("registered ejection series: %d, %v", n, err)
	}
}

// With every replica hung, a Pick tries each (the last with what is left
// of the Pick timeout) and fails within the Pick timeout.
func TestEveryReplicaHungFailsWithinThePickTimeout(t *testing.T) {
	a, b := &hung{replica: replica{name: "a"}}, &hung{replica: replica{name: "b"}}
	addrA, _ := serve(t, a)
	addrB, _ := serve(t, b)
	o := plaintext
	o.AttemptTimeout, o.PickTimeout, o.Logger = 50*time.Millisecond, 300*time.Millisecond, quiet
	c, err := New([]string{addrA, addrB}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Pick(context.Background(), &pickerv1.PickRequest{})
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded || took < 300*time.Millisecond || took > 2*time.Second {
		t.Fatalf("pick: %v after %s", err, took)
	}
	if a.count()+b.count() != 2 {
		t.Errorf("%d + %d attempts, want one on each", a.count(), b.count())
	}
}

// Replicas passed over come last, the soonest back first; the others keep
// their rotation.
func TestEjectionOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newEjections(4)
	e.now = func() time.Time { return now }
	if got := e.order(2, nil); !slices.Equal(got, []int{2, 3, 0, 1}) {
		t.Fatalf("no ejection: %v", got)
	}
	e.eject(3) // 1 s
	e.eject(0)
	e.eject(0) // 2 s
	if got := e.order(2, nil); !slices.Equal(got, []int{2, 1, 3, 0}) {
		t.Fatalf("3 and 0 ejected: %v", got)
	}
	now = now.Add(1500 * time.Millisecond) // 3 is back
	if got := e.order(2, nil); !slices.Equal(got, []int{2, 3, 1, 0}) {
		t.Fatalf("3 back: %v", got)
	}
	e.answered(0)
	if got := e.order(0, nil); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("0 answered: %v", got)
	}
	for range 10 {
		e.eject(1)
	}
	if d := e.eject(1); d != ejectMax {
		t.Errorf("ejection after many in a row: %s, want the cap %s", d, ejectMax)
	}
}
