package kube

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/scale"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
)

const ns = "llm"

var (
	lwsGR = schema.GroupResource{Group: "leaderworkerset.x-k8s.io", Resource: "leaderworkersets"}

	appsResources = &metav1.APIResourceList{
		GroupVersion: "apps/v1",
		APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"get", "update"}},
			{Name: "deployments/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale"},
			{Name: "statefulsets", Namespaced: true, Kind: "StatefulSet", Verbs: metav1.Verbs{"get", "update"}},
			{Name: "statefulsets/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale"},
		},
	}
	lwsResources = &metav1.APIResourceList{
		GroupVersion: "leaderworkerset.x-k8s.io/v1",
		APIResources: []metav1.APIResource{
			{Name: "leaderworkersets", Namespaced: true, Kind: "LeaderWorkerSet", Verbs: metav1.Verbs{"get", "update"}},
			{Name: "leaderworkersets/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale"},
		},
	}
)

func deployment(name string) actuator.Target {
	return actuator.Target{Variant: name + "-va", Namespace: ns, APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func statefulSet(name string) actuator.Target {
	return actuator.Target{Variant: name + "-va", Namespace: ns, APIVersion: "apps/v1", Kind: "StatefulSet", Name: name}
}

func lws(name string) actuator.Target {
	return actuator.Target{Variant: name + "-va", Namespace: ns, APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name}
}

type scaleKey struct {
	gr       schema.GroupResource
	ns, name string
}

// fakeScales backs a FakeScaleClient with an in-memory store of scale
// subresources that enforces resourceVersion on update, like the API
// server. The fake client records actions on the target's resource (e.g.
// "deployments") with subresource "scale"; the reactors filter on that.
type fakeScales struct {
	*scalefake.FakeScaleClient

	mu sync.Mutex
	// conflicts is the number of updates still to reject with a Conflict.
	conflicts int
	objs      map[scaleKey]*autoscalingv1.Scale
}

func newFakeScales() *fakeScales {
	f := &fakeScales{FakeScaleClient: &scalefake.FakeScaleClient{}, objs: map[scaleKey]*autoscalingv1.Scale{}}
	f.AddReactor("get", "*", f.get)
	f.AddReactor("update", "*", f.update)
	return f
}

func (f *fakeScales) put(gr schema.GroupResource, name string, spec, status int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs[scaleKey{gr, ns, name}] = &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: status},
	}
}

func (f *fakeScales) spec(t *testing.T, gr schema.GroupResource, name string) int32 {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.objs[scaleKey{gr, ns, name}]
	if !ok {
		t.Fatalf("no scale for %v %s", gr, name)
	}
	return s.Spec.Replicas
}

func (f *fakeScales) get(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "scale" {
		return false, nil, nil
	}
	ga := a.(k8stesting.GetAction)
	gr := ga.GetResource().GroupResource()
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.objs[scaleKey{gr, ga.GetNamespace(), ga.GetName()}]
	if !ok {
		return true, nil, apierrors.NewNotFound(gr, ga.GetName())
	}
	return true, s.DeepCopy(), nil
}

func (f *fakeScales) update(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "scale" {
		return false, nil, nil
	}
	ua := a.(k8stesting.UpdateAction)
	gr := ua.GetResource().GroupResource()
	in := ua.GetObject().(*autoscalingv1.Scale)
	f.mu.Lock()
	defer f.mu.Unlock()
	key := scaleKey{gr, ua.GetNamespace(), in.Name}
	cur, ok := f.objs[key]
	if !ok {
		return true, nil, apierrors.NewNotFound(gr, in.Name)
	}
	if f.conflicts > 0 || in.ResourceVersion != cur.ResourceVersion {
		if f.conflicts > 0 {
			f.conflicts--
			// Someone else wrote the object meanwhile.
			rv, _ := strconv.Atoi(cur.ResourceVersion)
			cur.ResourceVersion = strconv.Itoa(rv + 1)
		}
		return true, nil, apierrors.NewConflict(gr, in.Name, errors.New("the object has been modified"))
	}
	rv, _ := strconv.Atoi(cur.ResourceVersion)
	cur.ResourceVersion = strconv.Itoa(rv + 1)
	cur.Spec.Replicas = in.Spec.Replicas
	return true, cur.DeepCopy(), nil
}

