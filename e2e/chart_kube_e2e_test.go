package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/hermod/hermod/testkit/kubeapi"
)

// kube is the test binary's kube-apiserver: started by the first test that
// asks for it (kube.Get), stopped by TestMain.
var kube kubeapi.Shared

// The chart, its release name and the CRDs of the APIs it uses.
const (
	chartPath    = "../deployments/helm/hermod"
	chartRelease = "hermod"
	crdDir       = "testdata/crds"
)

// The chart installs into a real kube-apiserver (RBAC, admission, CRD
// schemas, CEL rules) with its default values and with ci/values-full.yaml:
// every object it renders passes a strict server-side dry run (an unknown
// or duplicated field fails), helm install succeeds and the objects are
// stored. Then each service's ServiceAccount may make exactly the calls
// that service makes with the values' flags, and is refused the obvious
// excess (see serviceCalls and excessCalls).
func TestChartOnKubeAPIServer(t *testing.T) {
	srv := kube.Get(t)
	helm := helmBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	k := newKubeClients(t, srv.Config())
	installCRDs(ctx, t, k, crdDir)

	for _, tc := range []struct {
		name, namespace string
		values          []string
	}{
		{"defaults", "hermod-defaults", nil},
		{"values-full", "hermod", []string{"ci/values-full.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var valueArgs []string
			for _, v := range tc.values {
				valueArgs = append(valueArgs, "-f", filepath.Join(chartPath, v))
			}
			objs := decodeObjects(t, runHelm(t, helm, "", append([]string{"template", chartRelease, chartPath, "-n", tc.namespace}, valueArgs...)...))
			createNamespaces(ctx, t, k, tc.namespace, objs)
			for _, o := range objs {
				if err := k.dryRunStrict(ctx, o); err != nil {
					t.Errorf("%s: %v", objectKey(o), err)
				}
			}
			// The autoscaler's VariantAutoscaling objects are valid
			// objects of the API too (--va-source=kubernetes reads them
			// from there).
			for _, va := range variantAutoscalings(t, objs) {
				if err := k.dryRunStrict(ctx, va); err != nil {
					t.Errorf("autoscaler config: %s: %v", objectKey(va), err)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			runHelm(t, helm, srv.Kubeconfig(), append([]string{"install", chartRelease, chartPath, "-n", tc.namespace, "--timeout", "2m"}, valueArgs...)...)
			// the server outlives one run (-count): the next installs afresh
			defer uninstallRelease(t, helm, srv.Kubeconfig(), tc.namespace)
			installed := decodeObjects(t, runHelm(t, helm, srv.Kubeconfig(), "get", "manifest", chartRelease, "-n", tc.namespace))
			if len(installed) != len(objs) {
				t.Errorf("helm installed %d objects, the render has %d", len(installed), len(objs))
			}
			for _, o := range installed {
				if _, err := k.resourceFor(o); err != nil {
					t.Error(err)
					continue
				}
				if err := k.get(ctx, o); err != nil {
					t.Errorf("%s not stored: %v", objectKey(o), err)
				}
			}
			t.Run("rbac", func(t *testing.T) { checkServiceAccounts(ctx, t, srv, k, tc.namespace, objs) })
		})
	}
}

// checkServiceAccounts checks what each ServiceAccount of the release may
// do: with impersonation (SelfSubjectAccessReview as the account), and for
// the calls that can be made on objects here, with the account's own token.
func checkServiceAccounts(ctx context.Context, t *testing.T, srv *kubeapi.Server, k *kubeClients, namespace string, objs []*unstructured.Unstructured) {
	accounts := 0
	for _, o := range objs {
		if o.GetKind() != "ServiceAccount" {
			continue
		}
		accounts++
		sa := o.GetName()
		dep := deploymentOf(t, objs, o.GetNamespace(), sa)
		if dep == nil {
			t.Errorf("ServiceAccount %s: no Deployment runs as it", sa)
			continue
		}
		t.Run(sa, func(t *testing.T) {
			calls := serviceCalls(t, dep, objs)
			t.Logf("%s makes %d calls: %s", sa, len(calls), joinCalls(calls))
			as := clientsetFor(t, srv.AsServiceAccount(o.GetNamespace(), sa))
			// RBAC follows new bindings within moments.
			deadline := time.Now().Add(10 * time.Second)
			for _, c := range calls {
				for {
					ok, reason, err := review(ctx, as, c)
					if err != nil {
						t.Fatalf("review %s: %v", c, err)
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s may not %s (%s); the service makes this call", sa, c, reason)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			for _, c := range excessCalls(namespace, calls) {
				ok, _, err := review(ctx, as, c)
				if err != nil {
					t.Fatalf("review %s: %v", c, err)
				}
				if ok {
					t.Errorf("%s may %s: more than the service needs", sa, c)
				}
			}
			tokenCfg, err := srv.ServiceAccountConfig(ctx, o.GetNamespace(), sa)
			if err != nil {
				t.Fatal(err)
			}
			exerciseCalls(ctx, t, tokenCfg, k.cs, calls)
		})
	}
	if accounts == 0 {
		t.Error("the chart renders no ServiceAccount")
	}
}

// apiCall is one request a service account makes: on a resource, or (Path
// set) on a non-resource URL. Namespace "" is every namespace.
type apiCall struct {
	Namespace, Verb, Group, Resource, Subresource, Name string
	Path                                                string
}

func joinCalls(calls []apiCall) string {
	if len(calls) == 0 {
		return "none"
	}
	s := make([]string, len(calls))
	for i, c := range calls {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

func (c apiCall) String() string {
	if c.Path != "" {
		return c.Verb + " " + c.Path
	}
	r := c.Resource
	if c.Group != "" {
		r += "." + c.Group
	}
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	if c.Name != "" {
		r += " " + c.Name
	}
	ns := c.Namespace
	if ns == "" {
		ns = "*"
	}
	return fmt.Sprintf("%s %s in %s", c.Verb, r, ns)
}

// serviceCalls lists the Kubernetes API calls of the service that dep runs,
// from its flags as the chart sets them (the collector's
// services/collector/internal/kubediscovery and inferencepool, the
// autoscaler's internal/actuator/kube and internal/kubeva). Services that do
// not talk to the API make none.
func serviceCalls(t *testing.T, dep *appsv1.Deployment, objs []*unstructured.Unstructured) []apiCall {
	t.Helper()
	c := dep.Spec.Template.Spec.Containers[0]
	args := c.Args
	release := dep.Namespace
	var calls []apiCall
	switch component := dep.Labels["app.kubernetes.io/component"]; component {
	case "collector":
		pool, poolMode := flagValue(args, "inference-pool")
		if d, _ := flagValue(args, "discovery"); d != "kubernetes" && !poolMode {
			return nil
		}
		ns, ok := flagValue(args, "discovery-namespace")
		if !ok || ns == "" {
			ns = release // the pod's own (POD_NAMESPACE)
		}
		// A shared informer of the namespace's pods.
		calls = append(calls, apiCall{Namespace: ns, Verb: "list", Resource: "pods"}, apiCall{Namespace: ns, Verb: "watch", Resource: "pods"})
		if poolMode {
			// A dynamic informer of the one InferencePool (a field
			// selector on its name).
			for _, verb := range []string{"list", "watch"} {
				calls = append(calls, apiCall{Namespace: ns, Verb: verb, Group: "inference.networking.k8s.io", Resource: "inferencepools", Name: pool})
			}
		}
	case "autoscaler":
		if a, ok := flagValue(args, "actuator"); !ok || a == "kubernetes" { // the flag's default
			// Discovery maps a target's kind to its resource.
			calls = append(calls, apiCall{Verb: "get", Path: "/api"}, apiCall{Verb: "get", Path: "/apis"})
			for _, va := range variantAutoscalings(t, objs) {
				calls = append(calls, scaleCalls(t, va)...)
			}
		}
		if src, _ := flagValue(args, "va-source"); src == "kubernetes" || src == "both" {
			ns, ok := flagValue(args, "va-namespace")
			switch {
			case ns == "*":
				ns = ""
			case !ok || ns == "":
				ns = release
			}
			const group, res = "llmd.ai", "variantautoscalings"
			calls = append(calls,
				apiCall{Namespace: ns, Verb: "list", Group: group, Resource: res},
				apiCall{Namespace: ns, Verb: "watch", Group: group, Resource: res},
				apiCall{Namespace: ns, Verb: "get", Group: group, Resource: res},
				apiCall{Namespace: ns, Verb: "update", Group: group, Resource: res, Subresource: "status"})
		}
	case "gateway", "picker", "indexer", "responses":
	default:
		t.Errorf("Deployment %s: unknown component %q: say which API calls it makes", dep.Name, component)
	}
	return calls
}

// scaleTargets maps a scale target's kind to its resource.
var scaleTargets = map[string]schema.GroupResource{
	"Deployment":      {Group: "apps", Resource: "deployments"},
	"StatefulSet":     {Group: "apps", Resource: "statefulsets"},
	"LeaderWorkerSet": {Group: "leaderworkerset.x-k8s.io", Resource: "leaderworkersets"},
}

// scaleCalls are the kubernetes actuator's calls for one variant: get and
// update the target's scale subresource, and read a Deployment's or
// StatefulSet's ready replicas.
func scaleCalls(t *testing.T, va *unstructured.Unstructured) []apiCall {
	t.Helper()
	kind, _, _ := unstructured.NestedString(va.Object, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(va.Object, "spec", "scaleTargetRef", "name")
	gr, ok := scaleTargets[kind]
	if !ok {
		t.Errorf("VariantAutoscaling %s: scale target kind %q: add its resource to scaleTargets", va.GetName(), kind)
		return nil
	}
	ns := va.GetNamespace()
	calls := []apiCall{
		{Namespace: ns, Verb: "get", Group: gr.Group, Resource: gr.Resource, Subresource: "scale", Name: name},
		{Namespace: ns, Verb: "update", Group: gr.Group, Resource: gr.Resource, Subresource: "scale", Name: name},
	}
	if gr.Group == "apps" {
		calls = append(calls, apiCall{Namespace: ns, Verb: "get", Group: gr.Group, Resource: gr.Resource, Name: name})
	}
	return calls
}

// excessCalls are calls no Hermod service makes, in the release's namespace
// and in every namespace the service's calls name, and across the cluster:
// reading Secrets, changing or deleting workloads, running code in pods,
// granting itself more, acting as someone else. Each call the service
// makes is also refused in a namespace no value names (its grants are
// namespaced, unless the call is cluster-wide).
func excessCalls(release string, calls []apiCall) []apiCall {
	namespaces := []string{release}
	for _, c := range calls {
		if c.Path == "" && c.Namespace != "" && !slices.Contains(namespaces, c.Namespace) {
			namespaces = append(namespaces, c.Namespace)
		}
	}
	var out []apiCall
	for _, ns := range namespaces {
		out = append(out,
			apiCall{Namespace: ns, Verb: "get", Resource: "secrets"},
			apiCall{Namespace: ns, Verb: "list", Resource: "secrets"},
			apiCall{Namespace: ns, Verb: "get", Resource: "configmaps"},
			apiCall{Namespace: ns, Verb: "create", Resource: "pods"},
			apiCall{Namespace: ns, Verb: "delete", Resource: "pods"},
			apiCall{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec"},
			apiCall{Namespace: ns, Verb: "update", Group: "apps", Resource: "deployments"},
			apiCall{Namespace: ns, Verb: "patch", Group: "apps", Resource: "deployments"},
			apiCall{Namespace: ns, Verb: "delete", Group: "apps", Resource: "deployments"},
			apiCall{Namespace: ns, Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
			apiCall{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
		)
	}
	out = append(out,
		apiCall{Verb: "list", Resource: "secrets"},
		apiCall{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		apiCall{Verb: "impersonate", Resource: "users"},
	)
	for _, c := range calls {
		if c.Path == "" && c.Namespace != "" {
			c.Namespace = "hermod-e2e-elsewhere"
			out = append(out, c)
		}
	}
	return out
}

// review asks the server, as the impersonated account, whether it may make c.
func review(ctx context.Context, as *kubernetes.Clientset, c apiCall) (bool, string, error) {
	spec := authorizationv1.SelfSubjectAccessReviewSpec{}
	if c.Path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: c.Path, Verb: c.Verb}
	} else {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: c.Namespace, Verb: c.Verb, Group: c.Group, Resource: c.Resource, Subresource: c.Subresource, Name: c.Name,
		}
	}
	r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return r.Status.Allowed, r.Status.Reason + r.Status.EvaluationError, nil
}

// exerciseCalls makes the calls that work without controllers with the
// account's own token: listing pods, InferencePools and
// VariantAutoscalings, and scaling a Deployment (created here by the admin,
// as the operator's model server would be); and checks that deleting a pod
// and writing the Deployment itself are refused.
func exerciseCalls(ctx context.Context, t *testing.T, tokenCfg *rest.Config, admin *kubernetes.Clientset, calls []apiCall) {
	t.Helper()
	token := clientsetFor(t, tokenCfg)
	dyn, err := dynamic.NewForConfig(tokenCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		switch {
		case c.Verb == "list" && c.Group != "" && c.Subresource == "" && (c.Resource == "inferencepools" || c.Resource == "variantautoscalings"):
			gvr := schema.GroupVersionResource{Group: c.Group, Version: "v1", Resource: c.Resource}
			if c.Group == "llmd.ai" {
				gvr.Version = "v1alpha1"
			}
			opts := metav1.ListOptions{}
			if c.Name != "" {
				opts.FieldSelector = "metadata.name=" + c.Name
			}
			if _, err := dyn.Resource(gvr).Namespace(c.Namespace).List(ctx, opts); err != nil {
				t.Errorf("with its token: %s: %v", c, err)
			}
		case c.Verb == "list" && c.Resource == "pods" && c.Group == "":
			if _, err := token.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("with its token: list pods in %s: %v", c.Namespace, err)
			}
			if err := token.CoreV1().Pods(c.Namespace).Delete(ctx, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("with its token: delete a pod in %s: %v, want Forbidden", c.Namespace, err)
			}
		case c.Verb == "update" && c.Group == "apps" && c.Resource == "deployments" && c.Subresource == "scale":
			scaleDeployment(ctx, t, token, admin, c.Namespace, c.Name)
		}
	}
}

// scaleDeployment creates the Deployment (one replica) and scales it to 3
// through the scale subresource with the token, as the actuator does.
func scaleDeployment(ctx context.Context, t *testing.T, token, admin *kubernetes.Clientset, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest"}}},
			},
		},
	}
	if _, err := admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sc, err := token.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("with its token: get the scale of %s/%s: %v", ns, name, err)
	}
	sc.Spec.Replicas = 3
	if _, err := token.AppsV1().Deployments(ns).UpdateScale(ctx, name, &autoscalingv1.Scale{ObjectMeta: sc.ObjectMeta, Spec: sc.Spec}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("with its token: update the scale of %s/%s: %v", ns, name, err)
	}
	got, err := admin.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 {
		t.Errorf("%s/%s has %d replicas after the scale update, want 3", ns, name, *got.Spec.Replicas)
	}
	got.Spec.Replicas = ptr(int32(5))
	if _, err := token.AppsV1().Deployments(ns).Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("with its token: update the Deployment %s/%s itself: %v, want Forbidden", ns, name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// flagValue is the value of --name=value or --name value in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"+name+"="):
			return strings.TrimPrefix(a, "--"+name+"="), true
		case a == "--"+name && i+1 < len(args):
			return args[i+1], true
		}
	}
	return "", false
}

// deploymentOf is the Deployment of namespace that runs as the
// ServiceAccount sa.
func deploymentOf(t *testing.T, objs []*unstructured.Unstructured, namespace, sa string) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetNamespace() != namespace {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatalf("%s: %v", objectKey(o), err)
		}
		if d.Spec.Template.Spec.ServiceAccountName == sa {
			return &d
		}
	}
	return nil
}

