package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times (100 on every Linux architecture Go supports).
const clockTicks = 100

// ProcessCPU is the CPU time (user and system) a process has used, from
// /proc/<pid>/stat.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d CPU: %w", pid, err)
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line; the command name, field 2, may hold spaces and
// parentheses, so the fields are counted after its last ")".
func parseProcStatCPU(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %q: too few fields", s)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// PeakRSS is the most resident memory a process has held (VmHWM of
// /proc/<pid>/status), in bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d memory: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("process %d VmHWM %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("process %d: no VmHWM in its status", pid)
}
