package kubediscovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/retry"
)

// errLeaseLost ends a term whose entries' lease expired or was revoked.
var errLeaseLost = errors.New("the lease of the discovered entries expired or was revoked")

// Source keeps a pool's endpoint registry equal to the Ready pods of a
// namespace that a label selector picks; see the package documentation.
type Source struct {
	cfg     Config
	log     *slog.Logger
	met     *metrics
	pods    *podSet
	service string

	factory informers.SharedInformerFactory
	handler cache.ResourceEventHandlerRegistration

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	synced  atomic.Bool
	leading atomic.Bool
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
	sel, err := ParseSelector(cfg.Selector)
	if err != nil {
		return nil, &FieldError{Field: "Selector", Err: err}
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
		pods:    newPodSet(cfg.Pool, cfg.TargetPort, cfg.Namespace, sel, log),
		service: ServicePrefix + cfg.Pool,
		done:    make(chan struct{}),
	}
	s.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }),
		informers.WithTransform(slimPod))
	inf := s.factory.Core().V1().Pods().Informer()
	if err := inf.SetWatchErrorHandlerWithContext(s.watchError); err != nil {
		met.unregister()
		return nil, fmt.Errorf("kubernetes discovery: pod informer: %w", err)
	}
	if s.handler, err = inf.AddEventHandler(s.pods.handler()); err != nil {
		met.unregister()
		return nil, fmt.Errorf("kubernetes discovery: pod informer: %w", err)
	}
	// client-go logs through the context's logger: this one.
	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, logr.FromSlogHandler(log.Handler())))
	s.cancel = cancel
	s.factory.StartWithContext(runCtx)
	go s.run(runCtx)
	log.Info("kubernetes discovery started", "namespace", cfg.Namespace, "selector", sel.String(),
		"target_port", cfg.TargetPort, "election", coord.ElectionPrefix(s.service), "resync", cfg.Resync)
	return s, nil
}

// Close stops the Source and waits for its goroutines. A leader resigns,
// so that another replica takes over at once; its entries stay until that
// replica rewrites them, or the lease expires (one TTL) if none does.
func (s *Source) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		s.factory.Shutdown()
		s.met.unregister()
	})
}

// Synced says whether the informer has listed the pods once.
func (s *Source) Synced() bool { return s.synced.Load() }

// Leading says whether this Source is the pool's discovery leader.
func (s *Source) Leading() bool { return s.leading.Load() }

// watchError logs a failed list or watch of the pods (the informer retries
// with backoff).
func (s *Source) watchError(_ context.Context, _ *cache.Reflector, err error) {
	switch {
	case errors.Is(err, io.EOF):
		// a watch closed normally
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		s.log.Debug("kubernetes pod watch expired; listing again", "error", err)
	default:
		s.log.Warn("kubernetes pod list or watch failed; retrying", "namespace", s.cfg.Namespace, "error", err)
	}
}

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

func (s *Source) coordOptions() []coord.Option {
	return []coord.Option{
		coord.WithLogger(s.log),
		coord.WithRequestTimeout(s.cfg.RequestTimeout),
		coord.WithRetryBackoff(s.cfg.MinBackoff, s.cfg.MaxBackoff),
	}
}

// run waits for the informer's first list, then campaigns for the
// leadership and leads, again and again, until ctx ends or the etcd client
// is closed.
func (s *Source) run(ctx context.Context) {
	defer close(s.done)
	select {
	case <-s.handler.HasSyncedChecker().Done():
	case <-ctx.Done():
		return
	}
	s.synced.Store(true)
	s.log.Info("kubernetes pods listed", "endpoints", len(s.pods.desired()))
	bo := retry.Backoff(s.cfg.MinBackoff, s.cfg.MaxBackoff)
	for {
		l, err := coord.Campaign(ctx, s.cfg.Etcd, s.service, s.cfg.ID, s.cfg.LeaseTTL, s.coordOptions()...)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case s.cfg.Etcd.Ctx().Err() != nil:
				s.log.Error("etcd client closed; kubernetes discovery stopped", "error", err)
				return
			}
			d := bo.NextBackOff()
			s.log.Warn("discovery campaign failed; retrying", "error", err, "retry_in", d)
			if !retry.Sleep(ctx, d) {
				return
			}
			continue
		}
		synced, err := s.lead(ctx, l)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
		if cerr := l.Close(cctx); cerr != nil {
			s.log.Debug("discovery resign failed; the lease expires", "error", cerr)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if synced {
			bo.Reset()
		}
		d := bo.NextBackOff()
		s.log.Warn("discovery leadership ended; campaigning again", "error", err, "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return
		}
	}
}

