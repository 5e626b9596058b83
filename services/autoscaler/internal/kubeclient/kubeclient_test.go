package kubeclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: inference}
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, ns, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.UserAgent != UserAgent || ns != "inference" {
		t.Fatalf("Load = %s %q, namespace %q", cfg.Host, cfg.UserAgent, ns)
	}
	missing := filepath.Join(dir, "missing")
	if _, _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing kubeconfig: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, _, err := Load(""); !errors.Is(err, rest.ErrNotInCluster) {
		t.Fatalf("no kubeconfig outside a cluster: %v", err)
	}
}
