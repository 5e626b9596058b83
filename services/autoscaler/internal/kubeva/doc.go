// Package kubeva binds the autoscaler to the VariantAutoscaling objects of
// the Kubernetes API (llmd.ai/v1alpha1, short name va): Source follows them
// with a dynamic informer and hands the valid ones on as config objects, the
// same as the ones stored in etcd; StatusWriter writes each variant's
// status subresource after the leader's evaluations
// (status.desiredOptimizedAlloc, status.actuation.applied and the
// conditions TargetResolved, MetricsAvailable and OptimizationReady), so
// that `kubectl get va` shows Hermod's decisions.
//
// The objects are decoded from unstructured ones into the config package's
// types, leniently (a newer CRD's extra fields are ignored) and then
// validated as the stored objects are; an invalid one is logged and left
// out, without affecting the others.
//
// RBAC: get, list and watch on variantautoscalings.llmd.ai, and update
// (patch) on variantautoscalings/status, in the namespaces followed.
package kubeva
