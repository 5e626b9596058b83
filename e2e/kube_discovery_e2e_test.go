package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/childproc"
)

// inferencePoolGVR is the InferencePool's resource.
var inferencePoolGVR = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// Kubernetes discovery from an InferencePool against a real kube-apiserver:
// the chart's InferencePool and the collector's ServiceAccount and RBAC
// (global.inferencePool.create) are created in a namespace, two
// hermod-collector replicas follow the pool with that account's token on a
// devstack's NATS and etcd, and the endpoint registry must equal exactly
// the Ready pods the pool selects, on its target ports, as the test
// changes them: pods turn Ready and not ready, one is deleted (it stays
// Terminating: no kubelet confirms), one is added, the pool's selector and
// then its target ports change, and the discovery leader is killed (-9)
// while pods change, so that the other replica takes over and writes what
// changed during the handover. No kubelet or controller runs: the test
// creates the Pod objects (bound to a node) and writes their status
// (phase Running, pod IP, the Ready condition) through the status
// subresource, as the kubelet would. The pods the pool selects in the end
// are real vllm-sim processes, each on a loopback address of its own on
// the target ports, so the registry's addresses are checked by use: the
// collectors scrape them (hermodctl endpoints list shows their metrics)
// and the devstack's gateway routes a request to one. Every step's
// convergence time (API write -> registry equal, seen through an etcd
// watch) is logged, and the registry is compared with hermodctl endpoints
// list -o json after each step.
func TestKubeDiscoveryFollowsInferencePool(t *testing.T) {
	srv := kube.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	k := newKubeClients(t, srv.Config())
	installCRDs(ctx, t, k, crdDir)
	const pool, memberTTL = "kube-discovery", 2 * time.Second
	s := startStack(t, "--pods", "0", "--pool", pool)
	ns := kubeNamespace(ctx, t, k, "discovery")
	port := freePorts(t, 2) // the pods' target ports: port, and port+1 later

	// The chart's InferencePool (selector app=vllm, one target port) and
	// the collector's ServiceAccount and Role; the collectors authenticate
	// with that account's token.
	objs := renderChart(t, ns, "global.pool="+pool, "global.inferencePool.create=true",
		"global.inferencePool.selector.app=vllm", fmt.Sprintf("global.inferencePool.targetPorts={%d}", port))
	kubeconfig := chartServiceAccount(ctx, t, srv, k, ns, "collector", objs,
		apiCall{Namespace: ns, Verb: "watch", Resource: "pods"},
		apiCall{Namespace: ns, Verb: "watch", Group: inferencePoolGVR.Group, Resource: inferencePoolGVR.Resource, Name: pool})
	ip := renderedObject(objs, "InferencePool")
	if ip == nil {
		t.Fatal("the chart renders no InferencePool with global.inferencePool.create")
	}
	pools := k.dyn.Resource(inferencePoolGVR).Namespace(ns)
	if _, err := pools.Create(ctx, ip, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatal(err)
	}

	f := &podFleet{cs: k.cs, pools: pools, ns: ns, pool: pool, model: s.state.Model, pods: map[string]*modelPod{},
		selector: map[string]string{"app": "vllm"}, ports: []int{port}}
	// vllm-0..3 are selected (vllm-3 Running but not Ready), vllm-b-* are
	// not yet; vllm-b-* run vllm-sim on their addresses.
	for i := range 4 {
		f.add(ctx, t, fmt.Sprintf("vllm-%d", i), fmt.Sprintf("127.0.0.%d", 10+i), map[string]string{"app": "vllm"}, i < 3)
	}
	for i := range 2 {
		name, addr := fmt.Sprintf("vllm-b-%d", i), fmt.Sprintf("127.0.0.%d", 20+i)
		startPodSim(t, name, addr, port, s.state.Model)
		f.add(ctx, t, name, addr, map[string]string{"app": "vllm-b"}, true)
	}
	startPodSim(t, "vllm-b-2", "127.0.0.22", port, s.state.Model)

	reg := followRegistry(t, s, pool)
	if got := reg.latest().eps; len(got) != 0 {
		t.Fatalf("the registry holds %v before any collector runs", got)
	}
	var rows []string
	prev, prevAt := map[string]string{}, time.Now()
	// step checks that the registry held the previous step's entries until
	// at, when the test changed something, then waits until it holds the
	// ones the pods now call for.
	step := func(name string, at time.Time) time.Duration {
		t.Helper()
		if snap, ok := reg.changedBetween(prev, prevAt, at); ok {
			t.Fatalf("before %q the registry changed to %v at %v, without a change of the pods or the pool (it held %v)", name, snap.eps, snap.at, prev)
		}
		want := f.expected()
		took := reg.waitEqual(t, name, want, at, 15*time.Second)
		prev, prevAt = want, at.Add(took)
		if got := s.listedEndpoints(t); !maps.Equal(got, want) {
			t.Fatalf("%s: hermodctl endpoints list has %v, want %v", name, got, want)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %v |", name, len(want), took.Round(time.Millisecond)))
		return took
	}

	// Two collector replicas follow the InferencePool; the first to win
	// the election discovery-<pool> writes the registry.
	args := []string{"--inference-pool", pool, "--discovery=kubernetes", "--discovery-namespace", ns, "--kubeconfig", kubeconfig,
		"--member-ttl", memberTTL.String()}
	started := time.Now()
	collectors := []*serviceProc{
		startService(t, s, "hermod-collector", "collector", "collector-kube-a", args...),
		startService(t, s, "hermod-collector", "collector", "collector-kube-b", args...),
	}
	step("collectors started (first sync)", started)
	leader := discoveryLeader(t, collectors, nil)

	at := time.Now()
	f.setReady(ctx, t, "vllm-3", true)
	step("vllm-3 turns Ready", at)

	at = time.Now()
	f.setReady(ctx, t, "vllm-1", false)
	step("vllm-1 turns not ready", at)

	at = time.Now()
	f.delete(ctx, t, "vllm-2")
	step("vllm-2 deleted (Terminating)", at)

	at = time.Now()
	f.add(ctx, t, "vllm-4", "127.0.0.14", map[string]string{"app": "vllm"}, true)
	step("vllm-4 added, Ready", at)

	at = time.Now()
	f.setPool(ctx, t, map[string]string{"app": "vllm-b"}, []int{port})
	step("selector app=vllm -> app=vllm-b", at)

	at = time.Now()
	f.setPool(ctx, t, map[string]string{"app": "vllm-b"}, []int{port, port + 1})
	step("targetPorts +1 (ranks)", at)

	// The leader dies without resigning; pods change at once, before the
	// other replica can lead (its election waits for the dead one's lease).
	before := f.expected()
	killed := time.Now()
	leader.kill()
	f.setReady(ctx, t, "vllm-b-1", false)
	f.add(ctx, t, "vllm-b-2", "127.0.0.22", map[string]string{"app": "vllm-b"}, true)
	next := discoveryLeader(t, collectors, leader)
	tookOver := time.Since(killed)
	handover := step("leader killed (-9); vllm-b-1 not ready, vllm-b-2 added meanwhile", killed)
	// The dead leader's entries outlive its election key (their lease has
	// twice its TTL), and the next leader rewrites them under its own
	// lease on taking over: a pod Ready throughout never leaves the
	// registry.
	gap := reg.missingDuring(before, f.expected(), killed)
	if gap > 0 {
		t.Errorf("entries of pods Ready throughout were missing for %v during the handover", gap)
	}

	at = time.Now()
	f.setReady(ctx, t, "vllm-b-1", true)
	step("vllm-b-1 Ready again (new leader)", at)

	// The registry's entries are the pods' real addresses: the collectors
	// scrape them, and the gateway routes to them.
	want := f.expected()
	waitFor(t, 15*time.Second, "metrics of every registered endpoint", func() bool {
		for _, ep := range s.listEndpoints(t) {
			if ep.Metrics == nil {
				return false
			}
		}
		return true
	})
	r := s.send(ctx, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":4}`, s.state.Model), false)
	if !r.ok() || !slices.Contains(slices.Collect(maps.Values(want)), r.servedBy) {
		t.Fatalf("a request through the gateway: %d %v, served by %q, want one of %v: %s", r.status, r.err, r.servedBy, want, r.body)
	}
	t.Logf("registry convergence (API write -> registry equal to the Ready pods, etcd watch):\n| step | endpoints | convergence |\n|---|---|---|\n%s",
		strings.Join(rows, "\n"))
	t.Logf("leader change: %s killed, %s leads %v later, registry equal %v after the kill; stable entries missing for %v during the handover (member TTL %v)",
		leader.name, next.name, tookOver.Round(time.Millisecond), handover.Round(time.Millisecond), gap.Round(time.Millisecond), memberTTL)
}

// discoveryLeader waits until one replica other than not (nil: any) is the
// discovery leader and returns it.
func discoveryLeader(t *testing.T, collectors []*serviceProc, not *serviceProc) *serviceProc {
	t.Helper()
	var leader *serviceProc
	waitFor(t, 20*time.Second, "a discovery leader", func() bool {
		for _, c := range collectors {
			if c == not || c.exited() {
				continue
			}
			if v, err := c.gauge("hermod_collector_discovery_leader"); err == nil && v == 1 {
				leader = c
				return true
			}
		}
		return false
	})
	return leader
}

// modelPod is a model-server pod as the test keeps it.
type modelPod struct {
	ip          string
	labels      map[string]string
	ready       bool
	terminating bool
}

// podFleet creates the model-server pods and writes their status: no
// kubelet runs, so the test does what it would (phase Running, the pod IP,
// the Ready condition, through the status subresource). It also edits the
// InferencePool, and knows what the registry must hold.
type podFleet struct {
	cs       *kubernetes.Clientset
	pools    dynamic.ResourceInterface
	ns, pool string
	model    string
	pods     map[string]*modelPod
	selector map[string]string // the InferencePool's matchLabels
	ports    []int             // and targetPorts
}

// add creates a pod bound to a node, then writes its status: Running at
// ip, Ready or not.
func (f *podFleet) add(ctx context.Context, t *testing.T, name, ip string, labels map[string]string, ready bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"hermod.io/model": f.model}},
		Spec: corev1.PodSpec{
			NodeName:   "node-0", // bound: the scheduler's work done
			Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest"}},
		},
	}
	if _, err := f.cs.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.pods[name] = &modelPod{ip: ip, labels: labels}
	f.setReady(ctx, t, name, ready)
}

