package bench

import (
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
