package kube

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"

	"github.com/hermod/hermod/services/autoscaler/internal/kubeclient"
)

// NewFromKubeconfig returns an Actuator for the cluster of the kubeconfig
// at path (its current context), or for the cluster the process runs in
// when path is empty (kubeclient.Load).
func NewFromKubeconfig(path string, opts ...Option) (*Actuator, error) {
	cfg, _, err := kubeclient.Load(path)
	if err != nil {
		return nil, fmt.Errorf("kubernetes actuator: %w", err)
	}
	return NewForConfig(cfg, opts...)
}

// NewForConfig returns an Actuator talking to the cluster of cfg (which it
// copies, not changes). Kinds are resolved by a RESTMapper built lazily from
// discovery, cached in memory and refreshed when a kind is missing.
func NewForConfig(cfg *rest.Config, opts ...Option) (*Actuator, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = kubeclient.UserAgent
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes actuator: clientset: %w", err)
	}
	cached := memory.NewMemCacheClient(cs.Discovery())
	mapper := newDiscoveryMapper(cached)
	// scale.NewForConfig overwrites the config's GroupVersion and
	// serializer: give it its own copy.
	scales, err := scale.NewForConfig(rest.CopyConfig(cfg), mapper,
		dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, fmt.Errorf("kubernetes actuator: scale client: %w", err)
	}
	return New(scales, mapper, cs.AppsV1(), opts...)
}

// newDiscoveryMapper is the production RESTMapper: deferred (nothing is
// fetched before the first lookup) over a memory-cached discovery client.
func newDiscoveryMapper(cached discovery.CachedDiscoveryInterface) *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(cached)
}
