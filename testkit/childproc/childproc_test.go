package childproc

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A process that exits before it is ready is an error with its output.
func TestStartReportsAnEarlyExit(t *testing.T) {
	_, err := Start(exec.Command("sh", "-c", "echo boom >&2; exit 3"), func() error { return errors.New("not yet") }, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the exit with its output", err)
	}
}

// A process that never gets ready is killed at the deadline.
func TestStartKillsWhatIsNeverReady(t *testing.T) {
	_, err := Start(exec.Command("sleep", "30"), func() error { return errors.New("not yet") }, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready within") {
		t.Fatalf("err = %v", err)
	}
}

// Ready once it answers; Kill ends it; OnFreePort retries another port.
func TestStartReadyKillAndFreePort(t *testing.T) {
	tries := 0
	var p *Process
	port := OnFreePort(t, "listener", func(port int) error {
		if tries++; tries == 1 {
			return errors.New("taken")
		}
		l, err := net.Listen("tcp", Addr(port))
		if err != nil {
			return err
		}
		defer func() { _ = l.Close() }()
		p, err = Start(exec.Command("sleep", "30"), func() error { return Dials(Addr(port)) }, 5*time.Second)
		return err
	})
	if tries != 2 || port == 0 {
		t.Fatalf("tries %d port %d", tries, port)
	}
	p.Kill()
	select {
	case <-p.done:
	default:
		t.Fatal("the process is still running after Kill")
	}
}
