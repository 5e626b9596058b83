package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hermod/hermod/testkit/childproc"
	"github.com/hermod/hermod/testkit/kubeapi"
)

// What the tests that run Hermod's Kubernetes-facing services against the
// real kube-apiserver share (kube_discovery_e2e_test.go,
// kube_autoscaler_e2e_test.go): a namespace of their own, the chart's
// ServiceAccount and RBAC of a service with a token of that account, and
// the service run as a process on a devstack's NATS and etcd.

// kubeNamespace creates a namespace of the test's own on the shared server,
// with its "default" ServiceAccount (in a cluster the controller-manager
// makes it; the ServiceAccount admission plugin refuses pods without it).
// No namespace controller runs, so a namespace is never deleted: each run
// gets a new name.
func kubeNamespace(ctx context.Context, t *testing.T, k *kubeClients, prefix string) string {
	t.Helper()
	ns := prefix + "-" + strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36*36), 36)
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// renderChart renders the chart as release chartRelease in namespace with
// the --set values.
func renderChart(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", chartRelease, chartPath, "-n", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeObjects(t, runHelm(t, helmBinary(t), "", args...))
}

// renderedObject is the object of kind in a render (nil when none).
func renderedObject(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

// rbacKinds are the kinds of the chart's access objects.
var rbacKinds = []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

// chartServiceAccount creates the ServiceAccount, Roles and bindings the
// render gives component, and returns a kubeconfig (namespace: namespace)
// that authenticates as that ServiceAccount with a token of the
// TokenRequest API, as the service's pod would: the service then makes its
// real calls with exactly the chart's grants. It returns once RBAC allows
// every call in wait (the authorizer follows new bindings within moments).
func chartServiceAccount(ctx context.Context, t *testing.T, srv *kubeapi.Server, k *kubeClients, namespace, component string,
	objs []*unstructured.Unstructured, wait ...apiCall,
) string {
	t.Helper()
	account := ""
	for _, o := range objs {
		if !slices.Contains(rbacKinds, o.GetKind()) || o.GetLabels()["app.kubernetes.io/component"] != component {
			continue
		}
		res, err := k.resourceFor(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", objectKey(o), err)
		}
		if o.GetKind() == "ServiceAccount" {
			account = o.GetName()
		}
	}
	if account == "" {
		t.Fatalf("the chart renders no ServiceAccount for the %s", component)
	}
	cfg, err := srv.ServiceAccountConfig(ctx, namespace, account)
	if err != nil {
		t.Fatal(err)
	}
	as := clientsetFor(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range wait {
		for {
			ok, reason, err := review(ctx, as, c)
			if err != nil {
				t.Fatalf("review %s: %v", c, err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the chart's RBAC does not let %s %s (%s)", account, c, reason)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return writeKubeconfig(t, cfg, namespace)
}

// writeKubeconfig writes cfg (a bearer token, the server's CA) as a
// kubeconfig file whose context's namespace is namespace.
func writeKubeconfig(t *testing.T, cfg *rest.Config, namespace string) string {
	t.Helper()
	const name = "hermod-e2e"
	c := clientcmdapi.NewConfig()
	c.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: namespace}
	c.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceProc is a Hermod service a test runs on a devstack's NATS and
// etcd.
type serviceProc struct {
	t      *testing.T
	name   string
	ops    string // host:port of /metrics, /health, /ready
	cmd    *exec.Cmd
	logs   *childproc.Output
	done   chan struct{} // closed when the process has exited
	exitEr error
}

// startService runs binary as replica name with args, the stack's NATS and
// etcd under the identity of the same name (under --tls: its certificate)
// and an ops listener of its own, and waits until /ready answers. When the
// test ends it is stopped by SIGINT and must exit cleanly (unless it was
// killed); its log's tail is logged when the test failed.
func startService(t *testing.T, s *devstack, binary, identity, name string, args ...string) *serviceProc {
	t.Helper()
	ops := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1))
	all := slices.Concat([]string{"--replica", name, "--metrics-listen", ops,
		"--etcd-endpoints", strings.Join(s.state.EtcdEndpoints, ","), "--nats-url", s.state.NATSURL}, s.identityArgs(identity), args)
	p := &serviceProc{t: t, name: name, ops: ops, cmd: exec.Command(bin(binary), all...), logs: &childproc.Output{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exitEr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	deadline := time.Now().Add(30 * time.Second)
	for !p.ready() {
		select {
		case <-p.done:
			t.Fatalf("%s %s exited while starting: %v\n%s", binary, name, p.exitEr, tail(p.logs.String(), 40))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s not ready after 30s:\n%s", binary, name, tail(p.logs.String(), 40))
		}
	}
	return p
}

// identityArgs are the stack's etcd and NATS security flags (none without
// --tls) with identity's certificate in place of hermodctl's.
func (s *devstack) identityArgs(identity string) []string {
	args := s.securityArgs()
	if s.state.TLS == nil {
		return args
	}
	f, ok := s.state.TLS.Identities[identity]
	if !ok {
		return args
	}
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--etcd-cert-file", "--nats-cert-file":
			args[i+1] = f.CertFile
		case "--etcd-key-file", "--nats-key-file":
			args[i+1] = f.KeyFile
		}
	}
	return args
}

func (p *serviceProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *serviceProc) ready() bool {
	resp, err := http.Get("http://" + p.ops + "/ready")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill kills the process (SIGKILL: no resignation, no cleanup) and waits
// for it to exit.
func (p *serviceProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop stops the process by SIGINT, as a pod's termination would, and
// checks that it exits cleanly.
func (p *serviceProc) stop() {
	if p.t.Failed() {
		p.t.Logf("%s log (tail):\n%s", p.name, tail(p.logs.String(), 40))
	}
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		if p.exitEr != nil {
			p.t.Errorf("%s did not stop cleanly: %v\n%s", p.name, p.exitEr, tail(p.logs.String(), 30))
		}
	case <-time.After(20 * time.Second):
		p.kill()
		p.t.Errorf("%s did not stop within 20s of SIGINT", p.name)
	}
}

// gauge is the value of an unlabelled metric on the ops listener.
func (p *serviceProc) gauge(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.ops+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", p.name, name)
}
