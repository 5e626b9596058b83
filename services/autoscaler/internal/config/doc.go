// Package config parses, defaults, validates and resolves the autoscaler's
// configuration objects, written in the YAML of the Workload Variant
// Autoscaler (reference/004):
//
//   - VariantAutoscaling (apiVersion llmd.ai/v1alpha1): one scalable variant
//     of a model, with its replica bounds and cost;
//   - the ConfigMaps (apiVersion v1) wva-saturation-scaling-config,
//     wva-queueing-model-config and wva-model-scale-to-zero-config, whose
//     data entries are YAML documents: a "default" entry and per-model
//     overrides keyed by model_id (and optionally namespace).
//
// Parse decodes a multi-document YAML (or JSON) stream strictly: unknown
// fields, wrong types, duplicate keys and invalid values are errors that
// name the document, the object and the field. A Set holds the parsed
// objects and resolves the effective per-model configuration
// (Saturation, Queueing, ScaleToZero) and the variant groups.
//
// Decisions beyond reference/004 are documented on the names they affect;
// the main ones: acceleratorBudgets is rejected outside the default entry;
// model_id and namespace are rejected in the default entry; overrides
// layer default < model_id-only override < model_id+namespace override;
// string fields must be YAML strings (variantCost: "5.0", not 5.0); the
// ConfigMap label app.kubernetes.io/name is accepted but not required.
package config
