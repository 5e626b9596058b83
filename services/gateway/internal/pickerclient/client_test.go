package pickerclient

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

type replica struct {
	pickerv1.UnimplementedPickerServiceServer
	name      string
	mu        sync.Mutex
	picks     int
	completes []string
	err       error
}

func (r *replica) Pick(context.Context, *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.picks++
	if r.err != nil {
		return nil, r.err
	}
	return &pickerv1.PickResponse{DecisionId: "d", Replica: r.name}, nil
}

func (r *replica) Complete(_ context.Context, in *pickerv1.CompleteRequest) (*pickerv1.CompleteResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.completes = append(r.completes, in.GetCompletion().GetDecisionId())
	return &pickerv1.CompleteResponse{}, nil
}

func serve(t *testing.T, r *replica) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pickerv1.RegisterPickerServiceServer(s, r)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String(), s.Stop
}

func TestRoundRobinAndCompleteGoesToTheDecider(t *testing.T) {
	a, b := &replica{name: "a"}, &replica{name: "b"}
	addrA, _ := serve(t, a)
	addrB, stopB := serve(t, b)
	c, err := New([]string{addrA, addrB}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	seen := map[string]int{}
	for range 6 {
		d, err := c.Pick(ctx, &pickerv1.PickRequest{})
		if err != nil {
			t.Fatal(err)
		}
		seen[d.GetReplica()]++
		if err := c.Complete(ctx, d, &eventsv1.RequestCompleted{DecisionId: d.GetReplica()}); err != nil {
			t.Fatal(err)
		}
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Errorf("picks per replica %v", seen)
	}
	for _, r := range []*replica{a, b} {
		for _, id := range r.completes {
			if id != r.name {
				t.Errorf("replica %s got the completion of a decision of %s", r.name, id)
			}
		}
	}
	if c.Ready() != nil {
		t.Error("not ready with two replicas up")
	}

	// b goes away: every pick lands on a.
	stopB()
	for range 4 {
		d, err := c.Pick(ctx, &pickerv1.PickRequest{})
		if err != nil || d.GetReplica() != "a" {
			t.Fatalf("pick with b down: %v %v", d.PickResponse, err)
		}
	}

	// A picker's own error is not retried elsewhere.
	a.mu.Lock()
	a.err = status.Error(codes.ResourceExhausted, "shed")
	a.mu.Unlock()
	before := a.picks
	if _, err := c.Pick(ctx, &pickerv1.PickRequest{}); status.Code(err) != codes.ResourceExhausted || a.picks != before+1 {
		t.Errorf("shed: %v, %d picks", err, a.picks-before)
	}
}

func TestNoAddress(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Error("no address accepted")
	}
}