// verbs lists the recorded scale actions, e.g. ["get", "update"].
func (f *fakeScales) verbs() []string {
	var out []string
	for _, a := range f.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

func (f *fakeScales) count(verb string) int {
	n := 0
	for _, v := range f.verbs() {
		if v == verb {
			n++
		}
	}
	return n
}

// fakeDiscovery returns a discovery client serving the given lists.
func fakeDiscovery(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	return &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}
}

// discoveryMapper is the production mapper over a fake discovery client.
func discoveryMapper(d *fakediscovery.FakeDiscovery) RESTMapper {
	return newDiscoveryMapper(memory.NewMemCacheClient(d))
}

type fixture struct {
	act    *Actuator
	scales *fakeScales
	apps   *fake.Clientset
}

func newFixture(t *testing.T, mapper RESTMapper, objs ...runtime.Object) *fixture {
	t.Helper()
	if mapper == nil {
		mapper = discoveryMapper(fakeDiscovery(appsResources, lwsResources))
	}
	f := &fixture{scales: newFakeScales(), apps: fake.NewClientset(objs...)}
	a, err := New(f.scales, mapper, f.apps.AppsV1(),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithConflictBackoff(wait.Backoff{Steps: 3, Duration: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	f.act = a
	return f
}

func TestScaleDeploymentUpAndDown(t *testing.T) {
	f := newFixture(t, nil, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1"}})
	f.scales.put(deployments, "d1", 1, 1)
	ctx := context.Background()
	tgt := deployment("d1")

	for _, want := range []int{3, 1, 0} {
		if err := f.act.Scale(ctx, tgt, want); err != nil {
			t.Fatalf("Scale(%d): %v", want, err)
		}
		if got := f.scales.spec(t, deployments, "d1"); int(got) != want {
			t.Fatalf("spec.replicas after Scale(%d) = %d", want, got)
		}
		st, err := f.act.State(ctx, tgt)
		if err != nil {
			t.Fatalf("State: %v", err)
		}
		if st.Desired != want {
			t.Fatalf("State().Desired after Scale(%d) = %d", want, st.Desired)
		}
	}
	if n := f.scales.count("update"); n != 3 {
		t.Fatalf("updates = %d, want 3 (actions %v)", n, f.scales.verbs())
	}
}

func TestScaleStatefulSet(t *testing.T) {
	f := newFixture(t, nil, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
		Status:     appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 1},
	})
	f.scales.put(statefulsets, "s1", 2, 2)
	ctx := context.Background()

	if err := f.act.Scale(ctx, statefulSet("s1"), 4); err != nil {
		t.Fatal(err)
	}
	if got := f.scales.spec(t, statefulsets, "s1"); got != 4 {
		t.Fatalf("spec.replicas = %d, want 4", got)
	}
	st, err := f.act.State(ctx, statefulSet("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (actuator.State{Desired: 4, Ready: 1}) {
		t.Fatalf("State = %+v, want Desired 4 Ready 1 (readyReplicas)", st)
	}
}

func TestScaleLeaderWorkerSetThroughDiscoveryMapper(t *testing.T) {
	disc := fakeDiscovery(appsResources, lwsResources)
	f := newFixture(t, discoveryMapper(disc))
	f.scales.put(lwsGR, "w1", 1, 1)
	ctx := context.Background()

	if err := f.act.Scale(ctx, lws("w1"), 2); err != nil {
		t.Fatal(err)
	}
	if got := f.scales.spec(t, lwsGR, "w1"); got != 2 {
		t.Fatalf("spec.replicas = %d, want 2", got)
	}
	for _, a := range f.scales.Actions() {
		if gr := a.GetResource().GroupResource(); gr != lwsGR {
			t.Fatalf("action on %v, want %v", gr, lwsGR)
		}
	}
	st, err := f.act.State(ctx, lws("w1"))
	if err != nil {
		t.Fatal(err)
	}
	// Other kinds fall back to the scale's status.replicas.
	if st != (actuator.State{Desired: 2, Ready: 1}) {
		t.Fatalf("State = %+v, want Desired 2 Ready 1 (status.replicas)", st)
	}
	if n := len(f.apps.Actions()); n != 0 {
		t.Fatalf("apps client used %d times for a LeaderWorkerSet", n)
	}
}

func TestScaleLeaderWorkerSetThroughStaticMapper(t *testing.T) {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}, meta.RESTScopeNamespace)
	f := newFixture(t, m)
	f.scales.put(lwsGR, "w1", 3, 3)

	if err := f.act.Scale(context.Background(), lws("w1"), 5); err != nil {
		t.Fatal(err)
	}
	if got := f.scales.spec(t, lwsGR, "w1"); got != 5 {
		t.Fatalf("spec.replicas = %d, want 5", got)
	}
}

func TestUnknownKind(t *testing.T) {
	tests := []struct {
		name string
		tgt  actuator.Target
	}{
		{"unknown group", actuator.Target{Namespace: ns, APIVersion: "example.com/v1", Kind: "FooSet", Name: "x"}},
		{"unknown kind in apps", actuator.Target{Namespace: ns, APIVersion: "apps/v1", Kind: "Deploymnet", Name: "x"}},
		{"unserved version", actuator.Target{Namespace: ns, APIVersion: "leaderworkerset.x-k8s.io/v2", Kind: "LeaderWorkerSet", Name: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx := context.Background()
			errScale := f.act.Scale(ctx, tt.tgt, 1)
			_, errState := f.act.State(ctx, tt.tgt)
			for _, err := range []error{errScale, errState} {
				if !errors.Is(err, ErrUnknownKind) {
					t.Fatalf("err = %v, want ErrUnknownKind", err)
				}
				if !meta.IsNoMatchError(err) {
					t.Fatalf("err = %v, want the mapper's no-match error in the chain", err)
				}
				msg := err.Error()
				for _, want := range []string{`kind "` + tt.tgt.Kind + `"`, tt.tgt.APIVersion, ns + "/" + tt.tgt.Kind + "/x"} {
					if !strings.Contains(msg, want) {
						t.Fatalf("error %q does not contain %q", msg, want)
					}
				}
			}
			if n := len(f.scales.Actions()); n != 0 {
				t.Fatalf("scale client called %d times for an unknown kind", n)
			}
		})
	}
}

func TestRediscoveryFindsKindInstalledLater(t *testing.T) {
	disc := fakeDiscovery(appsResources) // LeaderWorkerSet CRD not installed yet
	f := newFixture(t, discoveryMapper(disc))
	f.scales.put(lwsGR, "w1", 1, 1)
	now := time.Unix(1000, 0)
	f.act.now = func() time.Time { return now }
	ctx := context.Background()

	if err := f.act.Scale(ctx, lws("w1"), 2); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("before install: err = %v, want ErrUnknownKind", err)
	}
	disc.Resources = append(disc.Resources, lwsResources) // CRD installed

	now = now.Add(DefaultRediscoveryInterval / 2)
	if err := f.act.Scale(ctx, lws("w1"), 2); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("within the rediscovery interval: err = %v, want ErrUnknownKind (cached)", err)
	}
	now = now.Add(DefaultRediscoveryInterval)
	if err := f.act.Scale(ctx, lws("w1"), 2); err != nil {
		t.Fatalf("after the rediscovery interval: %v", err)
	}
	if got := f.scales.spec(t, lwsGR, "w1"); got != 2 {
		t.Fatalf("spec.replicas = %d, want 2", got)
	}
}

