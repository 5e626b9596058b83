package kubediscovery

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kube"
	"github.com/hermod/hermod/services/collector/internal/inferencepool"
	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// podResource is what the pod informer lists and watches.
var podResource = kube.Resource{GVR: corev1.SchemeGroupVersion.WithResource("pods"), Kind: "pod"}

// Source keeps a pool's endpoint registry equal to the Ready pods of a
// namespace that a label selector (or an InferencePool) picks; see the
// package documentation.
type Source struct {
	cfg     Config
	log     *slog.Logger
	met     *metrics
	pods    *podSet
	service string

	factory informers.SharedInformerFactory
	podInf  cache.SharedIndexInformer
	handler cache.ResourceEventHandlerRegistration
	// pool follows the InferencePool (nil without one).
	pool *inferencepool.Watch

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	writer *registrysync.Writer
	synced atomic.Bool
}

// Start starts watching the pods and campaigning for the pool's discovery
// leadership; the Source writes the registry while it leads. It runs until
// ctx ends or Close is called; call Close in either case to release it.
// Start fails only for an invalid Config (a *FieldError for the user-set
// fields) or metrics that cannot be registered; the informer and etcd
// retry on their own.
func Start(ctx context.Context, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Without an InferencePool, the selector and port are fixed and the
	// API server filters the pods by the selector; with one, no pod counts
	// until the pool is read, and the informer holds every pod of the
	// namespace so that a new selector applies at once.
	var initial target
	listOpts := func(*metav1.ListOptions) {}
	if cfg.InferencePool == "" {
		sel, err := ParseSelector(cfg.Selector)
		if err != nil {
			return nil, &FieldError{Field: "Selector", Err: err}
		}
		initial = target{selector: sel, ports: []int{cfg.TargetPort}}
		listOpts = func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }
	}
	log := cfg.Logger.With("discovery", "kubernetes")
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Source{
		cfg:     cfg,
		log:     log,
		met:     met,
		pods:    newPodSet(cfg.Pool, cfg.Namespace, initial, log),
		service: ServicePrefix + cfg.Pool,
		done:    make(chan struct{}),
	}
	s.writer, err = registrysync.New(registrysync.Config{
		Pool: cfg.Pool, Service: s.service, Owner: DiscoveredByKubernetes, Etcd: cfg.Etcd, ID: cfg.ID,
		LeaseTTL: cfg.LeaseTTL, Resync: cfg.Resync, RequestTimeout: cfg.RequestTimeout,
		MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff, Logger: log,
		Metrics: registrysync.Metrics{Leader: met.leader, Endpoints: met.endpoints, SyncErrors: met.syncErrors},
	}, s.pods)
	if err != nil {
		met.unregister()
		return nil, fmt.Errorf("kubernetes discovery: %w", err)
	}
	s.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(listOpts),
		informers.WithTransform(slimPod))
	inf := s.factory.Core().V1().Pods().Informer()
	s.podInf = inf
	if err := inf.SetWatchErrorHandlerWithContext(kube.WatchErrorHandler(podResource, log.With("namespace", cfg.Namespace))); err != nil {
		met.unregister()
		return nil, fmt.Errorf("kubernetes discovery: pod informer: %w", err)
	}
	if s.handler, err = inf.AddEventHandler(s.pods.handler()); err != nil {
		met.unregister()
		return nil, fmt.Errorf("kubernetes discovery: pod informer: %w", err)
	}
	// client-go logs through the context's logger: this one.
	runCtx, cancel := context.WithCancel(kube.WithLogger(ctx, log))
	s.cancel = cancel
	if cfg.InferencePool != "" {
		s.pool, err = inferencepool.StartWatch(runCtx, inferencepool.WatchConfig{
			Client: cfg.Dynamic, Namespace: cfg.Namespace, Name: cfg.InferencePool, Resync: cfg.Resync,
			OnChange: s.applyPool, Logger: log,
		})
		if err != nil {
			cancel()
			met.unregister()
			return nil, fmt.Errorf("kubernetes discovery: %w", err)
		}
	}
	s.factory.StartWithContext(runCtx)
	go s.run(runCtx)
	if cfg.InferencePool != "" {
		log.Info("kubernetes discovery started", "namespace", cfg.Namespace, "inference_pool", cfg.InferencePool,
			"election", coord.ElectionPrefix(s.service), "resync", cfg.Resync)
	} else {
		log.Info("kubernetes discovery started", "namespace", cfg.Namespace, "selector", initial.selector.String(),
			"target_port", cfg.TargetPort, "election", coord.ElectionPrefix(s.service), "resync", cfg.Resync)
	}
	return s, nil
}

// applyPool applies a version of the InferencePool (nil: deleted) to the
// pods the informer holds.
func (s *Source) applyPool(p *inferencepool.Pool) {
	var t target
	if p == nil {
		s.log.Warn("InferencePool deleted: no pod is selected until it is created again", "inference_pool", s.cfg.InferencePool)
	} else {
		t = target{selector: p.LabelSelector(), ports: slices.Clone(p.TargetPorts)}
		args := []any{"inference_pool", p.Name, "selector", t.selector.String(), "target_ports", p.TargetPorts, "resource_version", p.ResourceVersion}
		if ep := p.EndpointPicker; ep != nil {
			args = append(args, "endpoint_picker", ep.Name, "endpoint_picker_port", ep.Port, "failure_mode", ep.FailureMode)
		}
		s.log.Info("InferencePool applied", args...)
	}
	s.pods.retarget(t, s.listPods())
}

// listPods returns the pods the informer holds.
func (s *Source) listPods() []*corev1.Pod {
	objs := s.podInf.GetStore().List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// Close stops the Source and waits for its goroutines. A leader resigns,
// so that another replica takes over at once; its entries stay until that
// replica rewrites them, or the lease expires (one TTL) if none does.
func (s *Source) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		if s.pool != nil {
			s.pool.Close()
		}
		s.factory.Shutdown()
		s.met.unregister()
	})
}

// Synced says whether the informers have listed the pods (and the
// InferencePool) once.
func (s *Source) Synced() bool { return s.synced.Load() }

// Leading says whether this Source is the pool's discovery leader.
func (s *Source) Leading() bool { return s.writer.Leading() }

// slimPod keeps of a pod what discovery reads, so that the informer's cache
// stays small.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	meta := pod.ObjectMeta
	meta.ManagedFields = nil
	return &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: meta,
		Status: corev1.PodStatus{
			Phase:      pod.Status.Phase,
			Conditions: pod.Status.Conditions,
			PodIP:      pod.Status.PodIP,
			PodIPs:     pod.Status.PodIPs,
			StartTime:  pod.Status.StartTime,
		},
	}, nil
}

// run waits for the informer's first list, then runs the registry writer
// until ctx ends or the etcd client is closed.
func (s *Source) run(ctx context.Context) {
	defer close(s.done)
	select {
	case <-s.handler.HasSyncedChecker().Done():
	case <-ctx.Done():
		return
	}
	if s.pool != nil {
		select {
		case <-s.pool.Synced():
		case <-ctx.Done():
			return
		}
		if s.pool.Current() == nil {
			s.log.Warn("InferencePool not found (or invalid): no pod is selected until it is created",
				"inference_pool", s.cfg.Namespace+"/"+s.cfg.InferencePool)
		}
	}
	s.synced.Store(true)
	s.log.Info("kubernetes pods listed", "endpoints", len(s.pods.desired()))
	s.writer.Run(ctx)
}
