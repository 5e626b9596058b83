package pickerclient

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
)

// reconnectParams bounds gRPC's reconnect backoff: a picker that is back is
// dialled again within ReconnectMaxDelay (plus jitter), not after up to
// 120 s.
func reconnectParams() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  reconnectBaseDelay,
			Multiplier: backoff.DefaultConfig.Multiplier,
			Jitter:     backoff.DefaultConfig.Jitter,
			MaxDelay:   ReconnectMaxDelay,
		},
		MinConnectTimeout: reconnectMinConnect,
	})
}

// awaitReconnect runs before a Pick when every replica's connection is in
// TRANSIENT_FAILURE, that is waiting out a reconnect backoff, which would
// fail the call at once: it asks the connections to try again now and waits,
// within ctx and at most reconnectWait, until one is ready.
func (c *Client) awaitReconnect(ctx context.Context) {
	for _, conn := range c.conns {
		if conn.GetState() != connectivity.TransientFailure {
			return
		}
	}
	c.nudge()
	ctx, cancel := context.WithTimeout(ctx, c.reconnectWait)
	defer cancel()
	ready := make(chan struct{}, len(c.conns))
	var wg sync.WaitGroup
	for _, conn := range c.conns {
		wg.Go(func() {
			if awaitAttempt(ctx, conn) {
				ready <- struct{}{}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
	case <-ctx.Done():
	}
	cancel()
	<-done
}

// nudge asks every connection to reconnect now, skipping their backoff, at
// most once per reconnectNudgeEvery.
func (c *Client) nudge() {
	now := time.Now().UnixNano()
	last := c.nudged.Load()
	if now-last < int64(reconnectNudgeEvery) || !c.nudged.CompareAndSwap(last, now) {
		return
	}
	for _, conn := range c.conns {
		conn.ResetConnectBackoff()
		conn.Connect()
	}
}

// awaitAttempt follows a failing connection through its next attempt: true
// when it becomes ready, false when ctx ends or an attempt from IDLE fails.
// (pick_first keeps a channel in TRANSIENT_FAILURE during the attempts that
// follow a failure, so a failed retry shows no state change: the wait then
// ends with ctx, at most reconnectWait.)
func awaitAttempt(ctx context.Context, conn *grpc.ClientConn) bool {
	attempted := false
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Shutdown:
			return false
		case connectivity.TransientFailure:
			if attempted {
				return false
			}
		default: // Idle or Connecting: an attempt is under way
			attempted = true
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}
