package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Load returns the client configuration for the cluster of the kubeconfig
// at path (its current context), or, when path is empty, for the cluster
// the process runs in (its service account). The configuration is a copy
// whose UserAgent is userAgent when the kubeconfig names none.
//
// Load also returns the default namespace: the context's ("default" when
// it names none), or in a cluster POD_NAMESPACE (the downward API) or else
// the service account's ("" when neither is known).
//
// Errors wrap rest.ErrNotInCluster outside a cluster without a kubeconfig,
// and name the file otherwise.
func Load(path, userAgent string) (*rest.Config, string, error) {
	var (
		cfg *rest.Config
		ns  string
		err error
	)
	if path == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster Kubernetes config (outside a cluster, give a kubeconfig): %w", err)
		}
		ns = inClusterNamespace()
	} else {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("namespace of kubeconfig %s: %w", path, err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	return cfg, ns, nil
}

// inClusterNamespace returns the pod's namespace: POD_NAMESPACE (the
// downward API), else the service account's; "" when neither is set.
func inClusterNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
