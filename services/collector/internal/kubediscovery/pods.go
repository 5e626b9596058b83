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

// podSet is the desired state of the registry: the entries of every pod that
// counts, kept by the informer's event handlers. Its methods are safe for
// concurrent use.
type podSet struct {
	pool      string
	port      int
	namespace string
	selector  labels.Selector
	log       *slog.Logger

	// changed receives a signal (without blocking; one is enough) whenever
	// the desired state changes.
	changed chan struct{}

	mu   sync.Mutex
	pods map[string][]*registryv1.Endpoint // by namespace/name; only pods that count
}

func newPodSet(pool string, port int, namespace string, selector labels.Selector, log *slog.Logger) *podSet {
	return &podSet{
		pool: pool, port: port, namespace: namespace, selector: selector, log: log,
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
	// The API server filters by namespace and selector; so does this, for
	// clients that do not (and a pod relabelled out of the selection).
	if pod.Namespace != s.namespace || !s.selector.Matches(labels.Set(pod.Labels)) {
		s.drop(key, "not selected")
		return
	}
	v := viewOf(s.pool, s.port, pod)
	if logProblems && len(v.problems) > 0 {
		s.log.Warn("pod annotations ignored", "pod", key, "problems", strings.Join(v.problems, "; "))
	}
	if v.reason != "" {
		s.drop(key, v.reason)
		return
	}
	s.set(key, v.endpoints)
}

// delete applies a deleted pod, also one whose final state the informer
// missed (a DeletedFinalStateUnknown tombstone).
func (s *podSet) delete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		s.log.Warn("kubernetes discovery: deleted object without a key", "type", typeName(obj), "error", err)
		return
	}
	s.drop(key, "deleted")
}

func (s *podSet) set(key string, eps []*registryv1.Endpoint) {
	s.mu.Lock()
	prev, had := s.pods[key]
	same := had && slices.EqualFunc(prev, eps, func(a, b *registryv1.Endpoint) bool { return proto.Equal(a, b) })
	if !same {
		s.pods[key] = eps
	}
	n := len(s.pods)
	s.mu.Unlock()
	if same {
		return
	}
	if had {
		s.log.Debug("pod changed", "pod", key, "endpoints", len(eps))
	} else {
		s.log.Info("pod discovered", "pod", key, "address", eps[0].GetAddress(), "port", eps[0].GetPort(),
			"endpoints", len(eps), "model", eps[0].GetModel(), "pods", n)
	}
	s.notify()
}

func (s *podSet) drop(key, reason string) {
	s.mu.Lock()
	_, had := s.pods[key]
	delete(s.pods, key)
	n := len(s.pods)
	s.mu.Unlock()
	if !had {
		return
	}
	s.log.Info("pod dropped", "pod", key, "reason", reason, "pods", n)
	s.notify()
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
