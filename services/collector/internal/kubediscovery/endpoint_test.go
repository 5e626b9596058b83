package kubediscovery

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/collector/internal/inferencepool"
)

func annotate(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func label(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[k] = v }
}

// want is the entry of a plain ready pod at ip, changed by mods.
func want(name, ip string, port int32, mods ...func(*registryv1.Endpoint)) *registryv1.Endpoint {
	ep := &registryv1.Endpoint{
		Name: name, Pool: "p", Address: ip, Port: port,
		Labels:       map[string]string{"app": "vllm", LabelDiscoveredBy: DiscoveredByKubernetes},
		RegisteredAt: timestamppb.New(readyAt.Time),
	}
	for _, m := range mods {
		m(ep)
	}
	return ep
}

func TestViewOf(t *testing.T) {
	terminating := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	phase := func(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }
	noCondition := func(p *corev1.Pod) { p.Status.Conditions = nil }
	unknown := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionUnknown }

	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		reason   string
		want     []*registryv1.Endpoint
		problems []string
	}{
		{name: "ready", pod: pod("a", "10.0.0.1", true), want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000)}},
		{name: "not ready", pod: pod("a", "10.0.0.1", false), reason: "not ready"},
		{name: "ready unknown", pod: pod("a", "10.0.0.1", true, unknown), reason: "not ready"},
		{name: "no ready condition", pod: pod("a", "10.0.0.1", true, noCondition), reason: "not ready"},
		{name: "no IP", pod: pod("a", "", true), reason: "no pod IP"},
		{name: "pending", pod: pod("a", "10.0.0.1", true, phase(corev1.PodPending)), reason: "phase pending"},
		{name: "succeeded", pod: pod("a", "10.0.0.1", true, phase(corev1.PodSucceeded)), reason: "phase succeeded"},
		{name: "terminating", pod: pod("a", "10.0.0.1", true, terminating), reason: "terminating"},
		{
			name: "every annotation",
			pod: pod("a", "10.0.0.1", true, label("hermod.io/variant", "v1"), label("llm-d.ai/role", "decode"), annotate(
				AnnotationModel, "meta-llama/Llama-3.1-8B",
				AnnotationServedModels, "meta-llama/Llama-3.1-8B, sql-lora ,,sql-lora",
				AnnotationKVEventsPort, "5557",
				AnnotationKVEventsTopic, "kv@${POD_IP}@${MODEL}",
				AnnotationKVReplayPort, "5558",
			)),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
				ep.Labels["hermod.io/variant"] = "v1"
				ep.Labels["llm-d.ai/role"] = "decode"
				ep.Model = "meta-llama/Llama-3.1-8B"
				ep.ServedModels = []string{"meta-llama/Llama-3.1-8B", "sql-lora"}
				ep.KvEventsEndpoint = "tcp://10.0.0.1:5557"
				ep.KvEventsTopic = "kv@10.0.0.1@meta-llama/Llama-3.1-8B"
				ep.KvReplayEndpoint = "tcp://10.0.0.1:5558"
			})},
		},
		{
			name: "served models without a model: the first is the base model",
			pod:  pod("a", "10.0.0.1", true, annotate(AnnotationServedModels, "llama,sql-lora")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
				ep.Model, ep.ServedModels = "llama", []string{"llama", "sql-lora"}
			})},
		},
		{
			name: "a model missing from the served models is put first",
			pod:  pod("a", "10.0.0.1", true, annotate(AnnotationModel, "llama", AnnotationServedModels, "sql-lora")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
				ep.Model, ep.ServedModels = "llama", []string{"llama", "sql-lora"}
			})},
		},
		{
			name: "model from the label",
			pod:  pod("a", "10.0.0.1", true, label(LabelModel, "qwen3-0.6b")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
				ep.Labels[LabelModel] = "qwen3-0.6b"
				ep.Model = "qwen3-0.6b"
			})},
		},
		{
			name: "the annotation wins over the label",
			pod:  pod("a", "10.0.0.1", true, label(LabelModel, "short"), annotate(AnnotationModel, "org/long")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
				ep.Labels[LabelModel] = "short"
				ep.Model = "org/long"
			})},
		},
		{
			name: "a pod label cannot disown the entry",
			pod:  pod("a", "10.0.0.1", true, label(LabelDiscoveredBy, "someone")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000)},
		},
		{
			name: "IPv6",
			pod:  pod("a", "fd00::1", true, annotate(AnnotationKVEventsPort, "5557")),
			want: []*registryv1.Endpoint{want("a", "fd00::1", 8000, func(ep *registryv1.Endpoint) {
				ep.KvEventsEndpoint = "tcp://[fd00::1]:5557"
			})},
		},
		{
			name: "data-parallel ranks",
			pod: pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "2", AnnotationModel, "llama",
				AnnotationKVEventsPort, "5557", AnnotationKVReplayPort, "6000", AnnotationKVEventsTopic, "kv@${POD_NAME}")),
			want: []*registryv1.Endpoint{
				want("a-rank0", "10.0.0.1", 8000, func(ep *registryv1.Endpoint) {
					ep.Model, ep.KvEventsTopic = "llama", "kv@a"
					ep.KvEventsEndpoint, ep.KvReplayEndpoint = "tcp://10.0.0.1:5557", "tcp://10.0.0.1:6000"
				}),
				want("a-rank1", "10.0.0.1", 8001, func(ep *registryv1.Endpoint) {
					ep.Model, ep.KvEventsTopic, ep.DataParallelRank = "llama", "kv@a", 1
					ep.KvEventsEndpoint, ep.KvReplayEndpoint = "tcp://10.0.0.1:5558", "tcp://10.0.0.1:6001"
				}),
			},
		},
		{
			name: "data-parallel size 1 keeps the pod name",
			pod:  pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "1")),
			want: []*registryv1.Endpoint{want("a", "10.0.0.1", 8000)},
		},
		{
			name:     "invalid annotations are ignored",
			pod:      pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "many", AnnotationKVEventsPort, "0", AnnotationKVReplayPort, "70000")),
			want:     []*registryv1.Endpoint{want("a", "10.0.0.1", 8000)},
			problems: []string{AnnotationDataParallelSize, AnnotationKVEventsPort, AnnotationKVReplayPort},
		},
		{
			name:     "too many ranks",
			pod:      pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "65")),
			want:     []*registryv1.Endpoint{want("a", "10.0.0.1", 8000)},
			problems: []string{AnnotationDataParallelSize},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkView(t, viewOf("p", []int{8000}, tc.pod), tc.reason, tc.want, tc.problems)
		})
	}
}

