package pickerclient

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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

func serve(t *testing.T, r pickerv1.PickerServiceServer) (addr string, stop func()) {
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
	c, err := New([]string{addrA, addrB}, plaintext)
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

	// A picker's own answers are not retried elsewhere.
	for _, err := range []error{
		status.Error(codes.ResourceExhausted, "shed"),
		withReason(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NO_READY_ENDPOINTS),
	} {
		a.mu.Lock()
		a.err = err
		before := a.picks
		a.mu.Unlock()
		if _, got := c.Pick(ctx, &pickerv1.PickRequest{}); status.Code(got) != status.Code(err) || a.picks != before+1 {
			t.Errorf("%v: got %v after %d picks", err, got, a.picks-before)
		}
	}
}

func withReason(code codes.Code, why pickerv1.PickFailure) error {
	st, _ := status.New(code, why.String()).WithDetails(&errdetails.ErrorInfo{Reason: why.String(), Domain: "hermod.picker"})
	return st.Err()
}

// A replica that is not ready passes the request to the next one.
func TestNotReadyReplicaIsSkipped(t *testing.T) {
	a := &replica{name: "a", err: withReason(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_NOT_READY)}
	b := &replica{name: "b"}
	addrA, _ := serve(t, a)
	addrB, _ := serve(t, b)
	c, err := New([]string{addrA, addrB}, plaintext)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 4 {
		d, err := c.Pick(context.Background(), &pickerv1.PickRequest{})
		if err != nil || d.GetReplica() != "b" {
			t.Fatalf("%v %v", d.PickResponse, err)
		}
	}
	if FailureReason(withReason(codes.Unavailable, pickerv1.PickFailure_PICK_FAILURE_SHED)) != "PICK_FAILURE_SHED" || FailureReason(status.Error(codes.Unavailable, "x")) != "" {
		t.Error("FailureReason")
	}
}

func TestNoAddress(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Error("no address accepted")
	}
}

// plaintext are the options of a client of the test servers (the services
// pass bootstrap's GRPCDialOptions).
var plaintext = Options{DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}}
