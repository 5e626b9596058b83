package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/hermod/hermod/libs/kube/kubetest"
)

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name, contextNS, wantNS string
	}{
		{"context namespace", "inference", "inference"},
		{"no context namespace", "", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ns, err := Load(kubetest.WriteKubeconfig(t, "https://127.0.0.1:6443", "t", tc.contextNS), "hermod-test")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != "https://127.0.0.1:6443" || cfg.UserAgent != "hermod-test" || cfg.BearerToken != "t" || ns != tc.wantNS {
				t.Fatalf("Load = %s %q, namespace %q; want the context's cluster, hermod-test, namespace %q", cfg.Host, cfg.UserAgent, ns, tc.wantNS)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if _, _, err := Load(missing, "hermod-test"); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing kubeconfig: %v; want an error naming it", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, _, err := Load("", "hermod-test")
	if !errors.Is(err, rest.ErrNotInCluster) || !strings.Contains(err.Error(), "in-cluster") {
		t.Fatalf("no kubeconfig outside a cluster: %v; want rest.ErrNotInCluster", err)
	}
}

func TestInClusterNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "models")
	if ns := inClusterNamespace(); ns != "models" {
		t.Fatalf("inClusterNamespace() = %q with POD_NAMESPACE=models", ns)
	}
	t.Setenv("POD_NAMESPACE", "")
	want := ""
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		want = strings.TrimSpace(string(b)) // run in a pod
	}
	if ns := inClusterNamespace(); ns != want {
		t.Fatalf("inClusterNamespace() = %q without POD_NAMESPACE; want %q", ns, want)
	}
}