func TestScaleRetriesConflict(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 1, 1)
	f.scales.conflicts = 1

	if err := f.act.Scale(context.Background(), deployment("d1"), 3); err != nil {
		t.Fatal(err)
	}
	if got := f.scales.spec(t, deployments, "d1"); got != 3 {
		t.Fatalf("spec.replicas = %d, want 3", got)
	}
	want := []string{"get", "update", "get", "update"}
	if got := f.scales.verbs(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("actions = %v, want %v (re-read after the conflict)", got, want)
	}
}

func TestScaleGivesUpOnPersistentConflict(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 1, 1)
	f.scales.conflicts = 100

	err := f.act.Scale(context.Background(), deployment("d1"), 3)
	if !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	if !strings.Contains(err.Error(), ns+"/Deployment/d1") {
		t.Fatalf("error %q does not name the target", err)
	}
	if n := f.scales.count("update"); n != 3 {
		t.Fatalf("updates = %d, want 3 (the backoff's steps)", n)
	}
	if got := f.scales.spec(t, deployments, "d1"); got != 1 {
		t.Fatalf("spec.replicas = %d, want 1 (unchanged)", got)
	}
}

func TestScaleToSameValueIssuesNoUpdate(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 2, 2)

	if err := f.act.Scale(context.Background(), deployment("d1"), 2); err != nil {
		t.Fatal(err)
	}
	if got := f.scales.verbs(); strings.Join(got, ",") != "get" {
		t.Fatalf("actions = %v, want only a get", got)
	}
}

