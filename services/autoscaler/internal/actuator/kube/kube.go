// Package kube is the "kubernetes" actuator: it sets a variant's replica
// count directly on its target's scale subresource (no HPA in between, so
// no tolerance dead band) and reads it back.
//
// A target is named by scaleTargetRef (apiVersion, kind, name) plus the
// variant's namespace. The kind is resolved to its resource through a
// RESTMapper, so any kind that serves a scale subresource works; the ones
// WVA documents are Deployment and StatefulSet (apps/v1) and
// LeaderWorkerSet (leaderworkerset.x-k8s.io/v1).
//
// RBAC: get and update on <resource>/scale for every target kind, get on
// deployments and statefulsets (ready replicas), and discovery.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
)

// Name is the actuator's kind.
const Name = "kubernetes"

// Defaults for the options.
const (
	// DefaultCallTimeout bounds every API call whose ctx has no earlier
	// deadline.
	DefaultCallTimeout = 10 * time.Second
	// DefaultRediscoveryInterval is the least time between two discovery
	// refreshes triggered by a kind the RESTMapper does not know (a CRD
	// such as LeaderWorkerSet installed after the autoscaler started).
	DefaultRediscoveryInterval = 30 * time.Second
)

// Sentinel errors callers branch on (for the VariantAutoscaling's
// TargetResolved condition). Errors from the API server stay in the chain,
// so apierrors.IsForbidden and friends work too.
var (
	// ErrUnknownKind: the cluster serves no resource for the target's
	// apiVersion and kind.
	ErrUnknownKind = errors.New("kind not served by the cluster")
	// ErrTargetNotFound: the target object (or its scale subresource)
	// does not exist.
	ErrTargetNotFound = errors.New("scale target not found")
	// ErrInvalidTarget: the Target or the replica count is malformed.
	ErrInvalidTarget = errors.New("invalid scale target")
)

