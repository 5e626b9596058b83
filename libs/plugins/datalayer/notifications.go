package datalayer

import (
	"encoding/json"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// K8sNotificationSourceType is the llm-d router's source of Kubernetes
// object notifications.
const K8sNotificationSourceType = "k8s-notification-source"

// The one kind k8s-notification-source follows here: core/v1 Pod.
const (
	PodGroup   = ""
	PodVersion = "v1"
	PodKind    = "Pod"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: K8sNotificationSourceType, New: newNotificationSource})
}

// NotificationParams are k8s-notification-source's parameters: the
// group (empty for the core API group), version and kind of the objects
// it follows.
type NotificationParams struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// GVK is the parameters in Kubernetes' notation ("/v1, Kind=Pod").
func (p NotificationParams) GVK() string {
	return p.Group + "/" + p.Version + ", Kind=" + p.Kind
}

// NotificationSource is the k8s-notification-source plugin. Upstream it
// watches the objects of one Kubernetes kind and tells its extractors of
// every one created, changed or deleted. Here the pool's pods are the one
// kind followed: the collector's Kubernetes discovery watches them and
// keeps the Ready ones, their labels included, in the pool's endpoint
// registry, which every picker follows. So a pod's notifications reach
// Hermod's plugins as the pool's endpoints changing, as
// endpoint-notification-source's events do, and the plugins that read
// pods (topology-extractor, disaggregatedset-rollout-screener) read them
// from the endpoints; its extractors need only be declared plugins. A
// pod that is not Ready, or outside the pool, has no endpoint and is not
// seen. Any other kind is refused: no Hermod service watches it and no
// Hermod plugin reads it. It fetches nothing and holds nothing.
type NotificationSource struct {
	scheduling.Named
	params NotificationParams
}

func newNotificationSource(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p NotificationParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	p.Group, p.Version, p.Kind = strings.TrimSpace(p.Group), strings.TrimSpace(p.Version), strings.TrimSpace(p.Kind)
	switch {
	case p.Version == "":
		return nil, scheduling.ParamErrorf("version", "required: the API version of the objects followed (v1 for pods)")
	case p.Kind == "":
		return nil, scheduling.ParamErrorf("kind", "required: the kind of the objects followed (Pod)")
	case p.Group != PodGroup || p.Version != PodVersion || p.Kind != PodKind:
		return nil, scheduling.ParamErrorf("kind", "%s is not followed here: Hermod follows only the pool's pods (group \"\", version v1, kind Pod), which the collector's Kubernetes discovery keeps in the pool's endpoint registry; no Hermod plugin reads notifications of another kind", p.GVK())
	}
	for _, e := range h.Earlier() {
		if o, ok := e.(*NotificationSource); ok && o.params.GVK() == p.GVK() {
			return nil, scheduling.ParamErrorf("kind", "%s is followed by %s already: declare one %s per kind", p.GVK(), o.TypedName(), K8sNotificationSourceType)
		}
	}
	if name == "" {
		name = K8sNotificationSourceType
	}
	return &NotificationSource{Named: scheduling.Named{Type: K8sNotificationSourceType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *NotificationSource) Parameters() any { return s.params }

// GVK is the kind the source follows, in Kubernetes' notation.
func (s *NotificationSource) GVK() string { return s.params.GVK() }

// EndpointEvents implements scheduling.EndpointSource: a pod's
// notifications arrive as endpoint events.
func (*NotificationSource) EndpointEvents() {}

var (
	_ scheduling.EndpointSource    = (*NotificationSource)(nil)
	_ scheduling.ParameterReporter = (*NotificationSource)(nil)
)
