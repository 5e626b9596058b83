package kubeva

import (
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// The VariantAutoscaling resource.
const (
	Group    = "llmd.ai"
	Version  = "v1alpha1"
	Resource = "variantautoscalings"
	ListKind = "VariantAutoscalingList"
)

// GVR is the VariantAutoscaling resource, for the dynamic client.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// ErrInvalid is wrapped by Decode's errors about an object's content.
var ErrInvalid = errors.New("invalid VariantAutoscaling")

// Decode turns a VariantAutoscaling of the API into the config package's
// type: its apiVersion, kind, metadata (name, namespace, labels,
// annotations) and spec; the status is Hermod's to write and is not read.
// Fields the config type does not have are ignored. The result passes
// Validate.
func Decode(u *unstructured.Unstructured) (*config.VariantAutoscaling, error) {
	if u == nil {
		return nil, fmt.Errorf("%w: nil object", ErrInvalid)
	}
	va := &config.VariantAutoscaling{
		APIVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Metadata: config.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(),
			Labels: maps.Clone(u.GetLabels()), Annotations: maps.Clone(u.GetAnnotations()),
		},
	}
	label := u.GetNamespace() + "/" + u.GetName()
	spec, ok, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("%w %s: spec: %w", ErrInvalid, label, err)
	}
	if ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &va.Spec); err != nil {
			return nil, fmt.Errorf("%w %s: spec: %w", ErrInvalid, label, err)
		}
	}
	if err := va.Validate(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalid, label, err)
	}
	return va, nil
}
