// Package inferencepool reads the Gateway API Inference Extension's
// InferencePool (inference.networking.k8s.io/v1) from the Kubernetes API:
// Decode turns one object, as the dynamic client returns it, into a Pool
// (its label selector, target ports and endpoint picker reference), and
// Watch follows one named InferencePool, handing each valid version to a
// callback, nil once it is deleted.
//
// The types are Hermod's own, decoded from unstructured objects: the
// collector does not depend on the GIE module. Field names follow
// sigs.k8s.io/gateway-api-inference-extension api/v1 (InferencePoolSpec:
// selector.matchLabels, targetPorts[].number, appProtocol,
// endpointPickerRef{group, kind, name, port.number, failureMode}); fields
// Hermod does not read are ignored, so newer servers' additions do not
// break decoding.
//
// RBAC: get, list and watch on inferencepools.inference.networking.k8s.io
// in the pool's namespace.
package inferencepool
