package pickerclient

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// serveOn serves r on addr ("127.0.0.1:0" for a free port) and returns the
// address it got and a stop function.
func serveOn(t *testing.T, addr string, r *replica) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	s := grpc.NewServer()
	pickerv1.RegisterPickerServiceServer(s, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	stop := func() {
		s.Stop()
		<-done
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// A picker down for several seconds (long enough for gRPC's default
// backoff to reach ~4 s between attempts) and restarted on the same port is
// served again at once, not after the rest of a backoff. Requests keep
// coming during the outage, as under load.
func TestPickerBackOnTheSamePortIsServedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: stops a picker for 6.5 s")
	}
	const outage = 6500 * time.Millisecond
	r := &replica{name: "a"}
	addr, stop := serveOn(t, "127.0.0.1:0", r)
	c, err := New([]string{addr}, Options{DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Pick(ctx, &pickerv1.PickRequest{}); err != nil {
		t.Fatalf("pick with the picker up: %v", err)
	}

	stop()
	down := time.Now()
	failed := 0
	for time.Since(down) < outage {
		if _, err := c.Pick(ctx, &pickerv1.PickRequest{}); err == nil {
			t.Fatal("pick succeeded with the picker down")
		}
		failed++
		time.Sleep(50 * time.Millisecond)
	}

	serveOn(t, addr, r)
	up := time.Now()
	for {
		_, err := c.Pick(ctx, &pickerv1.PickRequest{})
		if err == nil {
			break
		}
		if time.Since(up) > 10*time.Second {
			t.Fatalf("picker back for 10 s and still failing: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(up)
	t.Logf("%d picks failed during the %s outage; served again %s after the restart", failed, outage, took.Round(time.Millisecond))
	if took > 750*time.Millisecond {
		t.Errorf("served again %s after the picker came back, want under 750ms", took)
	}
}

// With the picker down, a Pick fails within the reconnect wait, not its
// whole deadline.
func TestPickWithEveryPickerDownFailsWithinTheReconnectWait(t *testing.T) {
	r := &replica{name: "a"}
	addr, stop := serveOn(t, "127.0.0.1:0", r)
	c, err := New([]string{addr}, Options{PickTimeout: 5 * time.Second, ReconnectWait: 200 * time.Millisecond,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop()
	for range 5 {
		start := time.Now()
		if _, err := c.Pick(context.Background(), &pickerv1.PickRequest{}); err == nil {
			t.Fatal("pick succeeded with the picker down")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a pick with the picker down took %s", d)
		}
	}
}
