package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// Variant is one autoscaled variant of the devstack's fleet: its pods are
// started and stopped to follow the autoscaler's replica target.
type Variant struct {
	Name    string
	Cost    float64
	Min     int
	Max     int
	Initial int
	// Speed is the pods' speed factor (a slower, cheaper accelerator).
	Speed float64
}

// ParseVariants parses --variants: name:cost:min:max:initial[:speed],...
func ParseVariants(list []string) ([]Variant, error) {
	var out []Variant
	seen := map[string]bool{}
	for _, s := range list {
		f := strings.Split(s, ":")
		if len(f) != 5 && len(f) != 6 {
			return nil, fmt.Errorf("--variants: %q is not name:cost:min:max:initial[:speed]", s)
		}
		v := Variant{Name: f[0], Speed: 1}
		if err := coord.ValidateEndpointName(v.Name); err != nil || seen[v.Name] {
			return nil, fmt.Errorf("--variants: %q: the name is empty, has '/' or is repeated", s)
		}
		seen[v.Name] = true
		var err error
		if v.Cost, err = strconv.ParseFloat(f[1], 64); err != nil || v.Cost < 0 {
			return nil, fmt.Errorf("--variants: %q: cost %q is not a number >= 0", s, f[1])
		}
		ints := []*int{&v.Min, &v.Max, &v.Initial}
		for i, p := range ints {
			if *p, err = strconv.Atoi(f[2+i]); err != nil || *p < 0 {
				return nil, fmt.Errorf("--variants: %q: %q is not a count", s, f[2+i])
			}
		}
		if v.Min > v.Max || v.Initial > v.Max {
			return nil, fmt.Errorf("--variants: %q: min and initial must not exceed max", s)
		}
		if len(f) == 6 {
			if v.Speed, err = strconv.ParseFloat(f[5], 64); err != nil || v.Speed <= 0 {
				return nil, fmt.Errorf("--variants: %q: speed %q is not a positive number", s, f[5])
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// variantYAML is the VariantAutoscaling the devstack applies for v; the
// scale target is the devstack's own fleet.
func (s *stack) variantYAML(v Variant) string {
	return fmt.Sprintf(`apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: %s
spec:
  scaleTargetRef:
    apiVersion: hermod.io/v1
    kind: DevstackFleet
    name: %s
  modelID: %q
  minReplicas: %d
  maxReplicas: %d
  variantCost: "%g"
`, v.Name, v.Name, s.o.Model, v.Min, v.Max, v.Cost)
}

// fleet runs the variants' pods, following the replica targets in etcd.
type fleet struct {
	s   *stack
	cli *clientv3.Client

	mu   sync.Mutex
	pods map[string][]*child // by variant, in start order
	seq  map[string]int
	// stopping counts the pods being stopped after a scale-down.
	stopping sync.WaitGroup
}

// applyVariants writes each variant's VariantAutoscaling and, where none
// is set yet, its initial replica target.
func (s *stack) applyVariants(ctx context.Context, cli *clientv3.Client) error {
	for _, v := range s.o.Variants {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(ctx, coord.AutoscalerVariantsPrefix(s.o.Pool)+v.Name, s.variantYAML(v))
		if err == nil {
			key := coord.ReplicaTargetKey(s.o.Pool, v.Name)
			_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, strconv.Itoa(v.Initial))).Commit()
		}
		cancel()
		if err != nil {
			return fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}
	return nil
}

// watch follows the replica targets until ctx ends.
func (f *fleet) watch(ctx context.Context) (*coord.PrefixWatcher, error) {
	prefix := coord.ReplicaTargetsPrefix(f.s.o.Pool)
	return coord.WatchPrefix(ctx, f.cli, prefix, func(kvs map[string][]byte, _ int64) {
		want := map[string]int{}
		for k, v := range kvs {
			n, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil || n < 0 {
				f.s.log.Warn("a replica target is not a count", "key", k, "value", string(v))
				continue
			}
			want[strings.TrimPrefix(k, prefix)] = n
		}
		f.reconcile(ctx, want)
	}, coord.WithLogger(f.s.log))
}

// reconcile starts or stops pods so that each known variant runs its
// target (at most its max).
func (f *fleet) reconcile(ctx context.Context, want map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.s.o.Variants))
	byName := map[string]Variant{}
	for _, v := range f.s.o.Variants {
		names = append(names, v.Name)
		byName[v.Name] = v
	}
	sort.Strings(names)
	for _, name := range names {
		v := byName[name]
		n, ok := want[name]
		if !ok {
			continue
		}
		n = min(n, v.Max)
		// A pod is restarted when it exits, unless --no-restart leaves it
		// down: then it is replaced.
		alive := f.pods[name][:0]
		for _, c := range f.pods[name] {
			select {
			case <-c.finished:
				_ = f.s.sup.remove(ctx, c)
			default:
				alive = append(alive, c)
			}
		}
		f.pods[name] = alive
		for len(f.pods[name]) < n {
			c, err := f.startPod(v)
			if err != nil {
				f.s.sup.fail(fmt.Errorf("variant %s: %w", name, err))
				break
			}
			f.pods[name] = append(f.pods[name], c)
		}
		for len(f.pods[name]) > n {
			last := len(f.pods[name]) - 1
			c := f.pods[name][last]
			f.pods[name] = f.pods[name][:last]
			f.stopping.Go(func() { _ = f.s.sup.remove(context.WithoutCancel(ctx), c) })
			f.s.log.Info("stopping a pod", "variant", name, "pod", c.spec.name, "replicas", n)
		}
	}
}

// startPod starts one vllm-sim pod of v on free ports (the same ones on
// each restart).
func (f *fleet) startPod(v Variant) (*child, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	seq := f.seq[v.Name]
	f.seq[v.Name]++
	name := fmt.Sprintf("%s-%d", v.Name, seq)
	etcd := strings.Join(f.s.state.EtcdEndpoints, ",")
	args := []string{"serve", f.s.o.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--pods", "1",
		"--pod-name", v.Name, "--first-pod-index", strconv.Itoa(seq), "--pool", f.s.o.Pool, "--etcd-endpoints", etcd, "--registration-ttl", "5s",
		"--labels", "hermod.io/variant=" + v.Name,
		"--pod-speed", strconv.FormatFloat(v.Speed, 'g', -1, 64), "--speed", strconv.FormatFloat(f.s.o.Speed, 'g', -1, 64),
		"--kv-events-config", fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d","topic":"kv@{pod}@{model}"}`, ports[1], ports[2]),
		"-v", strconv.Itoa(f.s.o.Verbosity)}
	args = append(append(append(args, toolCallArgs...), f.s.securityArgs("vllm-sim", true)...), f.s.o.SimArgs...)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	c, err := f.s.launch(name, stackstate.RolePod, podAddrs(addr, ports[1]), filepath.Join(f.s.o.BinDir, "vllm-sim"), args...)
	if err != nil {
		return nil, err
	}
	f.s.log.Info("started a pod", "variant", v.Name, "pod", name, "address", addr)
	return c, nil
}

// stopAll stops every pod of the fleet.
func (f *fleet) stopAll(ctx context.Context) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, cs := range f.pods {
		for _, c := range cs {
			if err := f.s.sup.remove(ctx, c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	f.pods = map[string][]*child{}
	f.stopping.Wait()
	return errs
}

// freePorts returns n ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// flowControlFile writes the gateways' flow control for an autoscaled
// fleet: requests queue while the pool is saturated or empty, for up to a
// minute (a pod coming from zero has that long to start). Without
// variants it returns "".
func (s *stack) flowControlFile() (string, error) {
	if len(s.o.Variants) == 0 {
		return "", nil
	}
	dir := s.o.DataDir
	if dir == "" {
		dir = s.tmpDir
	}
	name := filepath.Join(dir, "flow-control.yaml")
	data := "queueing: true\nholdWhenEmpty: true\ndefaultRequestTTL: 60s\n"
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		return "", fmt.Errorf("flow control file: %w", err)
	}
	return name, nil
}

// startFleet applies the variants, starts the fleet following their
// replica targets, and the autoscaler.
func (s *stack) startFleet(ctx context.Context) error {
	if len(s.o.Variants) == 0 {
		return nil
	}
	cli, err := s.etcdSecurity("devstack").NewClient(ctx, s.state.EtcdEndpoints)
	if err != nil {
		return err
	}
	s.cli = cli
	if err := s.applyVariants(ctx, cli); err != nil {
		return err
	}
	s.fleet = &fleet{s: s, cli: cli, pods: map[string][]*child{}, seq: map[string]int{}}
	// The watcher outlives Run's start-up: it stops in shutdown.
	if s.fleetW, err = s.fleet.watch(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	addr, err := s.planAddrs(1)
	if err != nil {
		return err
	}
	s.state.Autoscaler = stackstate.Service{Name: "autoscaler", Ops: addr.next()}
	args := []string{"--pool", s.o.Pool, "--etcd-endpoints", strings.Join(s.state.EtcdEndpoints, ","), "--nats-url", s.state.NATSURL,
		"-v", strconv.Itoa(s.o.Verbosity), "--log-format", "text", "--metrics-listen", s.state.Autoscaler.Ops,
		"--replica", "autoscaler", "--actuator", "local"}
	args = append(args, s.tracingArgs()...)
	args = append(args, s.serviceArgs("autoscaler", false)...)
	args = append(args, s.streamArgs()...)
	_, err = s.launch("autoscaler", stackstate.RoleAutoscaler, map[string]string{"ops": s.state.Autoscaler.Ops}, "hermod-autoscaler", append(args, s.o.AutoscalerArgs...)...)
	return err
}
