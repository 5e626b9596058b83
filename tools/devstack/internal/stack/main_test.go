package stack

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hermod/hermod/testkit/coordtest"
)

// TestMain runs the test binary as a child process of the supervisor's
// tests when testChildEnv is set; else it runs the tests and checks for
// leaked goroutines once the etcd clusters' peer
// connections have ended (they outlive a closed cluster a few seconds).
func TestMain(m *testing.M) {
	if os.Getenv(testChildEnv) != "" { // the binary runs as a supervised child (child_test.go)
		os.Exit(testChild(os.Args[1:]))
	}
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
