package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/gateway/internal/auth"
	"github.com/hermod/hermod/services/gateway/internal/models"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
	"github.com/hermod/hermod/services/gateway/internal/responses"
)

type refusingPicker struct{}

func (refusingPicker) Pick(context.Context, *pickerv1.PickRequest) (pickerclient.Decision, error) {
	return pickerclient.Decision{}, errors.New("no picker in this test")
}

// connCounter follows a server's connections (ConnState).
type connCounter struct{ accepted, open atomic.Int64 }

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.accepted.Add(1)
		c.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// heapPeak samples the heap until stop is closed and returns its peak.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// slowClient declares a body of length bytes and sends it a byte every
// 100ms (silent: 10 bytes, then nothing), reading any answer, until the
// server closes the connection or stop is closed; it returns the status
// line it got.
func slowClient(addr, path string, length int, silent bool, stop <-chan struct{}) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, length)
	if _, err := c.Write([]byte(head)); err != nil {
		return "", fmt.Errorf("write the head: %w", err)
	}
	var status string
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		r := bufio.NewReader(c)
		line, _ := r.ReadString('\n')
		status = strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, r) // until the server closes
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sent := 1; ; sent++ {
		select {
		case <-closed:
			return status, nil
		case <-stop:
			_ = c.Close()
			<-closed
			return status, errors.New("the server had not closed the connection")
		case <-tick.C:
		}
		if !silent || sent < 10 {
			_, _ = c.Write([]byte(" ")) // a failed write: the server closed; the reader sees it
		}
	}
}

// 50 connections trickle their bodies (or go silent), declaring 16 MB or
// 200 kB, to every handler that takes a body and to one that reads none:
// the gateway's heap stays far below what they declared, every body gets
// its answer at the read timeout and every connection is closed then.
func TestSlowBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("slow-body test: -short")
	}
	const conns, timeout = 50, time.Second
	quiet := slog.New(slog.DiscardHandler)
	h := proxy.New(proxy.Options{Pool: "p", Picker: refusingPicker{}, Reporter: noReports{}, Logger: quiet})
	rh := responses.New(responses.Options{Chat: h.Completions(openai.APIChatCompletions)})
	srv := apiServer(routes(h, rh, models.New(), nil, auth.TenantTrust{}, nil, telemetry.OpsHandler(telemetry.NewRegistry(), nil), false), timeout, nil)
	var cc connCounter
	srv.ConnState = cc.track
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	defer func() { _ = srv.Close(); <-served }()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stopSampling := make(chan struct{})
	peak := heapPeak(stopSampling)
	stop := make(chan struct{})
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/chat/completions", "/v1/nope"}
	statuses := make([]string, conns)
	errs := make([]error, conns)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range conns {
		length := 16_000_000
		if i%10 >= 5 {
			length = 200_000
		}
		wg.Go(func() {
			statuses[i], errs[i] = slowClient(lis.Addr().String(), paths[i%len(paths)], length, i%3 == 2, stop)
		})
	}
	freed := time.Duration(-1)
	for time.Since(start) < 5*timeout {
		if cc.accepted.Load() == conns && cc.open.Load() == 0 {
			freed = time.Since(start)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// the clients see the closes a moment later
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()
	select {
	case <-clientsDone:
	case <-time.After(2 * time.Second):
	}
	close(stop)
	<-clientsDone
	close(stopSampling)
	grown := int64(<-peak) - int64(base)
	t.Logf("%d slow bodies: heap %.1f MB at start, peak %+.1f MB; every connection closed after %v (read timeout %v)",
		conns, float64(base)/1e6, float64(grown)/1e6, freed, timeout)
	if grown > 100<<20 {
		t.Errorf("the heap grew by %.1f MB for %d slow bodies, want < 100 MB", float64(grown)/1e6, conns)
	}
	if freed < 0 || freed > timeout+750*time.Millisecond {
		t.Errorf("connections freed after %v (%d of %d accepted, %d open), want within the read timeout %v", freed, cc.accepted.Load(), conns, cc.open.Load(), timeout)
	}
	for i := range conns {
		want := "HTTP/1.1 408"
		if paths[i%len(paths)] == "/v1/nope" {
			want = "HTTP/1.1 404" // answered without reading; the unread body is bounded all the same
		}
		if errs[i] != nil || !strings.HasPrefix(statuses[i], want) {
			t.Errorf("connection %d (%s): %q %v, want %s", i, paths[i%len(paths)], statuses[i], errs[i], want)
		}
	}
}