// setReady writes the pod's status as the kubelet would: Running, its IP,
// and the Ready condition.
func (f *podFleet) setReady(ctx context.Context, t *testing.T, name string, ready bool) {
	t.Helper()
	p := f.pods[name]
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := f.cs.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		readyStatus := corev1.ConditionFalse
		if ready {
			readyStatus = corev1.ConditionTrue
		}
		started := pod.CreationTimestamp
		pod.Status = corev1.PodStatus{
			Phase:     corev1.PodRunning,
			HostIP:    "10.0.0.1",
			PodIP:     p.ip,
			PodIPs:    []corev1.PodIP{{IP: p.ip}},
			StartTime: &started,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: readyStatus, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
			},
		}
		_, err = f.cs.CoreV1().Pods(f.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status of pod %s: %v", name, err)
	}
	p.ready = ready
}

// delete deletes the pod. A pod bound to a node is deleted gracefully: it
// stays, Terminating (deletionTimestamp set), until its kubelet confirms,
// which here never happens.
func (f *podFleet) delete(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := f.cs.CoreV1().Pods(f.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := f.cs.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("pod %s after a graceful delete: %v, deletionTimestamp %v; want it Terminating", name, err, pod.GetDeletionTimestamp())
	}
	f.pods[name].terminating = true
}

