// Package kube holds the Kubernetes client code the services share: Load
// finds the client configuration (a kubeconfig's current context, or the
// in-cluster service account) and the default namespace; NewInformer and
// Run follow the objects of one resource with a filtered dynamic informer
// whose failing lists and watches are logged with hints (a missing CRD,
// missing RBAC), and client-go's own logs go to the caller's slog logger
// (WithLogger).
//
// What the objects mean (decoding, change detection, callbacks) stays with
// the callers: kube only lists, watches and logs.
package kube
