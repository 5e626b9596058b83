package coord

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestNewClient(t *testing.T) {
	integration(t) // starts the shared server
	cli, err := NewClient(testContext(t), srv.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()

	if _, err := NewClient(testContext(t), nil); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Errorf("no endpoints: %v", err)
	}
	// Nothing listens there: the error comes within the caller's deadline
	// and names the address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := NewClient(ctx, []string{dead}); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("dead endpoint: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s with a 500ms deadline", d)
	}
}
