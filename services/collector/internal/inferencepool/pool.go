package inferencepool

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The InferencePool's API.
const (
	Group    = "inference.networking.k8s.io"
	Version  = "v1"
	Kind     = "InferencePool"
	ListKind = "InferencePoolList"
	Resource = "inferencepools"
)

// GVR is the InferencePool's resource, for the dynamic client.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Limits of the spec (the CRD's validation).
const (
	MaxTargetPorts = 8
	MaxMatchLabels = 64
)

// The endpoint picker's failure modes.
const (
	FailOpen  = "FailOpen"
	FailClose = "FailClose"
)

// AnnotationActivePorts is GIE's pod annotation naming the target ports,
// comma-separated, that serve inference traffic; ranks on other ports are
// not endpoints. Without it every target port is.
const AnnotationActivePorts = "inference.networking.k8s.io/active-ports"

// Pool is what Hermod reads of an InferencePool.
type Pool struct {
	Namespace       string
	Name            string
	ResourceVersion string
	// Selector is spec.selector.matchLabels: the pods of Namespace with
	// all of these labels are the pool's model servers.
	Selector map[string]string
	// TargetPorts are spec.targetPorts[].number, in order: every port of
	// every selected pod is an endpoint (podIP:port), its index the rank.
	TargetPorts []int
	// AppProtocol is spec.appProtocol ("" : http).
	AppProtocol string
	// EndpointPicker is spec.endpointPickerRef; nil when unset.
	EndpointPicker *EndpointPickerRef
}

// EndpointPickerRef is spec.endpointPickerRef, with the API's defaults
// applied (kind Service, failureMode FailClose).
type EndpointPickerRef struct {
	Group       string
	Kind        string
	Name        string
	Port        int // 0 when unset
	FailureMode string
}

// LabelSelector returns the selector of the pool's pods.
func (p *Pool) LabelSelector() labels.Selector {
	return labels.SelectorFromSet(p.Selector)
}

// String describes the pool for logs.
func (p *Pool) String() string {
	if p == nil {
		return "<none>"
	}
	ports := make([]string, len(p.TargetPorts))
	for i, n := range p.TargetPorts {
		ports[i] = fmt.Sprint(n)
	}
	return fmt.Sprintf("%s/%s selector %s ports %s", p.Namespace, p.Name, p.LabelSelector(), strings.Join(ports, ","))
}

// SameTarget reports whether a and b select the same pods on the same
// ports (nil selects none).
func SameTarget(a, b *Pool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Namespace == b.Namespace && maps.Equal(a.Selector, b.Selector) && slices.Equal(a.TargetPorts, b.TargetPorts)
}

// wire is the part of the object Decode reads, as the API serves it.
type wire struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int `json:"number"`
		} `json:"targetPorts"`
		AppProtocol       string `json:"appProtocol"`
		EndpointPickerRef *struct {
			Group *string `json:"group"`
			Kind  string  `json:"kind"`
			Name  string  `json:"name"`
			Port  *struct {
				Number int `json:"number"`
			} `json:"port"`
			FailureMode string `json:"failureMode"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

// ErrInvalid is wrapped by every error of Decode about the object's
// content.
var ErrInvalid = errors.New("invalid InferencePool")

// Decode reads an InferencePool. It checks what the collector relies on, as
// the CRD's validation does: a non-empty selector of valid labels, 1 to 8
// unique target ports. Unknown fields are ignored.
func Decode(obj *unstructured.Unstructured) (*Pool, error) {
	if obj == nil {
		return nil, fmt.Errorf("%w: nil object", ErrInvalid)
	}
	gvk := obj.GroupVersionKind()
	if gvk.Kind != "" && (gvk.Group != Group || gvk.Kind != Kind) {
		return nil, fmt.Errorf("%w: %s is not an %s.%s", ErrInvalid, gvk, Kind, Group)
	}
	label := obj.GetNamespace() + "/" + obj.GetName()
	var w wire
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &w); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalid, label, err)
	}
	p := &Pool{
		Namespace: obj.GetNamespace(), Name: obj.GetName(), ResourceVersion: obj.GetResourceVersion(),
		Selector: w.Spec.Selector.MatchLabels, AppProtocol: w.Spec.AppProtocol,
	}
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("metadata.name: empty"))
	}
	errs = append(errs, checkSelector(p.Selector)...)
	switch n := len(w.Spec.TargetPorts); {
	case n == 0:
		errs = append(errs, errors.New("spec.targetPorts: none (1 to 8 are required)"))
	case n > MaxTargetPorts:
		errs = append(errs, fmt.Errorf("spec.targetPorts: %d ports, at most %d", n, MaxTargetPorts))
	}
	for i, tp := range w.Spec.TargetPorts {
		switch {
		case tp.Number < 1 || tp.Number > 65535:
			errs = append(errs, fmt.Errorf("spec.targetPorts[%d].number: %d is not a port (1..65535)", i, tp.Number))
		case slices.Contains(p.TargetPorts, tp.Number):
			errs = append(errs, fmt.Errorf("spec.targetPorts[%d].number: %d appears twice", i, tp.Number))
		default:
			p.TargetPorts = append(p.TargetPorts, tp.Number)
		}
	}
	if r := w.Spec.EndpointPickerRef; r != nil {
		ref := &EndpointPickerRef{Kind: r.Kind, Name: r.Name, FailureMode: r.FailureMode}
		if r.Group != nil {
			ref.Group = *r.Group
		}
		if ref.Kind == "" {
			ref.Kind = "Service"
		}
		if ref.FailureMode == "" {
			ref.FailureMode = FailClose
		}
		if r.Port != nil {
			ref.Port = r.Port.Number
		}
		p.EndpointPicker = ref
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalid, label, errors.Join(errs...))
	}
	return p, nil
}

func checkSelector(sel map[string]string) []error {
	var errs []error
	switch n := len(sel); {
	case n == 0:
		// An empty selector would select every pod of the namespace.
		return []error{errors.New("spec.selector.matchLabels: empty (at least one label is required)")}
	case n > MaxMatchLabels:
		errs = append(errs, fmt.Errorf("spec.selector.matchLabels: %d labels, at most %d", n, MaxMatchLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("spec.selector.matchLabels: key %q: %s", k, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(sel[k]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("spec.selector.matchLabels[%s]: value %q: %s", k, sel[k], strings.Join(msgs, "; ")))
		}
	}
	return errs
}
