package predictedlatency_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The model refits in short-lived goroutines: none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
