package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestParseLoadAvg(t *testing.T) {
	l, err := parseLoadAvg("0.52 1.07 2.25 3/812 12345\n")
	if err != nil || l != (LoadAvg{0.52, 1.07, 2.25}) || l.String() != "0.52 1.07 2.25" {
		t.Fatalf("load %v, %v", l, err)
	}
	for _, bad := range []string{"", "0.5 1", "0.5 x 1"} {
		if _, err := parseLoadAvg(bad); err == nil || !strings.Contains(err.Error(), "load average") {
			t.Errorf("parseLoadAvg(%q): %v", bad, err)
		}
	}
}

// The noisy neighbour's threads burn CPU until stopped, and stop.
func TestNoise(t *testing.T) {
	defer goleak.VerifyNone(t)
	procs := runtime.GOMAXPROCS(0)
	nz := startNoise(2)
	if got := runtime.GOMAXPROCS(0); got != procs+2 {
		t.Fatalf("GOMAXPROCS %d while 2 threads spin, want %d", got, procs+2)
	}
	time.Sleep(20 * time.Millisecond)
	nz.Stop()
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Fatalf("GOMAXPROCS %d after, want %d", got, procs)
	}
	if noiseSink.Load() == 0 {
		t.Fatal("the threads did no work")
	}
	startNoise(0).Stop()
	if err := CheckNoisyNeighbour(-1); err == nil || !strings.Contains(err.Error(), "between 0 and 256 (got -1)") {
		t.Fatalf("CheckNoisyNeighbour(-1) = %v", err)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// a command name with a space and a parenthesis; utime 250, stime 50
	line := "4242 (hermod (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 123 456 789\n"
	got, err := parseProcStatCPU(line)
	if err != nil || got != 3*time.Second {
		t.Fatalf("got %v %v, want 3s", got, err)
	}
	if _, err := parseProcStatCPU("4242 hermod S 1"); err == nil {
		t.Fatal("a line without a command name parsed")
	}
	// spin until the kernel has counted a tick of this process's CPU
	var self time.Duration
	for deadline, x := time.Now().Add(10*time.Second), 0; self == 0 && time.Now().Before(deadline); x++ {
		if x%1000000 == 0 {
			if self, err = ProcessCPU(os.Getpid()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if self <= 0 {
		t.Fatalf("this process's CPU after spinning: %v", self)
	}
	rss, err := PeakRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("this process's peak RSS: %d %v", rss, err)
	}
}