// variantAutoscalings are the VariantAutoscaling objects of the
// autoscaler's --config file, read from the ConfigMap mounted there.
func variantAutoscalings(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetLabels()["app.kubernetes.io/component"] != "autoscaler" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatalf("%s: %v", objectKey(o), err)
		}
		file, ok := flagValue(d.Spec.Template.Spec.Containers[0].Args, "config")
		if !ok {
			continue
		}
		data := mountedFile(t, objs, &d, file)
		for _, doc := range decodeObjects(t, []byte(data)) {
			if doc.GetKind() == "VariantAutoscaling" {
				out = append(out, doc)
			}
		}
	}
	return out
}

// mountedFile is the content of file in the Deployment's first container,
// from the ConfigMap volume mounted above it.
func mountedFile(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment, file string) string {
	t.Helper()
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if path.Dir(file) != path.Clean(m.MountPath) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, o := range objs {
				if o.GetKind() == "ConfigMap" && o.GetNamespace() == d.Namespace && o.GetName() == v.ConfigMap.Name {
					data, _, _ := unstructured.NestedStringMap(o.Object, "data")
					if s, ok := data[path.Base(file)]; ok {
						return s
					}
				}
			}
		}
	}
	t.Fatalf("Deployment %s: no ConfigMap holds %s", d.Name, file)
	return ""
}