// An InferencePool's several target ports: one endpoint per pod and port,
// rank r on targetPorts[r] (GIE's ranks), restricted to the ports of the
// active-ports annotation when the pod has one.
func TestViewOfTargetPorts(t *testing.T) {
	ports := []int{8000, 8002, 9000}
	rank := func(r int32, port int32, mods ...func(*registryv1.Endpoint)) *registryv1.Endpoint {
		return want("a-rank"+strconv.Itoa(int(r)), "10.0.0.1", port, append([]func(*registryv1.Endpoint){func(ep *registryv1.Endpoint) {
			ep.DataParallelRank = r
		}}, mods...)...)
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		reason   string
		want     []*registryv1.Endpoint
		problems []string
	}{
		{name: "every port", pod: pod("a", "10.0.0.1", true), want: []*registryv1.Endpoint{rank(0, 8000), rank(1, 8002), rank(2, 9000)}},
		{
			name: "KV-event ports per rank",
			pod:  pod("a", "10.0.0.1", true, annotate(AnnotationKVEventsPort, "5557")),
			want: []*registryv1.Endpoint{
				rank(0, 8000, func(ep *registryv1.Endpoint) { ep.KvEventsEndpoint = "tcp://10.0.0.1:5557" }),
				rank(1, 8002, func(ep *registryv1.Endpoint) { ep.KvEventsEndpoint = "tcp://10.0.0.1:5558" }),
				rank(2, 9000, func(ep *registryv1.Endpoint) { ep.KvEventsEndpoint = "tcp://10.0.0.1:5559" }),
			},
		},
		{
			name: "active ports only, the ranks keep their numbers",
			pod:  pod("a", "10.0.0.1", true, annotate(inferencepool.AnnotationActivePorts, "9000, 8000,7000")),
			want: []*registryv1.Endpoint{rank(0, 8000), rank(2, 9000)},
		},
		{
			name:     "no active port",
			pod:      pod("a", "10.0.0.1", true, annotate(inferencepool.AnnotationActivePorts, "7000,x")),
			reason:   "no active target port (" + inferencepool.AnnotationActivePorts + ")",
			problems: []string{inferencepool.AnnotationActivePorts},
		},
		{
			name:     "a data-parallel size that is not the ports' count is ignored",
			pod:      pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "2")),
			want:     []*registryv1.Endpoint{rank(0, 8000), rank(1, 8002), rank(2, 9000)},
			problems: []string{AnnotationDataParallelSize},
		},
		{
			name: "a data-parallel size equal to the ports' count is fine",
			pod:  pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "3")),
			want: []*registryv1.Endpoint{rank(0, 8000), rank(1, 8002), rank(2, 9000)},
		},
		{name: "not ready", pod: pod("a", "10.0.0.1", false), reason: "not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkView(t, viewOf("p", ports, tc.pod), tc.reason, tc.want, tc.problems)
		})
	}
	// One port with the annotation: the DP ranks' ports are filtered too.
	v := viewOf("p", []int{8000}, pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "2", inferencepool.AnnotationActivePorts, "8001")))
	checkView(t, v, "", []*registryv1.Endpoint{rank(1, 8001)}, nil)
}

