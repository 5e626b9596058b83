package kubeapi

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
)

// Start runs a server for tb alone and closes it when tb ends (opts: at most
// one; the zero Options otherwise). See Shared for the skip rules.
func Start(tb testing.TB, opts ...Options) *Server {
	tb.Helper()
	skipShort(tb)
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	s, err := Run(context.Background(), o)
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// Shared is one server for all the tests of a test binary: the first Get
// starts it, later ones return it, and Close, called by TestMain after
// m.Run, stops it. Tests sharing it keep apart by namespace.
//
//	var kube kubeapi.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		_ = kube.Close()
//		os.Exit(code)
//	}
//
//	func TestX(t *testing.T) {
//		srv := kube.Get(t)
//		...
//	}
//
// Get and Start skip the test under -short. When bin/kube-apiserver is
// missing they skip it too, saying how to build it, unless the test runs
// under make (MAKELEVEL is set), whose test targets build it first: there
// the test fails.
type Shared struct {
	// Options are the server's; set them before the first Get.
	Options Options

	mu     sync.Mutex
	tried  bool
	srv    *Server
	err    error
	closed bool
}

// Get returns the shared server, starting it on the first call. A failed
// start fails (or skips) every test that asks, without starting again.
func (sh *Shared) Get(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		tb.Fatal("kubeapi: the shared server is closed")
	}
	if !sh.tried {
		sh.tried = true
		sh.srv, sh.err = Run(context.Background(), sh.Options)
	}
	if sh.err != nil {
		unavailable(tb, sh.err)
	}
	return sh.srv
}

// Close stops the shared server if one was started.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	if sh.srv == nil {
		return nil
	}
	return sh.srv.Close()
}

func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts kube-apiserver and etcd (skipped with -short)")
	}
}

// unavailable ends tb for a server that did not start: a skip for a missing
// binary outside make, a failure otherwise.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoBinary) && os.Getenv("MAKELEVEL") == "" {
		tb.Skip(err)
	}
	tb.Fatal(err)
}