// kubeClients are the admin's clients and a RESTMapper from discovery.
type kubeClients struct {
	cs     *kubernetes.Clientset
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu       sync.Mutex
	warnings []string // the server's warnings of the last request
}

func newKubeClients(t *testing.T, cfg *rest.Config) *kubeClients {
	t.Helper()
	k := &kubeClients{}
	cfg.WarningHandler = k
	k.cs = clientsetFor(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.dyn = dyn
	k.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(k.cs.Discovery()))
	return k
}

// HandleWarningHeader records a warning of the server (rest.WarningHandler).
func (k *kubeClients) HandleWarningHeader(_ int, _, text string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.warnings = append(k.warnings, text)
}

func (k *kubeClients) takeWarnings() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.warnings
	k.warnings = nil
	return w
}

func clientsetFor(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// resourceFor is the client of o's resource (in o's namespace when the
// resource is namespaced).
func (k *kubeClients) resourceFor(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", objectKey(o), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return k.dyn.Resource(m.Resource), nil
}

// dryRunStrict creates o in a server-side dry run with strict field
// validation: the API's validation, admission and CRD schemas all apply,
// an unknown or duplicated field is an error, and so is any warning.
func (k *kubeClients) dryRunStrict(ctx context.Context, o *unstructured.Unstructured) error {
	res, err := k.resourceFor(o)
	if err != nil {
		return err
	}
	k.takeWarnings()
	_, err = res.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		return err
	}
	if w := k.takeWarnings(); len(w) > 0 {
		return fmt.Errorf("warnings: %s", strings.Join(w, "; "))
	}
	return nil
}