func checkView(t *testing.T, v podView, reason string, want []*registryv1.Endpoint, problems []string) {
	t.Helper()
	if v.reason != reason {
		t.Fatalf("reason %q, want %q", v.reason, reason)
	}
	if len(v.endpoints) != len(want) {
		t.Fatalf("%d endpoints, want %d: %v", len(v.endpoints), len(want), v.endpoints)
	}
	for i, ep := range v.endpoints {
		if !proto.Equal(ep, want[i]) {
			t.Errorf("endpoint %d:\n got %v\nwant %v", i, ep, want[i])
		}
		if !owned(ep) {
			t.Errorf("endpoint %d is not marked as discovered", i)
		}
	}
	if len(v.problems) != len(problems) {
		t.Fatalf("problems %q, want one about each of %q", v.problems, problems)
	}
	for i, p := range v.problems {
		if !strings.HasPrefix(p, problems[i]+"=") {
			t.Errorf("problem %q is not about %s", p, problems[i])
		}
	}
}

// The entry is a copy: changing the pod or another rank's entry does not
// change it.
func TestViewOfCopies(t *testing.T) {
	p := pod("a", "10.0.0.1", true, annotate(AnnotationDataParallelSize, "2", AnnotationServedModels, "x,y"))
	v := viewOf("p", []int{8000}, p)
	p.Labels["app"] = "changed"
	v.endpoints[0].Labels["extra"] = "1"
	v.endpoints[0].ServedModels[0] = "z"
	if got := v.endpoints[1]; got.Labels["app"] != "vllm" || got.Labels["extra"] != "" || got.ServedModels[0] != "x" {
		t.Fatalf("rank 1 shares state: %v", got)
	}
}

func TestRegisteredAt(t *testing.T) {
	started := metav1.NewTime(readyAt.Add(-time.Second))
	created := metav1.NewTime(readyAt.Add(-2 * time.Second))
	noTransition := func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.Time{} }
	withStart := func(p *corev1.Pod) { p.Status.StartTime = &started }
	withCreation := func(p *corev1.Pod) { p.CreationTimestamp = created }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want *timestamppb.Timestamp
	}{
		{"ready transition", pod("a", "ip", true, withStart, withCreation), timestamppb.New(readyAt.Time)},
		{"start time", pod("a", "ip", true, noTransition, withStart, withCreation), timestamppb.New(started.Time)},
		{"creation", pod("a", "ip", true, noTransition, withCreation), timestamppb.New(created.Time)},
		{"none", pod("a", "ip", true, noTransition), nil},
	} {
		if got := registeredAt(tc.pod); !proto.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSplitModels(t *testing.T) {
	for in, want := range map[string]string{"": "", " , ": "", "a": "a", "a, b ,a,,c": "a|b|c"} {
		if got := strings.Join(splitModels(in), "|"); got != want {
			t.Errorf("splitModels(%q) = %q, want %q", in, got, want)
		}
	}
}