// RESTMapper resolves a group and kind to its resource. It is the part of
// meta.RESTMapperWithContext the actuator uses; both
// *restmapper.DeferredDiscoveryRESTMapper and *meta.DefaultRESTMapper
// satisfy it. When the mapper also has ResetWithContext (as the deferred
// discovery mapper does), a kind it does not know makes the actuator reset
// it and look again, at most once per rediscovery interval.
type RESTMapper interface {
	RESTMappingWithContext(ctx context.Context, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

type resettable interface {
	ResetWithContext(ctx context.Context)
}

// Option configures an Actuator.
type Option func(*Actuator)

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(a *Actuator) {
		if l != nil {
			a.log = l
		}
	}
}

// WithCallTimeout bounds every API call (default DefaultCallTimeout). A
// ctx with an earlier deadline wins.
func WithCallTimeout(d time.Duration) Option {
	return func(a *Actuator) {
		if d > 0 {
			a.callTimeout = d
		}
	}
}

// WithConflictBackoff sets the retry schedule for update conflicts
// (default retry.DefaultRetry: 5 attempts, 10 ms apart).
func WithConflictBackoff(b wait.Backoff) Option {
	return func(a *Actuator) {
		if b.Steps > 0 {
			a.backoff = b
		}
	}
}

// WithRediscoveryInterval sets the least time between two RESTMapper
// resets caused by an unknown kind (default DefaultRediscoveryInterval;
// 0 resets on every miss).
func WithRediscoveryInterval(d time.Duration) Option {
	return func(a *Actuator) {
		if d >= 0 {
			a.rediscoverEvery = d
		}
	}
}

// Actuator scales targets through their scale subresource. It is safe for
// concurrent use.
type Actuator struct {
	scales scale.ScalesGetter
	mapper RESTMapper
	apps   appsv1client.AppsV1Interface // nil: Ready is always status.replicas

	log             *slog.Logger
	callTimeout     time.Duration
	backoff         wait.Backoff
	rediscoverEvery time.Duration
	now             func() time.Time

	mu        sync.Mutex
	lastReset time.Time
	everReset bool
}

var _ actuator.Actuator = (*Actuator)(nil)

// New returns an Actuator over the given clients: scales reads and writes
// scale subresources, mapper resolves kinds to resources, and apps (may be
// nil) reads Deployments and StatefulSets for their ready replicas.
func New(scales scale.ScalesGetter, mapper RESTMapper, apps appsv1client.AppsV1Interface, opts ...Option) (*Actuator, error) {
	if scales == nil {
		return nil, errors.New("kubernetes actuator: nil scale client")
	}
	if mapper == nil {
		return nil, errors.New("kubernetes actuator: nil RESTMapper")
	}
	a := &Actuator{
		scales:          scales,
		mapper:          mapper,
		apps:            apps,
		log:             slog.Default(),
		callTimeout:     DefaultCallTimeout,
		backoff:         retry.DefaultRetry,
		rediscoverEvery: DefaultRediscoveryInterval,
		now:             time.Now,
	}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// Name implements actuator.Actuator.
func (a *Actuator) Name() string { return Name }

// State reads the target's scale: Desired is spec.replicas. Ready is
// status.readyReplicas of the Deployment or StatefulSet when the actuator
// has an apps client; for other kinds (LeaderWorkerSet, ...) it is the
// scale's status.replicas, which counts the replicas (pods, or LWS groups)
// that exist, not the ones that are ready.
func (a *Actuator) State(ctx context.Context, t actuator.Target) (actuator.State, error) {
	gr, err := a.resolve(ctx, t)
	if err != nil {
		return actuator.State{}, fmt.Errorf("state of %s: %w", ref(t), err)
	}
	sc, err := a.getScale(ctx, t, gr)
	if err != nil {
		return actuator.State{}, fmt.Errorf("state of %s: %w", ref(t), err)
	}
	st := actuator.State{Desired: int(sc.Spec.Replicas), Ready: int(sc.Status.Replicas)}
	ready, ok, err := a.readyReplicas(ctx, t, gr)
	if err != nil {
		return actuator.State{}, fmt.Errorf("state of %s: %w", ref(t), err)
	}
	if ok {
		st.Ready = ready
	}
	return st, nil
}

// Scale sets the target's spec.replicas to replicas through the scale
// subresource: Get, then Update unless the count is already replicas,
// retrying the pair on a conflict.
func (a *Actuator) Scale(ctx context.Context, t actuator.Target, replicas int) error {
	if replicas < 0 || replicas > math.MaxInt32 {
		return fmt.Errorf("scale %s to %d: %w: replicas out of range", ref(t), replicas, ErrInvalidTarget)
	}
	gr, err := a.resolve(ctx, t)
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", ref(t), replicas, err)
	}
	want := int32(replicas)
	var from int32
	updated := false
	attempts := 0
	// lastErr is what the last attempt returned: retry.OnError reports the
	// last conflict in place of a later context error, so it is kept here.
	var lastErr error
	err = retry.RetryOnConflict(a.backoff, func() error {
		attempts++
		lastErr = a.setReplicas(ctx, t, gr, want, &from, &updated)
		return lastErr
	})
	if err != nil {
		if lastErr != nil {
			err = lastErr
		}
		if apierrors.IsConflict(err) {
			return fmt.Errorf("scale %s to %d: still conflicting after %d attempts: %w", ref(t), replicas, attempts, err)
		}
		return fmt.Errorf("scale %s to %d: %w", ref(t), replicas, err)
	}
	if updated {
		a.log.InfoContext(ctx, "scaled target",
			"variant", t.Variant, "namespace", t.Namespace, "kind", t.Kind, "name", t.Name,
			"from", from, "to", want, "attempts", attempts)
	} else {
		a.log.DebugContext(ctx, "target already at replicas",
			"variant", t.Variant, "namespace", t.Namespace, "kind", t.Kind, "name", t.Name,
			"replicas", want)
	}
	return nil
}

// setReplicas is one attempt of Scale: read the scale, and write it back
// with spec.replicas = want unless it already is.
func (a *Actuator) setReplicas(ctx context.Context, t actuator.Target, gr schema.GroupResource, want int32, from *int32, updated *bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sc, err := a.getScale(ctx, t, gr)
	if err != nil {
		return err
	}
	*from, *updated = sc.Spec.Replicas, false
	if sc.Spec.Replicas == want {
		return nil
	}
	sc.Spec.Replicas = want
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if _, err := a.scales.Scales(t.Namespace).Update(cctx, gr, sc, metav1.UpdateOptions{}); err != nil {
		return classify(err)
	}
	*updated = true
	return nil
}

// resolve maps the target's apiVersion and kind to the resource whose scale
// subresource the actuator uses.
func (a *Actuator) resolve(ctx context.Context, t actuator.Target) (schema.GroupResource, error) {
	if t.Namespace == "" || t.Name == "" || t.Kind == "" || t.APIVersion == "" {
		return schema.GroupResource{}, fmt.Errorf("%w: namespace, apiVersion, kind and name are required", ErrInvalidTarget)
	}
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return schema.GroupResource{}, fmt.Errorf("%w: apiVersion %q: %w", ErrInvalidTarget, t.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: t.Kind}
	if err := ctx.Err(); err != nil {
		return schema.GroupResource{}, err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	m, err := a.mapper.RESTMappingWithContext(cctx, gk, gv.Version)
	if err != nil && meta.IsNoMatchError(err) && a.mayRediscover() {
		a.log.InfoContext(ctx, "kind unknown, refreshing discovery",
			"api_version", t.APIVersion, "kind", t.Kind)
		a.mapper.(resettable).ResetWithContext(cctx)
		m, err = a.mapper.RESTMappingWithContext(cctx, gk, gv.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return schema.GroupResource{}, fmt.Errorf("kind %q of apiVersion %q: %w: %w", t.Kind, t.APIVersion, ErrUnknownKind, err)
		}
		return schema.GroupResource{}, fmt.Errorf("resolve kind %q of apiVersion %q: %w", t.Kind, t.APIVersion, err)
	}
	if m.Scope != nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
		return schema.GroupResource{}, fmt.Errorf("%w: kind %q of apiVersion %q is not namespaced", ErrInvalidTarget, t.Kind, t.APIVersion)
	}
	return m.Resource.GroupResource(), nil
}

// mayRediscover reports whether the mapper can be reset now, and if so
// records the reset.
func (a *Actuator) mayRediscover() bool {
	if _, ok := a.mapper.(resettable); !ok {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if a.everReset && now.Sub(a.lastReset) < a.rediscoverEvery {
		return false
	}
	a.everReset, a.lastReset = true, now
	return true
}

func (a *Actuator) getScale(ctx context.Context, t actuator.Target, gr schema.GroupResource) (*autoscalingv1.Scale, error) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	sc, err := a.scales.Scales(t.Namespace).Get(cctx, gr, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, classify(err)
	}
	return sc, nil
}

var (
	deployments  = schema.GroupResource{Group: "apps", Resource: "deployments"}
	statefulsets = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
)

// readyReplicas reads status.readyReplicas of a Deployment or StatefulSet;
// ok is false for other resources or without an apps client.
func (a *Actuator) readyReplicas(ctx context.Context, t actuator.Target, gr schema.GroupResource) (n int, ok bool, err error) {
	if a.apps == nil || (gr != deployments && gr != statefulsets) {
		return 0, false, nil
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if gr == deployments {
		d, err := a.apps.Deployments(t.Namespace).Get(cctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return 0, false, fmt.Errorf("get deployment: %w", classify(err))
		}
		return int(d.Status.ReadyReplicas), true, nil
	}
	s, err := a.apps.StatefulSets(t.Namespace).Get(cctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return 0, false, fmt.Errorf("get statefulset: %w", classify(err))
	}
	return int(s.Status.ReadyReplicas), true, nil
}

// callCtx bounds one API call.
func (a *Actuator) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.callTimeout)
}

// classify adds ErrTargetNotFound to a NotFound error, keeping the original
// (and so its status) in the chain.
func classify(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", ErrTargetNotFound, err)
	}
	return err
}

// ref names a target in errors: namespace/kind/name.
func ref(t actuator.Target) string {
	return t.Namespace + "/" + t.Kind + "/" + t.Name
}
