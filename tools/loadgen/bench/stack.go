package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// stack is a running hermod-devstack.
type stack struct {
	cmd   *exec.Cmd
	done  chan error
	state stackstate.State
	logs  *tailBuffer
}

// Timeouts of a stack's life.
const (
	stackStartTimeout = 90 * time.Second
	stackStopTimeout  = 45 * time.Second
	settleTimeout     = 30 * time.Second
)

// startStack runs hermod-devstack for spec in dir, on free ports, and
// waits until every pod's metrics are in the collector's bucket (so the
// pickers see the whole fleet before the first request). Its logs go to
// log (and the last lines are kept for errors).
func startStack(ctx context.Context, binDir, dir string, spec *Spec, log io.Writer) (*stack, error) {
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(spec.Stack.Config), 0o644); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	ports, err := freePortRuns([]int{spec.Fleet.Pods, 2 * spec.Fleet.Pods, 1})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	f := spec.Fleet
	simArgs := append(f.Cost.args(), "--seed="+strconv.FormatInt(f.Seed, 10))
	stateFile := filepath.Join(dir, "state.json")
	args := []string{
		"--bin-dir", binDir, "--state-file", stateFile, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--nats-port", "0", "--etcd-port", "0",
		"--sim-base-port", strconv.Itoa(ports[0]), "--kv-base-port", strconv.Itoa(ports[1]),
		"--model", f.Model, "--pods", strconv.Itoa(f.Pods),
		"--speed", strconv.FormatFloat(f.Speed, 'g', -1, 64), "--pickers", strconv.Itoa(spec.Stack.Pickers),
		"--config", cfgFile, "--sim-args", strings.Join(simArgs, ","),
	}
	speedArgs, perPod := devstackSpeedArgs(f)
	if perPod {
		if err := checkDevstackPodSpeeds(binDir, f); err != nil {
			return nil, fmt.Errorf("stack: %w", err)
		}
	}
	args = append(args, speedArgs...)
	if st := spec.Stack; st.Gateways > 1 || st.PairGateways || st.Valkey || len(st.PickerArgs) > 0 {
		args = append(args, "--gateways", strconv.Itoa(max(st.Gateways, 1)), "--pair-gateways="+strconv.FormatBool(st.PairGateways), "--valkey="+strconv.FormatBool(st.Valkey))
		if len(st.PickerArgs) > 0 {
			args = append(args, "--picker-args", strings.Join(st.PickerArgs, ","))
		}
	}
	tail := &tailBuffer{max: 64 << 10}
	var out io.Writer = tail
	if log != nil {
		out = io.MultiWriter(tail, log)
	}
	cmd := exec.Command(filepath.Join(binDir, "hermod-devstack"), args...)
	cmd.Stdout, cmd.Stderr = out, out
	if n := spec.Stack.GoMaxProcs; n > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(n))
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s := &stack{cmd: cmd, done: make(chan error, 1), logs: tail}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitState(ctx, stateFile); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	if err := s.waitMetrics(ctx); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// DevstackPodSpeedsFlag is the hermod-devstack flag that starts every pod
// at a speed of its own (a comma list, one per pod), which fleets of more
// than two pod speeds need: --slow-pods and --slow-speed give the last
// pods one other speed.
const DevstackPodSpeedsFlag = "pod-speeds"

// ErrNoPodSpeeds is returned for a fleet that needs hermod-devstack's
// --pod-speeds when the devstack has no such flag.
var ErrNoPodSpeeds = errors.New("hermod-devstack has no --" + DevstackPodSpeedsFlag + " flag")

// devstackSpeedArgs are the hermod-devstack flags that start f's pods at
// their speeds: --slow-pods and --slow-speed when the fleet is pods at
// speed 1 followed by pods of one other speed (every devstack has them),
// else --pod-speeds (perPod).
func devstackSpeedArgs(f Fleet) (args []string, perPod bool) {
	speeds := f.PodSpeeds()
	if len(speeds) == 0 {
		return []string{"--slow-pods", "0"}, false
	}
	// the run of pods at the last pod's speed, unless that is 1
	last, slow := speeds[len(speeds)-1], 0
	for last != 1 && slow < len(speeds) && speeds[len(speeds)-1-slow] == last {
		slow++
	}
	for _, s := range speeds[:len(speeds)-slow] {
		if s != 1 {
			return []string{"--" + DevstackPodSpeedsFlag, formatSpeeds(speeds)}, true
		}
	}
	if slow == 0 {
		return []string{"--slow-pods", "0"}, false
	}
	return []string{"--slow-pods", strconv.Itoa(slow), "--slow-speed", strconv.FormatFloat(last, 'g', -1, 64)}, false
}

