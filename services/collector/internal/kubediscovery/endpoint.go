package kubediscovery

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/collector/internal/inferencepool"
	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// The label that marks the registry entries a Source owns. A Source never
// updates or deletes an entry without it.
const (
	LabelDiscoveredBy      = registrysync.LabelDiscoveredBy
	DiscoveredByKubernetes = "kubernetes"
)

// The pod annotations (and label) a Source reads. Every one is optional.
const (
	// AnnotationModel is the base model the pod serves (registry field
	// model). Without it, the label LabelModel is used; without both the
	// model stays empty, and the consumers fall back to the served models
	// the collector reads from the pod's /v1/models.
	AnnotationModel = "hermod.io/model"
	// LabelModel is the base model as a label, for model names that are
	// valid label values.
	LabelModel = "hermod.io/model"
	// AnnotationServedModels is every model name the pod answers to,
	// comma-separated: the base model and its LoRA adapters (registry field
	// served_models). The base model is put first when missing; without a
	// base model, the first served model is the base model.
	AnnotationServedModels = "hermod.io/served-models"
	// AnnotationKVEventsPort is the port of the pod's ZMQ PUB socket of
	// KV-cache events; the registry gets tcp://<pod IP>:<port>.
	AnnotationKVEventsPort = "hermod.io/kv-events-port"
	// AnnotationKVEventsTopic is the topic of the KV-cache events;
	// ${POD_IP}, ${POD_NAME} and ${MODEL} are replaced by the pod's IP, name
	// and base model (as in vLLM's "kv@${POD_IP}@${MODEL}").
	AnnotationKVEventsTopic = "hermod.io/kv-events-topic"
	// AnnotationKVReplayPort is the port of the pod's ZMQ ROUTER socket
	// that replays KV-cache events; the registry gets tcp://<pod IP>:<port>.
	AnnotationKVReplayPort = "hermod.io/kv-replay-port"
	// AnnotationDataParallelSize is the number of data-parallel ranks the
	// pod runs (default 1). With N > 1 the pod stands for N endpoints,
	// <pod>-rank0 .. <pod>-rank<N-1>, rank r on the target port + r (and the
	// KV-event ports + r). With an InferencePool of several target ports,
	// those are the ranks (rank r on targetPorts[r]) and this is ignored.
	AnnotationDataParallelSize = "hermod.io/data-parallel-size"
)

// MaxDataParallelSize bounds AnnotationDataParallelSize.
const MaxDataParallelSize = 64

// podView is what a pod stands for in the registry.
type podView struct {
	// endpoints are the pod's registry entries; none when the pod does not
	// count.
	endpoints []*registryv1.Endpoint
	// reason says why the pod does not count ("" when it does).
	reason string
	// problems are the annotations that were ignored, and why.
	problems []string
}

// notCounted returns why a pod does not count as an endpoint, or "" when it
// does: it counts when it is Running, has a pod IP, its condition Ready is
// True, and it is not being deleted.
func notCounted(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "terminating"
	case pod.Status.Phase != corev1.PodRunning:
		return "phase " + strings.ToLower(string(pod.Status.Phase))
	case pod.Status.PodIP == "":
		return "no pod IP"
	}
	if c := readyCondition(pod); c == nil || c.Status != corev1.ConditionTrue {
		return "not ready"
	}
	return ""
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// viewOf returns the registry entries of a pod of pool whose HTTP API
// listens on ports. One port: DP rank r (AnnotationDataParallelSize) on
// the port + r. Several ports (an InferencePool's targetPorts): rank r on
// ports[r], as GIE's endpoint picker has it. The KV-event ports of rank r
// are the annotated ports + r either way. A pod annotated with
// inferencepool.AnnotationActivePorts stands only for the ranks on the
// ports it lists.
func viewOf(pool string, ports []int, pod *corev1.Pod) podView {
	if reason := notCounted(pod); reason != "" {
		return podView{reason: reason}
	}
	var v podView
	ann := pod.Annotations
	ip := pod.Status.PodIP

	rankPorts := v.rankPorts(ann, ports)
	size := len(rankPorts)
	active := v.activePorts(ann)
	kvPort := v.port(ann, AnnotationKVEventsPort, size)
	replayPort := v.port(ann, AnnotationKVReplayPort, size)

	model := strings.TrimSpace(ann[AnnotationModel])
	if model == "" {
		model = pod.Labels[LabelModel]
	}
	served := splitModels(ann[AnnotationServedModels])
	switch {
	case model == "" && len(served) > 0:
		model = served[0]
	case model != "" && len(served) > 0 && !slices.Contains(served, model):
		served = append([]string{model}, served...)
	}
	topic := ""
	if t, ok := ann[AnnotationKVEventsTopic]; ok {
		topic = strings.NewReplacer("${POD_IP}", ip, "${POD_NAME}", pod.Name, "${MODEL}", model).Replace(strings.TrimSpace(t))
	}

	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelDiscoveredBy] = DiscoveredByKubernetes
	at := registeredAt(pod)

	v.endpoints = make([]*registryv1.Endpoint, 0, size)
	for r, port := range rankPorts {
		if active != nil && !active[port] {
			continue
		}
		ep := &registryv1.Endpoint{
			Name:             pod.Name,
			Pool:             pool,
			Address:          ip,
			NodeAddress:      pod.Status.HostIP,
			Port:             int32(port), //nolint:gosec // a port <= 65535, checked by rankPorts
			Labels:           maps.Clone(labels),
			Model:            model,
			ServedModels:     slices.Clone(served),
			KvEventsTopic:    topic,
			DataParallelRank: int32(r), //nolint:gosec // r < MaxDataParallelSize
			RegisteredAt:     at,
		}
		if size > 1 {
			ep.Name = pod.Name + "-rank" + strconv.Itoa(r)
		}
		if kvPort > 0 {
			ep.KvEventsEndpoint = "tcp://" + net.JoinHostPort(ip, strconv.Itoa(kvPort+r))
		}
		if replayPort > 0 {
			ep.KvReplayEndpoint = "tcp://" + net.JoinHostPort(ip, strconv.Itoa(replayPort+r))
		}
		v.endpoints = append(v.endpoints, ep)
	}
	if len(v.endpoints) == 0 {
		return podView{reason: "no active target port (" + inferencepool.AnnotationActivePorts + ")", problems: v.problems}
	}
	return v
}