func (k *kubeClients) get(ctx context.Context, o *unstructured.Unstructured) error {
	res, err := k.resourceFor(o)
	if err != nil {
		return err
	}
	_, err = res.Get(ctx, o.GetName(), metav1.GetOptions{})
	return err
}

// installCRDs creates the CRDs of dir and waits until the API serves them.
func installCRDs(ctx context.Context, t *testing.T, k *kubeClients, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	crds := k.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, data) {
			if _, err := crds.Create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %v", f, err)
			}
			names = append(names, o.GetName())
		}
	}
	for _, name := range names {
		deadline := time.Now().Add(30 * time.Second)
		for !crdEstablished(ctx, crds, name) {
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	k.mapper.Reset()
}

func crdEstablished(ctx context.Context, crds dynamic.NamespaceableResourceInterface, name string) bool {
	o, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// createNamespaces creates the release's namespace and every other one an
// object names (the models' namespaces, monitoring, ...), as an operator
// would before installing.
func createNamespaces(ctx context.Context, t *testing.T, k *kubeClients, release string, objs []*unstructured.Unstructured) {
	t.Helper()
	names := []string{release}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(names, ns) {
			names = append(names, ns)
		}
	}
	for _, ns := range names {
		_, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// decodeObjects decodes a YAML stream of objects, skipping empty documents.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode objects: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

// helmBinary is bin/helm ($HELM overrides). Outside make, a missing one
// skips the test; make's test targets build it first.
func helmBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HELM")
	if p == "" {
		p = filepath.Join("..", "bin", "helm")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		msg := fmt.Sprintf("helm is missing at %s (`make tools` builds it; $HELM overrides the path)", p)
		if os.Getenv("MAKELEVEL") == "" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// runHelm runs helm (against kubeconfig, when given) with a configuration
// and cache of its own, and returns its standard output.
// helmEnv is helm's environment with homes of the test's own.
func helmEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
}

// uninstallRelease removes the chart's release from namespace (its
// objects, cluster-scoped ones too), saying so when it cannot; it does not
// stop the test, since it runs as the test unwinds.
func uninstallRelease(t *testing.T, helm, kubeconfig, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, "uninstall", chartRelease, "-n", namespace, "--wait", "--timeout", "1m", "--kubeconfig", kubeconfig)
	cmd.Env = helmEnv(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("helm uninstall %s -n %s: %v\n%s", chartRelease, namespace, err, out)
	}
}

func runHelm(t *testing.T, helm, kubeconfig string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = helmEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
