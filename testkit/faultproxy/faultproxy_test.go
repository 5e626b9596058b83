package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and reads the echo within d.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(d))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	return got, err
}

func TestPassForwards(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	for _, line := range []string{"one", "two"} {
		got, err := c.roundTrip(line, 2*time.Second)
		if err != nil || got != line+"\n" {
			t.Fatalf("round trip %q: %q, %v", line, got, err)
		}
	}
	if p.Accepted() != 1 || p.Active() != 1 {
		t.Fatalf("accepted %d, active %d", p.Accepted(), p.Active())
	}
}

func TestStallHoldsBytesAndReleasesThem(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("before", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Stall)
	if got, err := c.roundTrip("held", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a stalled round trip answered %q, %v", got, err)
	}
	late := dial(t, p) // a connection made during the stall waits too
	_ = late.c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := late.c.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := late.r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("a connection made during the stall was served: %v", err)
	}
	p.Set(Pass)
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := c.r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after the stall: %q, %v (want the held line)", got, err)
	}
	_ = late.c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := late.r.ReadString('\n'); err != nil || got != "late\n" {
		t.Fatalf("late connection after the stall: %q, %v", got, err)
	}
}

func TestDropClosesAndRefuses(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("x", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Drop)
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("dropped connection: %v, want EOF", err)
	}
	n := dial(t, p)
	if _, err := n.roundTrip("y", 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a new connection during a drop: %v, want it closed", err)
	}
	p.Set(Pass)
	again := dial(t, p)
	if got, err := again.roundTrip("z", 2*time.Second); err != nil || got != "z\n" {
		t.Fatalf("after the drop: %q, %v", got, err)
	}
}

func TestResetAborts(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("x", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Reset)
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Second))
	_, err := c.r.ReadString('\n')
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset connection: %v, want ECONNRESET", err)
	}
}

func TestForHealsAfterTheDuration(t *testing.T) {
	p := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()
	p.For(ctx, Stall, 100*time.Millisecond)
	if time.Since(began) < 100*time.Millisecond || p.Mode() != Pass {
		t.Fatalf("For returned after %s in mode %s", time.Since(began), p.Mode())
	}
	cancel()
	p.For(ctx, Drop, time.Hour) // a cancelled context ends the fault at once
	if p.Mode() != Pass {
		t.Fatalf("mode %s after a cancelled fault", p.Mode())
	}
}

func TestCloseEndsStalledConnections(t *testing.T) {
	p, err := Start("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	p.Set(Stall)
	if _, err := c.c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close hung on a stalled connection")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