func TestCancelledContext(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if err := f.act.Scale(ctx, deployment("d1"), 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("Scale err = %v, want context.Canceled", err)
	}
	if _, err := f.act.State(ctx, deployment("d1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("State err = %v, want context.Canceled", err)
	}
	if n := len(f.scales.Actions()); n != 0 {
		t.Fatalf("scale client called %d times under a cancelled context", n)
	}
	if got := f.scales.spec(t, deployments, "d1"); got != 1 {
		t.Fatalf("spec.replicas = %d, want 1 (unchanged)", got)
	}
}

func TestCancelStopsConflictRetries(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel as soon as the first update has been rejected.
	f.scales.PrependReactor("update", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return true, nil, apierrors.NewConflict(deployments, "d1", errors.New("modified"))
	})

	err := f.act.Scale(ctx, deployment("d1"), 3)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := f.scales.count("update"); n != 1 {
		t.Fatalf("updates = %d, want 1 (no retry after cancel)", n)
	}
}

func TestStateDeploymentReadyReplicas(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1"},
		Status:     appsv1.DeploymentStatus{Replicas: 4, ReadyReplicas: 2},
	}
	f := newFixture(t, nil, dep)
	f.scales.put(deployments, "d1", 4, 4)

	st, err := f.act.State(context.Background(), deployment("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (actuator.State{Desired: 4, Ready: 2}) {
		t.Fatalf("State = %+v, want Desired 4 Ready 2 (readyReplicas)", st)
	}

	// Without an apps client, Ready is the scale's status.replicas.
	noApps, err := New(f.scales, discoveryMapper(fakeDiscovery(appsResources)), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = noApps.State(context.Background(), deployment("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (actuator.State{Desired: 4, Ready: 4}) {
		t.Fatalf("State without apps client = %+v, want Desired 4 Ready 4", st)
	}
}

func TestTargetNotFound(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()

	err := f.act.Scale(ctx, deployment("missing"), 1)
	if !errors.Is(err, ErrTargetNotFound) || !apierrors.IsNotFound(err) {
		t.Fatalf("Scale err = %v, want ErrTargetNotFound wrapping a NotFound", err)
	}
	if !strings.Contains(err.Error(), ns+"/Deployment/missing") {
		t.Fatalf("error %q does not name the target", err)
	}
	if _, err := f.act.State(ctx, deployment("missing")); !errors.Is(err, ErrTargetNotFound) {
		t.Fatalf("State err = %v, want ErrTargetNotFound", err)
	}
}

func TestInvalidTarget(t *testing.T) {
	f := newFixture(t, nil)
	f.scales.put(deployments, "d1", 1, 1)
	ctx := context.Background()
	tests := []struct {
		name     string
		tgt      actuator.Target
		replicas int
	}{
		{"negative replicas", deployment("d1"), -1},
		{"replicas above int32", deployment("d1"), 1 << 40},
		{"no namespace", actuator.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "d1"}, 1},
		{"no apiVersion", actuator.Target{Namespace: ns, Kind: "Deployment", Name: "d1"}, 1},
		{"bad apiVersion", actuator.Target{Namespace: ns, APIVersion: "a/b/c", Kind: "Deployment", Name: "d1"}, 1},
		{"no name", actuator.Target{Namespace: ns, APIVersion: "apps/v1", Kind: "Deployment"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := f.act.Scale(ctx, tt.tgt, tt.replicas); !errors.Is(err, ErrInvalidTarget) {
				t.Fatalf("err = %v, want ErrInvalidTarget", err)
			}
		})
	}
	if n := f.scales.count("update"); n != 0 {
		t.Fatalf("updates = %d, want 0", n)
	}
}

// deadlineScales wraps a ScalesGetter and records calls made without a
// deadline or with one further than max away.
type deadlineScales struct {
	scale.ScalesGetter
	max time.Duration

	mu  sync.Mutex
	bad []string
}

func (d *deadlineScales) Scales(namespace string) scale.ScaleInterface {
	return deadlineScaleInterface{d.ScalesGetter.Scales(namespace), d}
}

func (d *deadlineScales) check(ctx context.Context, op string) {
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > d.max {
		d.mu.Lock()
		d.bad = append(d.bad, op)
		d.mu.Unlock()
	}
}

type deadlineScaleInterface struct {
	scale.ScaleInterface
	d *deadlineScales
}

func (s deadlineScaleInterface) Get(ctx context.Context, gr schema.GroupResource, name string, o metav1.GetOptions) (*autoscalingv1.Scale, error) {
	s.d.check(ctx, "get")
	return s.ScaleInterface.Get(ctx, gr, name, o)
}

func (s deadlineScaleInterface) Update(ctx context.Context, gr schema.GroupResource, sc *autoscalingv1.Scale, o metav1.UpdateOptions) (*autoscalingv1.Scale, error) {
	s.d.check(ctx, "update")
	return s.ScaleInterface.Update(ctx, gr, sc, o)
}

func TestEveryCallHasADeadline(t *testing.T) {
	scales := newFakeScales()
	scales.put(deployments, "d1", 1, 1)
	scales.conflicts = 1
	const timeout = 3 * time.Second
	wrapped := &deadlineScales{ScalesGetter: scales, max: timeout}
	a, err := New(wrapped, discoveryMapper(fakeDiscovery(appsResources)), nil,
		WithCallTimeout(timeout), WithConflictBackoff(wait.Backoff{Steps: 3, Duration: time.Millisecond}),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline of its own
	if err := a.Scale(ctx, deployment("d1"), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.State(ctx, deployment("d1")); err != nil {
		t.Fatal(err)
	}
	if len(wrapped.bad) != 0 {
		t.Fatalf("calls without a deadline of at most %v: %v", timeout, wrapped.bad)
	}
	if n := len(scales.Actions()); n != 5 { // get, update (conflict), get, update, get
		t.Fatalf("scale calls = %d, want 5", n)
	}
}

func TestNewRejectsNilClients(t *testing.T) {
	if _, err := New(nil, meta.NewDefaultRESTMapper(nil), nil); err == nil {
		t.Fatal("New(nil scales) succeeded")
	}
	if _, err := New(newFakeScales(), nil, nil); err == nil {
		t.Fatal("New(nil mapper) succeeded")
	}
	a, err := New(newFakeScales(), meta.NewDefaultRESTMapper(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "kubernetes" {
		t.Fatalf("Name() = %q", a.Name())
	}
}
