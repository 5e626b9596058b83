package kubediscovery

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// target picks the pods and their ports: a label selector (nil selects
// no pod) and the target ports (one, or an InferencePool's several).
type target struct {
	selector labels.Selector
	ports    []int
}

func (t target) equal(o target) bool {
	if (t.selector == nil) != (o.selector == nil) || !slices.Equal(t.ports, o.ports) {
		return false
	}
	return t.selector == nil || t.selector.String() == o.selector.String()
}

func (t target) String() string {
	if t.selector == nil {
		return "no pods"
	}
	return fmt.Sprintf("selector %q ports %v", t.selector.String(), t.ports)
}

// podSet is the desired state of the registry: the entries of every pod that
// counts, kept by the informer's event handlers, under a target that may
// change (retarget). Its methods are safe for concurrent use.
type podSet struct {
	pool      string
	namespace string
	log       *slog.Logger

	// changed receives a signal (without blocking; one is enough) whenever
	// the desired state changes.
	changed chan struct{}

	mu     sync.Mutex
	target target
	pods   map[string][]*registryv1.Endpoint // by namespace/name; only pods that count
}

func newPodSet(pool, namespace string, t target, log *slog.Logger) *podSet {
	return &podSet{
		pool: pool, namespace: namespace, target: t, log: log,
		changed: make(chan struct{}, 1),
		pods:    map[string][]*registryv1.Endpoint{},
	}
}

// handler returns the informer's event handlers.
func (s *podSet) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.update(obj, true) },
		UpdateFunc: func(old, obj any) {
			// A resync delivers the same object again: its problems were
			// logged already.
			o, _ := old.(*corev1.Pod)
			n, _ := obj.(*corev1.Pod)
			s.update(obj, o == nil || n == nil || o.ResourceVersion != n.ResourceVersion)
		},
		DeleteFunc: s.delete,
	}
}

// update applies an added or updated pod.
func (s *podSet) update(obj any, logProblems bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		s.log.Warn("kubernetes discovery: unexpected object from the pod informer", "type", typeName(obj))
		return
	}
	key := pod.Namespace + "/" + pod.Name
	// The pod is applied under the lock, so that a concurrent retarget
	// cannot be overwritten by a view of the former target.
	s.mu.Lock()
	o := s.applyLocked(key, pod)
	s.mu.Unlock()
	if s.report(o, logProblems) {
		s.notify()
	}
}

// delete applies a deleted pod, also one whose final state the informer
// missed (a DeletedFinalStateUnknown tombstone).
func (s *podSet) delete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		s.log.Warn("kubernetes discovery: deleted object without a key", "type", typeName(obj), "error", err)
		return
	}
	s.mu.Lock()
	o := s.dropLocked(key, "deleted")
	s.mu.Unlock()
	if s.report(o, false) {
		s.notify()
	}
}

// retarget replaces the target and applies it to pods, every pod of the
// namespace the informer holds: those it now selects are added, the others
// dropped.
func (s *podSet) retarget(t target, pods []*corev1.Pod) {
	s.mu.Lock()
	if s.target.equal(t) {
		s.mu.Unlock()
		return
	}
	s.target = t
	outs := make([]outcome, 0, len(pods)+len(s.pods))
	seen := make(map[string]bool, len(pods))
	for _, pod := range pods {
		key := pod.Namespace + "/" + pod.Name
		seen[key] = true
		outs = append(outs, s.applyLocked(key, pod))
	}
	for _, key := range slices.Sorted(maps.Keys(s.pods)) {
		if !seen[key] {
			outs = append(outs, s.dropLocked(key, "not selected"))
		}
	}
	n := len(s.pods)
	s.mu.Unlock()
	s.log.Info("kubernetes discovery target changed", "target", t.String(), "pods", n)
	changed := false
	for _, o := range outs {
		changed = s.report(o, true) || changed
	}
	if changed {
		s.notify()
	}
}

// outcome is what applying one pod did, reported after the lock is
// released.
type outcome struct {
	key      string
	had      bool // the pod counted before
	changed  bool // its entries changed (or it was dropped)
	dropped  bool
	reason   string
	eps      []*registryv1.Endpoint
	problems []string
	pods     int // pods counted afterwards
}

// applyLocked applies a pod under the current target. s.mu is held.
func (s *podSet) applyLocked(key string, pod *corev1.Pod) outcome {
	// The API server filters by namespace (and selector, without an
	// InferencePool); so does this, for clients that do not (and a pod
	// relabelled out of the selection).
	t := s.target
	if pod.Namespace != s.namespace || t.selector == nil || !t.selector.Matches(labels.Set(pod.Labels)) {
		return s.dropLocked(key, "not selected")
	}
	v := viewOf(s.pool, t.ports, pod)
	var o outcome
	if v.reason != "" {
		o = s.dropLocked(key, v.reason)
	} else {
		o = s.setLocked(key, v.endpoints)
	}
	o.problems = v.problems
	return o
}

func (s *podSet) setLocked(key string, eps []*registryv1.Endpoint) outcome {
	prev, had := s.pods[key]
	same := had && slices.EqualFunc(prev, eps, func(a, b *registryv1.Endpoint) bool { return proto.Equal(a, b) })
	if !same {
		s.pods[key] = eps
	}
	return outcome{key: key, had: had, changed: !same, eps: eps, pods: len(s.pods)}
}

func (s *podSet) dropLocked(key, reason string) outcome {
	_, had := s.pods[key]
	delete(s.pods, key)
	return outcome{key: key, had: had, changed: had, dropped: true, reason: reason, pods: len(s.pods)}
}

// report logs an outcome and says whether the desired state changed.
func (s *podSet) report(o outcome, logProblems bool) bool {
	if logProblems && len(o.problems) > 0 {
		s.log.Warn("pod annotations ignored", "pod", o.key, "problems", strings.Join(o.problems, "; "))
	}
	switch {
	case !o.changed:
		return false
	case o.dropped:
		s.log.Info("pod dropped", "pod", o.key, "reason", o.reason, "pods", o.pods)
	case o.had:
		s.log.Debug("pod changed", "pod", o.key, "endpoints", len(o.eps))
	default:
		s.log.Info("pod discovered", "pod", o.key, "address", o.eps[0].GetAddress(), "port", o.eps[0].GetPort(),
			"endpoints", len(o.eps), "model", o.eps[0].GetModel(), "pods", o.pods)
	}
	return true
}

func (s *podSet) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// desired returns the registry entries of every pod that counts, by name.
// Should two pods yield the same name (a pod named like another's rank),
// the pod first in namespace/name order keeps it.
func (s *podSet) desired() map[string]*registryv1.Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*registryv1.Endpoint, len(s.pods))
	for _, key := range slices.Sorted(maps.Keys(s.pods)) {
		for _, ep := range s.pods[key] {
			if _, taken := out[ep.GetName()]; taken {
				s.log.Debug("endpoint name taken by another pod; skipped", "pod", key, "endpoint", ep.GetName())
				continue
			}
			out[ep.GetName()] = ep
		}
	}
	return out
}

// Desired is desired, for the registry writer.
func (s *podSet) Desired() map[string]*registryv1.Endpoint { return s.desired() }

// Changed receives a value whenever the desired state changes.
func (s *podSet) Changed() <-chan struct{} { return s.changed }

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
