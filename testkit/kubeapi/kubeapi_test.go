package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var kube Shared

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closing{m})
}

// closing runs the tests, then closes the shared server.
type closing struct{ m *testing.M }

func (c closing) Run() int {
	code := c.m.Run()
	if err := kube.Close(); err != nil {
		_, _ = os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return code
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// The admin creates and reads objects, through Config and through the
// kubeconfig file; the server is the release the repository pins.
func TestAdmin(t *testing.T) {
	srv := kube.Get(t)
	c := ctx(t)
	admin := clientset(t, srv.Config())
	v, err := admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "37" {
		t.Errorf("server version %s (%s.%s), want 1.37", v.GitVersion, v.Major, v.Minor)
	}
	name := uniqueNamespace("admin-test")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := admin.CoreV1().Namespaces().Create(c, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: name}, Data: map[string]string{"k": "v"}}
	if _, err := admin.CoreV1().ConfigMaps(name).Create(c, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	got, err := clientset(t, fromFile).CoreV1().ConfigMaps(name).Get(c, "x", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("configmap through the kubeconfig: %v %v", got, err)
	}
	// The API server validates: a ConfigMap with an invalid name is refused.
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name", Namespace: name}}
	if _, err := admin.CoreV1().ConfigMaps(name).Create(c, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("invalid name: %v, want Invalid", err)
	}
}

// RBAC applies to a service account, impersonated or with its own token:
// nothing is allowed before a RoleBinding, exactly the Role's verbs after.
func TestServiceAccountRBAC(t *testing.T) {
	srv := kube.Get(t)
	c := ctx(t)
	admin := clientset(t, srv.Config())
	ns, sa := uniqueNamespace("rbac-test"), "reader"
	if _, err := admin.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenCfg, err := srv.ServiceAccountConfig(c, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*kubernetes.Clientset{
		"impersonated": clientset(t, srv.AsServiceAccount(ns, sa)),
		"token":        clientset(t, tokenCfg),
	}
	for name, cs := range clients {
		if _, err := cs.CoreV1().Pods(ns).List(c, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list pods before the binding: %v, want Forbidden", name, err)
		}
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(c, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(c, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, cs := range clients {
		// RBAC's cache follows the binding within moments.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := cs.CoreV1().Pods(ns).List(c, metav1.ListOptions{})
			if err == nil {
				break
			}
			if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				t.Fatalf("%s: list pods after the binding: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := cs.CoreV1().Pods(ns).Delete(c, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: delete pod: %v, want Forbidden", name, err)
		}
		if _, err := cs.CoreV1().Pods("default").List(c, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list pods of another namespace: %v, want Forbidden", name, err)
		}
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(c, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "watch", Resource: "pods",
			}},
		}, metav1.CreateOptions{})
		if err != nil || !review.Status.Allowed {
			t.Errorf("%s: self review of watch pods: %+v %v", name, review, err)
		}
	}
	// Whoever the token is, the server says so.
	who, err := clients["token"].AuthenticationV1().SelfSubjectReviews().Create(c, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := who.Status.UserInfo.Username; got != ServiceAccountUser(ns, sa) {
		t.Errorf("token user %q, want %q", got, ServiceAccountUser(ns, sa))
	}
}

// A missing binary is ErrNoBinary, which names the make target.
func TestMissingBinary(t *testing.T) {
	_, err := Run(t.Context(), Options{Binary: filepath.Join(t.TempDir(), "kube-apiserver")})
	if !errors.Is(err, ErrNoBinary) {
		t.Fatalf("Run: %v, want ErrNoBinary", err)
	}
}

// Close stops kube-apiserver and etcd and removes the files; a second
// Close does nothing.
func TestStartClose(t *testing.T) {
	srv := Start(t)
	kubeconfig := srv.Kubeconfig()
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubeconfig after Close: %v", err)
	}
	cfg := srv.Config()
	cfg.Timeout = 2 * time.Second
	if _, err := clientset(t, cfg).Discovery().ServerVersion(); err == nil {
		t.Error("the server still answers after Close")
	}
}

// runs counts the namespaces uniqueNamespace made: the API server lives as
// long as the test binary, so a test run again (-count) needs new names.
var runs atomic.Int64

// uniqueNamespace is prefix with a number no earlier run of this binary
// used.
func uniqueNamespace(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, runs.Add(1))
}