// lead writes the registry while l holds: the whole of it first, then after
// every change of the pods and every resync period, retrying failures with
// backoff. It returns when ctx ends (nil), the leadership ends or the
// entries' lease is lost; synced says whether a sync succeeded.
func (s *Source) lead(ctx context.Context, l *coord.Leadership) (synced bool, err error) {
	s.leading.Store(true)
	s.met.leader.Set(1)
	defer func() {
		s.leading.Store(false)
		s.met.leader.Set(0)
		s.met.endpoints.Set(0)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // also ends the keepalive of the entries' lease
	log := s.log.With("leader_key", l.Key())
	log.Info("discovery leader: writing the registry")

	lease, ka, err := s.grant(ctx, l)
	if err != nil {
		return false, err
	}
	reg := newRegistry(s.cfg.Etcd, s.cfg.Pool, l, lease, s.cfg.RequestTimeout, log)
	tick := time.NewTicker(s.cfg.Resync)
	defer tick.Stop()
	bo := retry.Backoff(s.cfg.MinBackoff, s.cfg.MaxBackoff)
	var retry <-chan time.Time // set while backing off
	full, dirty := true, true
	for {
		if dirty && retry == nil {
			err := s.syncOnce(ctx, reg, full)
			s.met.endpoints.Set(float64(len(reg.owned)))
			if err == nil {
				full, dirty, synced = false, false, true
				bo.Reset()
			} else {
				if ctx.Err() != nil {
					return synced, nil
				}
				if errors.Is(err, errFenced) {
					return synced, err
				}
				s.met.syncErrors.Inc()
				if lerr := l.Err(); lerr != nil {
					return synced, fmt.Errorf("%w (last sync: %w)", lerr, err)
				}
				d := bo.NextBackOff()
				log.Warn("registry sync failed; retrying", "error", err, "retry_in", d)
				// What a failed write did is unknown: list again.
				full = true
				retry = time.After(d)
			}
		}
		select {
		case <-ctx.Done():
			return synced, nil
		case <-l.Done():
			return synced, l.Err()
		case _, ok := <-ka:
			if !ok {
				return synced, errLeaseLost
			}
		case <-s.pods.changed:
			dirty = true
		case <-tick.C:
			full, dirty = true, true
		case <-retry:
			retry = nil
		}
	}
}

// syncOnce lists the registry when full, then makes it equal to the pods.
func (s *Source) syncOnce(ctx context.Context, reg *registry, full bool) error {
	if full {
		if err := reg.load(ctx); err != nil {
			return err
		}
	}
	return reg.sync(ctx, s.pods.desired())
}

// grant grants the term's lease, which the entries are bound to, and keeps
// it alive until ctx ends; it retries with backoff while the leadership
// holds.
func (s *Source) grant(ctx context.Context, l *coord.Leadership) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	ttl := int64(math.Ceil(s.cfg.LeaseTTL.Seconds()))
	bo := retry.Backoff(s.cfg.MinBackoff, s.cfg.MaxBackoff)
	for {
		gctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		g, err := s.cfg.Etcd.Grant(gctx, ttl)
		cancel()
		if err == nil {
			ka, kerr := s.cfg.Etcd.KeepAlive(ctx, g.ID)
			if kerr == nil {
				return g.ID, ka, nil
			}
			err = kerr
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
			_, _ = s.cfg.Etcd.Revoke(rctx, g.ID)
			cancel()
		}
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		if lerr := l.Err(); lerr != nil {
			return 0, nil, lerr
		}
		s.met.syncErrors.Inc()
		d := bo.NextBackOff()
		s.log.Warn("grant of the discovered entries' lease failed; retrying", "error", err, "retry_in", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-l.Done():
			return 0, nil, l.Err()
		}
	}
}
