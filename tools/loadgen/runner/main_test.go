package runner

import (
	"testing"

	"go.uber.org/goleak"
)

// goleak checks that a run leaves no goroutine behind: senders,
// samplers, the progress bar and the client's connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
