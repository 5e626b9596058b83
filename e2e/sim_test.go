package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/childproc"
)

// sim is a running vllm-sim process.
type sim struct {
	cmd  *exec.Cmd
	base int // HTTP port of pod 0
	logs *childproc.Output
}

// freePorts finds n consecutive free loopback ports below the kernel's
// ephemeral range: a port in that range can be taken by any outgoing
// connection (or held by one in TIME_WAIT) between the check and the
// child's bind, which a busy stack's hundreds of connections make likely.
// A port is handed out once per test process: a stack asks for several
// runs (pods, KV sockets, the gateway) before any is bound, and a run
// free when checked must not fall inside another one not bound yet.
func freePorts(t testing.TB, n int) int {
	t.Helper()
	low := ephemeralLow()
	const floor = 10000
	handedOut.Lock()
	defer handedOut.Unlock()
	for tries := 0; tries < 200; tries++ {
		base := floor + rand.IntN(low-floor-n)
		if !handedOut.anyOf(base, n) && portsFree(base, n) {
			for p := base; p < base+n; p++ {
				handedOut.ports[p] = true
			}
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// handedOut are the ports freePorts gave, for the process's life.
var handedOut = &portSet{ports: map[int]bool{}}

// portSet is a set of ports under its lock.
type portSet struct {
	sync.Mutex
	ports map[int]bool
}

// anyOf reports whether a port of [base, base+n) is in the set.
func (s *portSet) anyOf(base, n int) bool {
	for p := base; p < base+n; p++ {
		if s.ports[p] {
			return true
		}
	}
	return false
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 20000 {
		return 32768
	}
	return low
}

// portsFree says whether ports base..base+n-1 can be bound on every
// interface (the pods' KV sockets bind them all).
func portsFree(base, n int) bool {
	for i := range n {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", base+i))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

// startSim runs vllm-sim with args and waits until every pod answers.
func startSim(t testing.TB, pods int, args ...string) *sim {
	t.Helper()
	base := freePorts(t, pods)
	all := append([]string{"serve", "sim-model", "--host", "127.0.0.1", "--port", strconv.Itoa(base), "--pods", strconv.Itoa(pods)}, args...)
	cmd := exec.Command(bin("vllm-sim"), all...)
	logs := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sim{cmd: cmd, base: base, logs: logs}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "signal") {
				t.Errorf("vllm-sim exited: %v; logs:\n%s", err, logs)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("vllm-sim did not stop on SIGTERM; logs:\n%s", logs)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < pods; i++ {
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", base+i))
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %d never became healthy; logs:\n%s", i, logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds(t testing.TB, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// fields after the command name (which may contain spaces)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// streamOne sends one streaming completion and returns the tokens received.
func streamOne(ctx context.Context, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: {") {
			n++
		}
	}
	return n, sc.Err()
}

// BenchmarkSimulatorCPU measures the simulator's own cost: CPU seconds per
// simulated second for 8 pods, each serving 32 concurrent streaming
// requests, at --speed 1 (so simulated time is wall time). It reports
// cpu-cores (target: under 0.25) and the token rate served.
func BenchmarkSimulatorCPU(b *testing.B) {
	const pods, streams = 8, 32
	window := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SIM_BENCH_WINDOW")); err == nil {
		window = d
	}
	s := startSim(b, pods, "--speed", "1")
	prompt := strings.Repeat("The scheduler routes each request to the pod that serves it best. ", 30)
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":256,"stream":true}`, prompt)
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		var tokens, failures atomic.Int64
		var wg sync.WaitGroup
		for p := range pods {
			url := fmt.Sprintf("http://127.0.0.1:%d/v1/completions", s.base+p)
			for range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						n, err := streamOne(ctx, url, body)
						tokens.Add(int64(n))
						if err != nil && ctx.Err() == nil {
							failures.Add(1)
						}
					}
				}()
			}
		}
		time.Sleep(3 * time.Second) // reach steady state
		cpu0, tok0, t0 := cpuSeconds(b, s.cmd.Process.Pid), tokens.Load(), time.Now()
		time.Sleep(window)
		cpu1, tok1, t1 := cpuSeconds(b, s.cmd.Process.Pid), tokens.Load(), time.Now()
		cancel()
		wg.Wait()
		if failures.Load() > 0 {
			b.Fatalf("%d requests failed; logs:\n%s", failures.Load(), s.logs)
		}
		elapsed := t1.Sub(t0).Seconds()
		b.ReportMetric((cpu1-cpu0)/elapsed, "cpu-cores")
		b.ReportMetric(float64(tok1-tok0)/elapsed, "tokens/s")
	}
}

// The vllm-sim binary takes vLLM's command line and serves the OpenAI API.
func TestSimulatorBinary(t *testing.T) {
	s := startSim(t, 2, "--speed", "20", "--served-model-name", "llama", "llama-2", "--max-num-seqs", "64",
		"--tensor-parallel-size", "2", "--enable-lora", "--lora-modules", "sql=/a/sql", `{"name":"chat","path":"/a/chat"}`, "--max-loras", "2")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/models", s.base+1))
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "llama,llama-2,sql,chat" {
		t.Errorf("models %v", ids)
	}
	n, err := streamOne(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/v1/completions", s.base), `{"model":"sql","prompt":"hello","max_tokens":4,"stream":true}`)
	if err != nil || n != 4 {
		t.Errorf("streamed %d chunks: %v", n, err)
	}
	if !strings.Contains(s.logs.String(), "--tensor-parallel-size") {
		t.Errorf("ignored vLLM flags are not reported:\n%s", s.logs)
	}
	// a bad command line exits 2 with a clear message
	out, err := exec.Command(bin("vllm-sim"), "serve", "m", "--max-num-seqs", "zero").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "max-num-seqs") {
		t.Errorf("bad flag: exit %d: %s", code, out)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
