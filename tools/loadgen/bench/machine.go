package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg gives it.
type LoadAvg [3]float64

// String formats the three averages as uptime does.
func (l LoadAvg) String() string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// ReadLoadAvg reads the machine's load average (Linux only).
func ReadLoadAvg() (LoadAvg, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return LoadAvg{}, fmt.Errorf("load average: %w", err)
	}
	return parseLoadAvg(string(b))
}

// readLoadAvg is ReadLoadAvg for results: nil where there is none.
func readLoadAvg() *LoadAvg {
	l, err := ReadLoadAvg()
	if err != nil {
		return nil
	}
	return &l
}

func parseLoadAvg(s string) (LoadAvg, error) {
	var l LoadAvg
	f := strings.Fields(s)
	if len(f) < 3 {
		return l, fmt.Errorf("load average: %q: want three numbers", s)
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return l, fmt.Errorf("load average: %q: %w", s, err)
		}
		l[i] = v
	}
	return l, nil
}

// maxNoiseThreads bounds a noisy neighbour.
const maxNoiseThreads = 256

// CheckNoisyNeighbour checks a noisy neighbour's thread count.
func CheckNoisyNeighbour(threads int) error {
	if threads < 0 || threads > maxNoiseThreads {
		return fmt.Errorf("threads must be between 0 and %d (got %d)", maxNoiseThreads, threads)
	}
	return nil
}

// threads is "1 thread" or "n threads".
func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// noise is a noisy neighbour: threads that burn CPU until stopped, so
// that a stack competes for the machine's cores as on a busy node.
type noise struct {
	stop atomic.Bool
	wg   sync.WaitGroup
	// procs is the GOMAXPROCS to restore (0: unchanged).
	procs int
}

// noiseSink keeps the spinning threads' arithmetic from being optimized
// away.
var noiseSink atomic.Uint64

// startNoise starts n spinning threads in this process, each a goroutine
// locked to its own OS thread. GOMAXPROCS grows by n meanwhile, so that
// the spinners take the operating system's CPU time from the stack (and
// this process's load generator) as another process's threads would, and
// not the Go scheduler's processors from the load generator.
func startNoise(n int) *noise {
	nz := &noise{}
	if n <= 0 {
		return nz
	}
	nz.procs = runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(nz.procs + n)
	for range n {
		nz.wg.Add(1)
		go func() {
			defer nz.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			x := uint64(0x9e3779b97f4a7c15)
			for !nz.stop.Load() {
				for range 1 << 14 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
			}
			noiseSink.Add(x)
		}()
	}
	return nz
}

// Stop stops the threads, waits for them and restores GOMAXPROCS.
func (nz *noise) Stop() {
	nz.stop.Store(true)
	nz.wg.Wait()
	if nz.procs > 0 {
		runtime.GOMAXPROCS(nz.procs)
		nz.procs = 0
	}
}
