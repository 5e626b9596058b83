package stack

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hermod/hermod/testkit/coordtest"
)

// TestMain checks for leaked goroutines once the etcd clusters' peer
// connections have ended (they outlive a closed cluster a few seconds).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		coordtest.SettleGoroutines()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: unexpected goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}
