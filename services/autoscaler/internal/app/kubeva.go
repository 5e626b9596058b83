package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/engine"
	"github.com/hermod/hermod/services/autoscaler/internal/kubeclient"
	"github.com/hermod/hermod/services/autoscaler/internal/kubeva"
)

// kubeVariants is the Kubernetes API side of the VariantAutoscaling
// objects (--va-source kubernetes or both): the source that follows them
// and the writer of their status.
type kubeVariants struct {
	client    dynamic.Interface
	namespace string // "" : every namespace
	selector  string
	log       *slog.Logger
	writer    *kubeva.StatusWriter
	src       atomic.Pointer[kubeva.Source]
}

// newKubeVariants returns the API side, nil with --va-source etcd.
func newKubeVariants(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*kubeVariants, error) {
	if !cfg.kubeVAs() {
		return nil, nil
	}
	k := &kubeVariants{client: cfg.DynamicClient, namespace: cfg.VANamespace, selector: cfg.VASelector, log: log}
	if k.client == nil || k.namespace == "" {
		rc, ns, err := kubeclient.Load(cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--va-source %s: %w", cfg.VASource, err)
		}
		if k.client == nil {
			if k.client, err = dynamic.NewForConfig(rc); err != nil {
				return nil, fmt.Errorf("--va-source %s: dynamic client: %w", cfg.VASource, err)
			}
		}
		if k.namespace == "" {
			k.namespace = ns
		}
	}
	switch k.namespace {
	case "":
		return nil, errors.New("--va-namespace: not set, and the kubeconfig or cluster gives no namespace (" + AllNamespaces + " follows every one)")
	case AllNamespaces:
		k.namespace = ""
	}
	w, err := kubeva.NewStatusWriter(kubeva.StatusConfig{Client: k.client, Known: k.known, Registerer: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	k.writer = w
	return k, nil
}

// statusSink is the engine's status sink (nil without the API side).
func (k *kubeVariants) statusSink() engine.StatusSink {
	if k == nil {
		return nil
	}
	return k.writer
}

// known says whether the API holds a variant (statuses of the stored
// ones are not written there).
func (k *kubeVariants) known(namespace, name string) bool {
	s := k.src.Load()
	return s != nil && s.Has(namespace, name)
}

// start starts following the objects, handing each valid set to onChange.
func (k *kubeVariants) start(ctx context.Context, onChange func([]*config.VariantAutoscaling)) (*kubeva.Source, error) {
	src, err := kubeva.StartSource(ctx, kubeva.SourceConfig{Client: k.client, Namespace: k.namespace, Selector: k.selector, OnChange: onChange, Logger: k.log})
	if err != nil {
		return nil, fmt.Errorf("--va-source: %w", err)
	}
	k.src.Store(src)
	k.log.Info("following the VariantAutoscaling objects of the Kubernetes API", "namespace", k.namespace, "selector", k.selector)
	return src, nil
}
