package inferencepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/hermod/hermod/libs/kube"
)

// resource is what a Watch lists and watches.
var resource = kube.Resource{GVR: GVR, Kind: "InferencePool", CRD: true}

// WatchConfig configures a Watch.
type WatchConfig struct {
	// Client is the dynamic client of the cluster. Required.
	Client dynamic.Interface
	// Namespace and Name name the InferencePool. Required.
	Namespace, Name string
	// Resync is the informer's resync period (0: none).
	Resync time.Duration
	// OnChange gets the pool whenever its selector, target ports or
	// endpoint picker change, and nil once it is deleted. Calls come one
	// at a time. A version that does not decode is logged and skipped (the
	// last valid one stays). Required.
	OnChange func(*Pool)
	// Logger logs (slog.Default when nil).
	Logger *slog.Logger
}

// Watch follows one InferencePool.
type Watch struct {
	cfg    WatchConfig
	log    *slog.Logger
	reg    cache.ResourceEventHandlerRegistration
	cancel context.CancelFunc
	done   <-chan struct{}

	mu      sync.Mutex
	current *Pool
}

// StartWatch starts following the InferencePool; Close stops it. It fails
// only for an invalid WatchConfig: the informer retries a failing list or
// watch (a missing CRD, missing RBAC) on its own, logging each failure.
func StartWatch(ctx context.Context, cfg WatchConfig) (*Watch, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("inferencepool watch: no dynamic client")
	case cfg.Namespace == "" || cfg.Name == "":
		return nil, errors.New("inferencepool watch: namespace and name are required")
	case cfg.OnChange == nil:
		return nil, errors.New("inferencepool watch: no OnChange")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watch{cfg: cfg, log: cfg.Logger.With("inference_pool", cfg.Namespace+"/"+cfg.Name)}
	// One object: the API server filters by name (clients that ignore
	// field selectors are filtered by the handler).
	byName := fields.OneTermEqualSelector("metadata.name", cfg.Name).String()
	inf, err := kube.NewInformer(cfg.Client, resource, cfg.Namespace, cfg.Resync,
		func(o *metav1.ListOptions) { o.FieldSelector = byName }, w.log)
	if err != nil {
		return nil, fmt.Errorf("inferencepool watch: %w", err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.apply(obj) },
		UpdateFunc: func(_, obj any) { w.apply(obj) },
		DeleteFunc: w.delete,
	})
	if err != nil {
		return nil, fmt.Errorf("inferencepool watch: %w", err)
	}
	w.reg = reg
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.done = kube.Run(runCtx, inf, w.log)
	return w, nil
}

// Close stops the watch and waits for it.
func (w *Watch) Close() {
	w.cancel()
	<-w.done
}

// Synced is closed once the first list has been handed to OnChange.
func (w *Watch) Synced() <-chan struct{} { return w.reg.HasSyncedChecker().Done() }

// Current returns the last valid version applied; nil when there is none
// (not listed yet, absent, deleted).
func (w *Watch) Current() *Pool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

func (w *Watch) apply(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		w.log.Warn("unexpected object from the InferencePool informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	if u.GetName() != w.cfg.Name || u.GetNamespace() != w.cfg.Namespace {
		return
	}
	p, err := Decode(u)
	if err != nil {
		w.log.Error("InferencePool ignored; keeping its last valid version", "resource_version", u.GetResourceVersion(), "error", err)
		return
	}
	w.mu.Lock()
	prev := w.current
	w.current = p
	w.mu.Unlock()
	if prev != nil && SameTarget(prev, p) && samePicker(prev.EndpointPicker, p.EndpointPicker) {
		return
	}
	w.cfg.OnChange(p)
}

func (w *Watch) delete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil || key != w.cfg.Namespace+"/"+w.cfg.Name {
		return
	}
	w.mu.Lock()
	had := w.current != nil
	w.current = nil
	w.mu.Unlock()
	if had {
		w.cfg.OnChange(nil)
	}
}

func samePicker(a, b *EndpointPickerRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
