// Package kubeclient loads the autoscaler's Kubernetes client
// configuration (kube.Load with the autoscaler's user agent). The clients
// (the actuator's scale client, the VariantAutoscaling source's dynamic
// client) are built from the *rest.Config it returns, so that a test can
// hand any cluster's config to them instead.
package kubeclient

import (
	"k8s.io/client-go/rest"

	"github.com/hermod/hermod/libs/kube"
)

// UserAgent is set on a config that names none.
const UserAgent = "hermod-autoscaler"

// Load returns the client configuration and the default namespace of
// kube.Load(path, UserAgent): the kubeconfig at path (its current
// context), or the cluster the process runs in when path is empty.
func Load(path string) (*rest.Config, string, error) {
	return kube.Load(path, UserAgent)
}
