package kubediscovery

import (
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

func newTestPodSet(t *testing.T) *podSet {
	t.Helper()
	sel, err := ParseSelector("app=vllm")
	if err != nil {
		t.Fatal(err)
	}
	return newPodSet("p", testNS, target{selector: sel, ports: []int{8000}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// changed says whether the set signalled a change since the last call.
func changed(s *podSet) bool {
	select {
	case <-s.changed:
		return true
	default:
		return false
	}
}

func desiredNames(s *podSet) string {
	return strings.Join(slices.Sorted(maps.Keys(s.desired())), ",")
}

func TestPodSetFollowsEvents(t *testing.T) {
	s := newTestPodSet(t)
	h := s.handler()
	step := func(what, wantNames string, wantChanged bool) {
		t.Helper()
		if got := desiredNames(s); got != wantNames {
			t.Fatalf("%s: desired %q, want %q", what, got, wantNames)
		}
		if got := changed(s); got != wantChanged {
			t.Fatalf("%s: changed = %v, want %v", what, got, wantChanged)
		}
	}

	h.OnAdd(pod("a", "10.0.0.1", true), true)
	h.OnAdd(pod("b", "10.0.0.2", false), true)
	h.OnAdd(pod("c", "", true), true)
	step("added a ready, b unready, c without IP", "a", true)

	b := pod("b", "10.0.0.2", true)
	h.OnUpdate(pod("b", "10.0.0.2", false), b)
	step("b became ready", "a,b", true)

	h.OnUpdate(b, b)
	step("a resync of b", "a,b", false)

	h.OnUpdate(pod("a", "10.0.0.1", true), pod("a", "10.0.0.1", false))
	step("a became unready", "b", true)

	h.OnUpdate(b, pod("b", "10.0.0.2", true, label("app", "other")))
	step("b relabelled out of the selection", "", true)

	h.OnAdd(pod("d", "10.0.0.4", true, func(p *corev1.Pod) { p.Namespace = "elsewhere" }), false)
	step("a pod of another namespace", "", false)

	h.OnAdd(pod("e", "10.0.0.5", true), false)
	h.OnAdd(pod("f", "10.0.0.6", true), false)
	step("e, f added", "e,f", true)

	h.OnDelete(pod("e", "10.0.0.5", true))
	step("e deleted", "f", true)

	// The informer missed f's deletion and delivers a tombstone.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: testNS + "/f", Obj: pod("f", "10.0.0.6", true)})
	step("f's tombstone", "", true)

	h.OnDelete(cache.DeletedFinalStateUnknown{Key: testNS + "/never-seen"})
	step("a tombstone of a pod never seen", "", false)

	h.OnAdd("not a pod", false)
	step("an object that is not a pod", "", false)
}

// Two pods whose entries would have the same name: the first by
// namespace/name keeps it, the other's other ranks still count.
func TestPodSetNameCollision(t *testing.T) {
	s := newTestPodSet(t)
	h := s.handler()
	h.OnAdd(pod("a-rank1", "10.0.0.9", true), false)
	h.OnAdd(pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "2")), false)
	d := s.desired()
	if got := strings.Join(slices.Sorted(maps.Keys(d)), ","); got != "a-rank0,a-rank1" {
		t.Fatalf("desired %q", got)
	}
	if d["a-rank1"].GetAddress() != "10.0.0.1" {
		t.Fatalf("a-rank1 is %v, want pod a's rank (first by name)", d["a-rank1"])
	}
}

// retarget applies a new selector and ports to every pod the informer
// holds: newly selected pods count, the others are dropped; the same
// target again changes nothing; no target selects none.
func TestPodSetRetarget(t *testing.T) {
	s := newPodSet("p", testNS, target{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := s.handler()
	all := []*corev1.Pod{
		pod("a", "10.0.0.1", true),
		pod("b", "10.0.0.2", true, label("app", "sglang")),
		pod("c", "10.0.0.3", false),
	}
	for _, p := range all {
		h.OnAdd(p, true)
	}
	if got := desiredNames(s); got != "" || changed(s) {
		t.Fatalf("without a target: desired %q", got)
	}
	vllm := target{selector: labels.SelectorFromSet(labels.Set{"app": "vllm"}), ports: []int{8000}}
	s.retarget(vllm, all)
	if got := desiredNames(s); got != "a" || !changed(s) {
		t.Fatalf("app=vllm: desired %q", got)
	}
	s.retarget(vllm, all)
	if changed(s) {
		t.Fatal("the same target again signalled a change")
	}
	// Events after the retarget use the new target.
	h.OnUpdate(all[2], pod("c", "10.0.0.3", true))
	if got := desiredNames(s); got != "a,c" || !changed(s) {
		t.Fatalf("c became ready: desired %q", got)
	}
	all[2] = pod("c", "10.0.0.3", true)

	sglang := target{selector: labels.SelectorFromSet(labels.Set{"app": "sglang"}), ports: []int{30000, 30001}}
	s.retarget(sglang, all)
	d := s.desired()
	if got := desiredNames(s); got != "b-rank0,b-rank1" || !changed(s) {
		t.Fatalf("app=sglang on two ports: desired %q", got)
	}
	if d["b-rank1"].GetPort() != 30001 {
		t.Fatalf("b-rank1: %v", d["b-rank1"])
	}
	s.retarget(target{}, all)
	if got := desiredNames(s); got != "" || !changed(s) {
		t.Fatalf("no target: desired %q", got)
	}
}
