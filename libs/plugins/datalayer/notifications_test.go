package datalayer

import (
	"strings"
	"testing"

	_ "github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// k8s-notification-source follows core/v1 Pod, whose notifications reach
// the plugins as endpoint events; any other kind is refused, saying why.
func TestNotificationSourceKinds(t *testing.T) {
	h := schedulingtest.NewHandle()
	s := schedulingtest.New[*NotificationSource](t, h, K8sNotificationSourceType, "", `{"group": "", "version": "v1", "kind": "Pod"}`)
	if s.GVK() != "/v1, Kind=Pod" || s.TypedName().Name != K8sNotificationSourceType {
		t.Errorf("GVK %q name %q", s.GVK(), s.TypedName().Name)
	}
	if _, ok := scheduling.Plugin(s).(scheduling.EndpointSource); !ok {
		t.Error("not an EndpointSource")
	}
	if _, ok := scheduling.Plugin(s).(scheduling.DataSource); ok {
		t.Error("a k8s-notification-source fetches nothing")
	}
	// the group may be left out: the core group
	schedulingtest.New[*NotificationSource](t, schedulingtest.NewHandle(), K8sNotificationSourceType, "pods", `{"version": "v1", "kind": "Pod"}`)

	for params, want := range map[string]string{
		``:                                     "parameters.version: required",
		`{"kind": "Pod"}`:                      "parameters.version: required",
		`{"version": "v1"}`:                    "parameters.kind: required",
		`{"version": "v1", "kind": "Service"}`: `parameters.kind: /v1, Kind=Service is not followed here: Hermod follows only the pool's pods`,
		`{"group": "apps", "version": "v1", "kind": "Pod"}`:                                  "apps/v1, Kind=Pod is not followed",
		`{"group": "inference.networking.k8s.io", "version": "v1", "kind": "InferencePool"}`: "is not followed here",
		`{"version": "v1", "kind": "pod"}`:                                                   "/v1, Kind=pod is not followed",
	} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), K8sNotificationSourceType, "", params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", params, err, want)
		}
	}

	// one source per kind, as upstream has it
	_, err := schedulingtest.NewErr(schedulingtest.NewHandle().Declare(s), K8sNotificationSourceType, "again", `{"version": "v1", "kind": "Pod"}`)
	if err == nil || !strings.Contains(err.Error(), "is followed by k8s-notification-source already") {
		t.Errorf("a second Pod source: %v", err)
	}
}

// The upstream documentation's configuration: the source wired into the
// data layer with an extractor. Any declared plugin may be its extractor
// (the endpoint events reach every plugin); an undeclared one may not.
func TestNotificationSourceInTheDataLayer(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: k8s-notification-source
  parameters: {group: "", version: v1, kind: Pod}
- type: core-metrics-extractor
data:
  sources:
  - pluginRef: k8s-notification-source
    extractors:
    - pluginRef: core-metrics-extractor
`)
	if got := scheduling.ExtensionPoints(s.Plugins()[0]); len(got) != 0 {
		t.Errorf("extension points %v", got)
	}
	cfg, err := scheduling.ParseConfig([]byte(`
plugins:
- type: k8s-notification-source
  parameters: {version: v1, kind: Pod}
data:
  sources:
  - pluginRef: k8s-notification-source
    extractors: [{pluginRef: my-pod-extractor}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduling.New(cfg); err == nil || !strings.Contains(err.Error(), `no plugin named "my-pod-extractor"`) {
		t.Errorf("undeclared extractor: %v", err)
	}
}
