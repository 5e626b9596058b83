package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Set is a consistent collection of configuration objects: the variants
// and at most one of each ConfigMap. It resolves each model's effective
// configuration. A Set is read-only after NewSet and safe for concurrent
// use; the nil *Set resolves everything to the defaults.
type Set struct {
	variants    map[variantKey]*VariantAutoscaling
	saturation  *SaturationConfigMap
	queueing    *QueueingConfigMap
	scaleToZero *ScaleToZeroConfigMap
}

type variantKey struct{ namespace, name string }

// Group is a variant group: the variants of one model in one namespace,
// optimized together.
type Group struct {
	ModelID   string
	Namespace string
	// Variants are sorted by name.
	Variants []*VariantAutoscaling
}

// NewSet builds a Set from objects (typically Parse's result). Every
// object must pass Validate; variant names must be unique within a
// namespace; each ConfigMap may appear once (its metadata.namespace does
// not scope it: the maps apply to every namespace). The Set keeps the
// given pointers: do not modify the objects afterwards.
func NewSet(objs ...Object) (*Set, error) {
	s := &Set{variants: map[variantKey]*VariantAutoscaling{}}
	var errs []error
	dup := func(label string) {
		errs = append(errs, &FieldError{Object: label, Field: "metadata.name", Msg: "defined more than once"})
	}
	for _, obj := range objs {
		if obj == nil {
			errs = append(errs, errors.New("nil object"))
			continue
		}
		if err := obj.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		switch o := obj.(type) {
		case *VariantAutoscaling:
			k := variantKey{o.Metadata.Namespace, o.Metadata.Name}
			if _, ok := s.variants[k]; ok {
				label := o.label()
				if k.namespace != "" {
					label += fmt.Sprintf(" in namespace %q", k.namespace)
				}
				dup(label)
				continue
			}
			s.variants[k] = o
		case *SaturationConfigMap:
			if s.saturation != nil {
				dup(o.Metadata.Name)
				continue
			}
			s.saturation = o
		case *QueueingConfigMap:
			if s.queueing != nil {
				dup(o.Metadata.Name)
				continue
			}
			s.queueing = o
		case *ScaleToZeroConfigMap:
			if s.scaleToZero != nil {
				dup(o.Metadata.Name)
				continue
			}
			s.scaleToZero = o
		default:
			errs = append(errs, fmt.Errorf("unsupported object %T", obj))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Variant returns the variant with a name in a namespace ("" for objects
// without metadata.namespace).
func (s *Set) Variant(namespace, name string) (*VariantAutoscaling, bool) {
	if s == nil {
		return nil, false
	}
	v, ok := s.variants[variantKey{namespace, name}]
	return v, ok
}

// Variants returns every variant, sorted by namespace then name.
func (s *Set) Variants() []*VariantAutoscaling {
	if s == nil {
		return nil
	}
	out := make([]*VariantAutoscaling, 0, len(s.variants))
	for _, v := range s.variants {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *VariantAutoscaling) int {
		return cmp.Or(cmp.Compare(a.Metadata.Namespace, b.Metadata.Namespace), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	return out
}

// Objects returns every object of the Set: the variants as Variants
// orders them, then the saturation, queueing and scale-to-zero ConfigMaps
// that are present.
func (s *Set) Objects() []Object {
	if s == nil {
		return nil
	}
	var out []Object
	for _, v := range s.Variants() {
		out = append(out, v)
	}
	if s.saturation != nil {
		out = append(out, s.saturation)
	}
	if s.queueing != nil {
		out = append(out, s.queueing)
	}
	if s.scaleToZero != nil {
		out = append(out, s.scaleToZero)
	}
	return out
}

// Groups returns the variant groups: variants with the same modelID and
// namespace, sorted by modelID then namespace, each group's variants by
// name.
func (s *Set) Groups() []Group {
	if s == nil {
		return nil
	}
	type key struct{ model, namespace string }
	index := map[key]int{}
	var groups []Group
	for _, v := range s.Variants() {
		k := key{v.Spec.ModelID, v.Metadata.Namespace}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, Group{ModelID: k.model, Namespace: k.namespace})
		}
		groups[i].Variants = append(groups[i].Variants, v)
	}
	slices.SortFunc(groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.ModelID, b.ModelID), cmp.Compare(a.Namespace, b.Namespace))
	})
	for i := range groups {
		slices.SortFunc(groups[i].Variants, func(a, b *VariantAutoscaling) int {
			return cmp.Compare(a.Metadata.Name, b.Metadata.Name)
		})
	}
	return groups
}

// Saturation returns the saturation configuration of a model in a
// namespace (see SaturationConfigMap.Resolve): defaults < default entry <
// override for model_id < override for model_id and namespace.
func (s *Set) Saturation(modelID, namespace string) (SaturationConfig, error) {
	if s == nil {
		return DefaultSaturationConfig(), nil
	}
	return s.saturation.Resolve(modelID, namespace)
}

// Queueing returns the queueing-model configuration of a model in a
// namespace and whether the SLO analyzer is active (the queueing ConfigMap
// has a default entry), see QueueingConfigMap.Resolve.
func (s *Set) Queueing(modelID, namespace string) (QueueingConfig, bool) {
	if s == nil {
		return DefaultQueueingConfig(), false
	}
	return s.queueing.Resolve(modelID, namespace)
}

// ScaleToZero returns the scale-to-zero configuration of a model in a
// namespace: enabled by its override > the default entry > the
// environment variable WVA_SCALE_TO_ZERO (read with env, os.Getenv when
// nil) > false. See ScaleToZeroConfigMap.Resolve.
func (s *Set) ScaleToZero(modelID, namespace string, env func(string) string) ScaleToZeroConfig {
	if s == nil {
		return (*ScaleToZeroConfigMap)(nil).Resolve(modelID, namespace, env)
	}
	return s.scaleToZero.Resolve(modelID, namespace, env)
}

// Analyzer returns the analyzer that scales a model in a namespace: the
// queueing model when the queueing ConfigMap has a default entry (it takes
// priority), else the saturation analyzer its analyzerName selects.
func (s *Set) Analyzer(modelID, namespace string) (Analyzer, error) {
	if _, active := s.Queueing(modelID, namespace); active {
		return AnalyzerQueueingModel, nil
	}
	c, err := s.Saturation(modelID, namespace)
	if err != nil {
		return "", err
	}
	return c.Analyzer(), nil
}