// rankPorts returns the port of each rank: the target ports when there
// are several, else the one port + r for each DP rank r of the annotation.
func (v *podView) rankPorts(ann map[string]string, ports []int) []int {
	s, annotated := ann[AnnotationDataParallelSize]
	if len(ports) > 1 {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); annotated && (err != nil || n != len(ports)) {
			v.problems = append(v.problems, fmt.Sprintf("%s=%q: the InferencePool's %d target ports are the ranks; ignored", AnnotationDataParallelSize, s, len(ports)))
		}
		return ports
	}
	port := ports[0]
	size := 1
	if annotated {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		switch {
		case err != nil || n < 1 || n > MaxDataParallelSize:
			v.problems = append(v.problems, fmt.Sprintf("%s=%q is not a size 1..%d; 1 is used", AnnotationDataParallelSize, s, MaxDataParallelSize))
		case port+n-1 > 65535:
			v.problems = append(v.problems, fmt.Sprintf("%s=%d: ranks would use ports past 65535; 1 is used", AnnotationDataParallelSize, n))
		default:
			size = n
		}
	}
	out := make([]int, size)
	for r := range out {
		out[r] = port + r
	}
	return out
}

// activePorts returns the ports of inferencepool.AnnotationActivePorts;
// nil (every port) when the pod has no such annotation. Entries that are
// not ports are ignored (noted as a problem), as GIE does.
func (v *podView) activePorts(ann map[string]string) map[int]bool {
	s, ok := ann[inferencepool.AnnotationActivePorts]
	if !ok {
		return nil
	}
	out := map[int]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 65535 {
			v.problems = append(v.problems, fmt.Sprintf("%s=%q: %q is not a port; ignored", inferencepool.AnnotationActivePorts, s, f))
			continue
		}
		out[n] = true
	}
	return out
}

// port reads a port annotation; 0 when absent or invalid (noted as a
// problem). With size ranks, port+size-1 must be a port too.
func (v *podView) port(ann map[string]string, key string, size int) int {
	s, ok := ann[key]
	if !ok {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || p < 1 || p+size-1 > 65535 {
		v.problems = append(v.problems, fmt.Sprintf("%s=%q is not a port 1..%d; ignored", key, s, 65535-size+1))
		return 0
	}
	return p
}

// splitModels splits a comma-separated model list, dropping blanks and
// duplicates; nil when empty.
func splitModels(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// registeredAt is when the pod became ready (the Ready condition's last
// transition), else when it started or was created; nil when none is known.
// Every replica derives the same value from the same pod, so a new leader
// does not rewrite entries with a time of its own.
func registeredAt(pod *corev1.Pod) *timestamppb.Timestamp {
	if c := readyCondition(pod); c != nil && !c.LastTransitionTime.IsZero() {
		return timestamppb.New(c.LastTransitionTime.Time)
	}
	if st := pod.Status.StartTime; st != nil && !st.IsZero() {
		return timestamppb.New(st.Time)
	}
	if !pod.CreationTimestamp.IsZero() {
		return timestamppb.New(pod.CreationTimestamp.Time)
	}
	return nil
}

// owned says whether a registry entry is one a Source wrote.
func owned(ep *registryv1.Endpoint) bool {
	return ep.GetLabels()[LabelDiscoveredBy] == DiscoveredByKubernetes
}