// setPool sets the InferencePool's selector and target ports.
func (f *podFleet) setPool(ctx context.Context, t *testing.T, selector map[string]string, ports []int) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := f.pools.Get(ctx, f.pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		labels := map[string]any{}
		for k, v := range selector {
			labels[k] = v
		}
		targets := make([]any, len(ports))
		for i, p := range ports {
			targets[i] = map[string]any{"number": int64(p)}
		}
		if err := unstructured.SetNestedMap(o.Object, labels, "spec", "selector", "matchLabels"); err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(o.Object, targets, "spec", "targetPorts"); err != nil {
			return err
		}
		_, err = f.pools.Update(ctx, o, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
		return err
	})
	if err != nil {
		t.Fatalf("update the InferencePool: %v", err)
	}
	f.selector, f.ports = selector, ports
}

// expected is the registry the pods call for: name -> address:port of each
// Ready, not terminating pod the selector picks, on every target port
// (<pod>-rank<i> on the i-th when there are several).
func (f *podFleet) expected() map[string]string {
	out := map[string]string{}
	for name, p := range f.pods {
		if !p.ready || p.terminating {
			continue
		}
		match := true
		for k, v := range f.selector {
			match = match && p.labels[k] == v
		}
		if !match {
			continue
		}
		for i, port := range f.ports {
			key := name
			if len(f.ports) > 1 {
				key = name + "-rank" + strconv.Itoa(i)
			}
			out[key] = net.JoinHostPort(p.ip, strconv.Itoa(port))
		}
	}
	return out
}

// registrySnap is the registry at a moment: name -> address:port, and the
// entries that discovery does not own.
type registrySnap struct {
	at      time.Time
	eps     map[string]string
	foreign []string
}

// registryLog records every snapshot of a pool's registry an etcd watch
// delivers.
type registryLog struct {
	mu    sync.Mutex
	snaps []registrySnap
	first chan struct{}
	once  sync.Once
}