// CheckDevstack checks, before any run starts, that the hermod-devstack in
// binDir can start every spec's fleet: fleets of more than two pod
// speeds need its --pod-speeds (ErrNoPodSpeeds otherwise).
func CheckDevstack(binDir string, specs []Spec) error {
	for i := range specs {
		if _, perPod := devstackSpeedArgs(specs[i].Fleet); perPod {
			if err := checkDevstackPodSpeeds(binDir, specs[i].Fleet); err != nil {
				return fmt.Errorf("run %s: %w", specs[i].Name, err)
			}
		}
	}
	return nil
}

// checkDevstackPodSpeeds asks hermod-devstack -h whether it has
// --pod-speeds.
func checkDevstackPodSpeeds(binDir string, f Fleet) error {
	bin := filepath.Join(binDir, "hermod-devstack")
	out, err := exec.Command(bin, "-h").CombinedOutput()
	if len(out) == 0 && err != nil {
		return fmt.Errorf("hermod-devstack -h: %w", err)
	}
	if !podSpeedsFlag.Match(out) {
		return fmt.Errorf("pod speeds %s: %w (%s has only --slow-pods and --slow-speed: the last pods at one other speed)", f.SpeedList(), ErrNoPodSpeeds, bin)
	}
	return nil
}

// podSpeedsFlag finds --pod-speeds in the flag package's usage.
var podSpeedsFlag = regexp.MustCompile(`(?m)^\s+-{1,2}` + DevstackPodSpeedsFlag + `\b`)

// checkSpeeds checks that the devstack started the pods at the fleet's
// speeds.
func (s *stack) checkSpeeds(f Fleet) error {
	want := f.PodSpeeds()
	got := make([]float64, len(s.state.Pods))
	for i, p := range s.state.Pods {
		got[i] = p.Speed
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("stack: hermod-devstack started pods at speeds %s, the fleet's are %s", formatSpeeds(got), formatSpeeds(want))
	}
	return nil
}

func (s *stack) waitState(ctx context.Context, stateFile string) error {
	deadline := time.NewTimer(stackStartTimeout)
	defer deadline.Stop()
	for {
		if st, err := stackstate.Read(stateFile); err == nil {
			s.state = *st
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stack: %w", err)
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("stack: hermod-devstack exited while starting (%w):\n%s", err, s.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("stack: not ready after %v:\n%s", stackStartTimeout, s.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitMetrics waits until the collector has published every pod's
// metrics.
func (s *stack) waitMetrics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, err := bus.Connect(ctx, s.state.NATSURL, "hermod-bench", bus.WithLogger(quiet))
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	for {
		ms, _, err := bus.LatestMetrics(ctx, js, s.state.Pool)
		if err == nil && len(ms) >= len(s.state.Pods) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("stack: metrics of %d pods not published within %v (have %d): %w", len(s.state.Pods), settleTimeout, len(ms), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop stops the stack as Ctrl-C would and waits for it.
func (s *stack) stop() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil && !isInterrupt(err) {
			return fmt.Errorf("stack: hermod-devstack: %w", err)
		}
		return nil
	case <-time.After(stackStopTimeout):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("stack: hermod-devstack did not stop within %v", stackStopTimeout)
	}
}

func isInterrupt(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			return true
		}
	}
	return false
}

// freePortRuns finds runs of consecutive free ports of the given lengths
// (pods take consecutive ports from a base), below the ephemeral range:
// a port there is never taken by an outgoing connection between the
// search and the pod's bind (a stack's children connect to each other
// all the time).
func freePortRuns(lengths []int) ([]int, error) {
	const lo, hi = 20000, 32000 // below Linux's default 32768-60999
	out := make([]int, len(lengths))
	used := map[int]bool{}
	for i, n := range lengths {
		found := false
		for attempt := 0; attempt < 200 && !found; attempt++ {
			base := lo + rand.IntN(hi-lo-n)
			found = true
			for p := base; found && p < base+n; p++ {
				if used[p] || !portFree(p) {
					found = false
				}
			}
			if found {
				out[i] = base
				for p := base; p < base+n; p++ {
					used[p] = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("no run of %d free ports between %d and %d", n, lo, hi)
		}
	}
	return out, nil
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
