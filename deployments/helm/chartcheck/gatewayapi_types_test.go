package chartcheck

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// inferencePoolGVK is the Gateway API Inference Extension's InferencePool.
var inferencePoolGVK = schema.GroupVersionKind{Group: "inference.networking.k8s.io", Version: "v1", Kind: "InferencePool"}

// inferencePool is inference.networking.k8s.io/v1 InferencePool's spec as
// the CRD has it (sigs.k8s.io/gateway-api-inference-extension api/v1); any
// other field fails the strict decode.
type inferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		AppProtocol       string `json:"appProtocol,omitempty"`
		EndpointPickerRef *struct {
			Group *string `json:"group,omitempty"`
			Kind  string  `json:"kind,omitempty"`
			Name  string  `json:"name"`
			Port  *struct {
				Number int32 `json:"number"`
			} `json:"port,omitempty"`
			FailureMode string `json:"failureMode,omitempty"`
		} `json:"endpointPickerRef,omitempty"`
	} `json:"spec"`
}

// httpRouteGVK is Gateway API's HTTPRoute.
var httpRouteGVK = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}

// httpRoute is the part of gateway.networking.k8s.io/v1 HTTPRoute the chart
// may render; any other field fails the strict decode.
type httpRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ParentRefs []struct {
			Group       string `json:"group,omitempty"`
			Kind        string `json:"kind,omitempty"`
			Name        string `json:"name"`
			Namespace   string `json:"namespace,omitempty"`
			SectionName string `json:"sectionName,omitempty"`
		} `json:"parentRefs"`
		Hostnames []string `json:"hostnames,omitempty"`
		Rules     []struct {
			Matches []struct {
				Path struct {
					Type  string `json:"type"`
					Value string `json:"value"`
				} `json:"path"`
			} `json:"matches"`
			BackendRefs []struct {
				Group string `json:"group"`
				Kind  string `json:"kind"`
				Name  string `json:"name"`
			} `json:"backendRefs"`
			Timeouts *struct {
				Request        string `json:"request,omitempty"`
				BackendRequest string `json:"backendRequest,omitempty"`
			} `json:"timeouts,omitempty"`
		} `json:"rules"`
	} `json:"spec"`
}