func followRegistry(t *testing.T, s *devstack, pool string) *registryLog {
	t.Helper()
	l := &registryLog{first: make(chan struct{})}
	w, err := coord.WatchEndpoints(context.Background(), s.etcdClient(t), pool, func(snap coord.Snapshot) {
		r := registrySnap{at: time.Now(), eps: map[string]string{}}
		for name, ep := range snap.Endpoints {
			r.eps[name] = net.JoinHostPort(ep.GetAddress(), strconv.Itoa(int(ep.GetPort())))
			if ep.GetLabels()["hermod.io/discovered-by"] != "kubernetes" {
				r.foreign = append(r.foreign, name)
			}
		}
		l.mu.Lock()
		l.snaps = append(l.snaps, r)
		l.mu.Unlock()
		l.once.Do(func() { close(l.first) })
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	select {
	case <-l.first:
	case <-time.After(10 * time.Second):
		t.Fatal("no registry snapshot within 10s")
	}
	return l
}

func (l *registryLog) latest() registrySnap {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snaps[len(l.snaps)-1]
}

// waitEqual waits until the registry holds exactly want, all of it
// discovery's, and returns how long after at it first did.
func (l *registryLog) waitEqual(t *testing.T, step string, want map[string]string, at time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		last := l.latest()
		if maps.Equal(last.eps, want) && len(last.foreign) == 0 {
			// Convergence is the first snapshot since at of the run of
			// equal ones the latest ends (a new leader rewrites equal
			// entries).
			l.mu.Lock()
			i := len(l.snaps) - 1
			for i > 0 && l.snaps[i-1].at.After(at) && maps.Equal(l.snaps[i-1].eps, want) {
				i--
			}
			first := l.snaps[i].at
			l.mu.Unlock()
			return max(0, first.Sub(at))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %v the registry holds %v (not discovery's: %v), want %v", step, within, last.eps, last.foreign, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// changedBetween returns a snapshot taken between from and to that does not
// hold exactly want, if there is one.
func (l *registryLog) changedBetween(want map[string]string, from, to time.Time) (registrySnap, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.snaps {
		if !s.at.Before(from) && s.at.Before(to) && !maps.Equal(s.eps, want) {
			return s, true
		}
	}
	return registrySnap{}, false
}

// missingDuring is how long, from since on, some entry that both before and
// after hold (a pod Ready throughout) was missing from the registry.
func (l *registryLog) missingDuring(before, after map[string]string, since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var total time.Duration
	for i, s := range l.snaps {
		if s.at.Before(since) {
			continue
		}
		missing := false
		for name, addr := range before {
			if after[name] == addr && s.eps[name] != addr {
				missing = true
			}
		}
		if !missing {
			continue
		}
		end := time.Now()
		if i+1 < len(l.snaps) {
			end = l.snaps[i+1].at
		}
		total += end.Sub(s.at)
	}
	return total
}

// listedEndpoint is one entry of hermodctl endpoints list -o json.
type listedEndpoint struct {
	Endpoint struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Port    int    `json:"port"`
	} `json:"endpoint"`
	Metrics *struct {
		Time string `json:"time"`
	} `json:"metrics"`
}

// listEndpoints runs hermodctl endpoints list -o json on the stack.
func (s *devstack) listEndpoints(t *testing.T) []listedEndpoint {
	t.Helper()
	out, errs, code := hermodctl(t, "--state-file", s.stateFile, "endpoints", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("hermodctl endpoints list: exit %d: %s", code, errs)
	}
	var eps []listedEndpoint
	if err := json.Unmarshal([]byte(out), &eps); err != nil {
		t.Fatalf("hermodctl endpoints list -o json: %v\n%s", err, out)
	}
	return eps
}

// listedEndpoints is hermodctl's list as name -> address:port.
func (s *devstack) listedEndpoints(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ep := range s.listEndpoints(t) {
		out[ep.Endpoint.Name] = net.JoinHostPort(ep.Endpoint.Address, strconv.Itoa(ep.Endpoint.Port))
	}
	return out
}

// startPodSim runs a vllm-sim as the pod name: on ip (a loopback address
// of its own, as a pod's IP) at port and port+1, until the test ends.
func startPodSim(t *testing.T, name, ip string, port int, model string) {
	t.Helper()
	cmd := exec.Command(bin("vllm-sim"), "serve", model, "--host", ip, "--port", strconv.Itoa(port), "--pods", "2", "--pod-name", name)
	logs := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "signal") {
				t.Errorf("vllm-sim %s exited: %v\n%s", name, err, tail(logs.String(), 20))
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			err := <-done
			t.Errorf("vllm-sim %s did not stop on SIGTERM (killed: %v):\n%s", name, err, tail(logs.String(), 20))
		}
	})
	for _, p := range []int{port, port + 1} {
		url := "http://" + net.JoinHostPort(ip, strconv.Itoa(p)) + "/health"
		waitFor(t, 10*time.Second, "vllm-sim "+name+" at "+url, func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}
