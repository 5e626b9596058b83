package kubeva

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/hermod/hermod/libs/kube"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// resource is what a Source lists and watches.
var resource = kube.Resource{GVR: GVR, Kind: "VariantAutoscaling", CRD: true}

// SourceConfig configures a Source.
type SourceConfig struct {
	// Client is the dynamic client of the cluster. Required.
	Client dynamic.Interface
	// Namespace is the namespace followed ("" : every namespace, which
	// needs a ClusterRole).
	Namespace string
	// Selector, when set, is a label selector the objects must match
	// (labels.Parse syntax), e.g. to split a namespace between pools.
	Selector string
	// Resync is the informer's resync period (0: none).
	Resync time.Duration
	// OnChange gets the valid objects, sorted by namespace and name, once
	// the first list is complete and after every change. Calls come one at
	// a time. Required.
	OnChange func([]*config.VariantAutoscaling)
	// Logger logs (slog.Default when nil).
	Logger *slog.Logger
}

// Source follows the VariantAutoscaling objects of the API.
type Source struct {
	cfg    SourceConfig
	log    *slog.Logger
	inf    cache.SharedIndexInformer
	reg    cache.ResourceEventHandlerRegistration
	cancel context.CancelFunc
	done   chan struct{}

	// emitMu serializes OnChange.
	emitMu sync.Mutex
	mu     sync.Mutex
	valid  map[string]*config.VariantAutoscaling // by namespace/name
	synced bool
}

// StartSource starts following the objects; Close stops it. It fails only
// for an invalid SourceConfig: a failing list or watch (a missing CRD,
// missing RBAC) is retried by the informer and logged.
func StartSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.Client == nil || cfg.OnChange == nil {
		return nil, errors.New("kubernetes VariantAutoscaling source: a dynamic client and OnChange are required")
	}
	var tweak func(*metav1.ListOptions)
	if cfg.Selector != "" {
		sel, err := labels.Parse(cfg.Selector)
		if err != nil {
			return nil, fmt.Errorf("kubernetes VariantAutoscaling source: selector %q: %w", cfg.Selector, err)
		}
		tweak = func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Source{cfg: cfg, log: cfg.Logger.With("source", "kubernetes"), done: make(chan struct{}), valid: map[string]*config.VariantAutoscaling{}}
	var err error
	if s.inf, err = kube.NewInformer(cfg.Client, resource, cfg.Namespace, cfg.Resync, tweak, s.log); err != nil {
		return nil, fmt.Errorf("kubernetes VariantAutoscaling source: %w", err)
	}
	reg, err := s.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { s.apply(obj, !initial) },
		UpdateFunc: func(_, obj any) { s.apply(obj, true) },
		DeleteFunc: s.delete,
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes VariantAutoscaling source: %w", err)
	}
	s.reg = reg
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	stopped := kube.Run(runCtx, s.inf, s.log)
	go func() {
		defer close(s.done)
		defer func() { <-stopped }()
		select {
		case <-reg.HasSyncedChecker().Done():
		case <-runCtx.Done():
			return
		}
		s.mu.Lock()
		s.synced = true
		n := len(s.valid)
		s.mu.Unlock()
		s.log.Info("VariantAutoscaling objects listed", "namespace", cfg.Namespace, "selector", cfg.Selector, "valid", n)
		s.emit()
	}()
	return s, nil
}

// Close stops the source and waits for its goroutines.
func (s *Source) Close() {
	s.cancel()
	<-s.done
}

// Synced is closed once the first list has been handed to OnChange.
func (s *Source) Synced() <-chan struct{} { return s.reg.HasSyncedChecker().Done() }

// Has says whether the API holds a VariantAutoscaling of that namespace and
// name (valid or not), as far as the informer knows.
func (s *Source) Has(namespace, name string) bool {
	_, ok, err := s.inf.GetStore().GetByKey(namespace + "/" + name)
	return err == nil && ok
}

func (s *Source) apply(obj any, emit bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		s.log.Warn("unexpected object from the VariantAutoscaling informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	va, err := Decode(u)
	s.mu.Lock()
	prev, had := s.valid[key]
	if err != nil {
		delete(s.valid, key)
	} else {
		s.valid[key] = va
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("VariantAutoscaling ignored", "variant", key, "resource_version", u.GetResourceVersion(), "error", err)
		if had && emit {
			s.emit()
		}
		return
	}
	if had && sameSpec(prev, va) {
		return // a status write or a resync
	}
	if emit {
		s.emit()
	}
}

func (s *Source) delete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	_, had := s.valid[key]
	delete(s.valid, key)
	s.mu.Unlock()
	if had {
		s.emit()
	}
}

// emit hands OnChange the valid objects, once the first list is done.
func (s *Source) emit() {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	s.mu.Lock()
	if !s.synced {
		s.mu.Unlock()
		return
	}
	out := slices.Collect(maps.Values(s.valid))
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *config.VariantAutoscaling) int {
		return cmp.Or(cmp.Compare(a.Metadata.Namespace, b.Metadata.Namespace), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	s.cfg.OnChange(out)
}

// sameSpec says whether two versions of an object configure the same:
// spec and metadata (labels carry settings); the status is not compared.
func sameSpec(a, b *config.VariantAutoscaling) bool {
	return a.APIVersion == b.APIVersion && a.Spec.ScaleTargetRef == b.Spec.ScaleTargetRef && a.Spec.ModelID == b.Spec.ModelID &&
		a.Min() == b.Min() && a.Max() == b.Max() && a.Spec.VariantCost == b.Spec.VariantCost &&
		maps.Equal(a.Metadata.Labels, b.Metadata.Labels)
}
