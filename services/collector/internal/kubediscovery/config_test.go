package kubediscovery

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/hermod/hermod/libs/kube/kubetest"
)

func TestValidate(t *testing.T) {
	valid := Config{Pool: "p", Namespace: "models", Selector: "app=vllm", TargetPort: 8000}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		fields []string
	}{
		{"valid", func(*Config) {}, nil},
		{"set-based selector", func(c *Config) { c.Selector = "app=vllm,llm-d.ai/role in (decode,both),!canary" }, nil},
		{"empty pool", func(c *Config) { c.Pool = "" }, []string{"Pool"}},
		{"empty namespace", func(c *Config) { c.Namespace = "" }, []string{"Namespace"}},
		{"invalid namespace", func(c *Config) { c.Namespace = "Models_1" }, []string{"Namespace"}},
		{"empty selector", func(c *Config) { c.Selector = " " }, []string{"Selector"}},
		{"invalid selector", func(c *Config) { c.Selector = "app in (a" }, []string{"Selector"}},
		{"port 0", func(c *Config) { c.TargetPort = 0 }, []string{"TargetPort"}},
		{"port 65536", func(c *Config) { c.TargetPort = 65536 }, []string{"TargetPort"}},
		{"negative resync", func(c *Config) { c.Resync = -time.Second }, []string{"Resync"}},
		{"short lease", func(c *Config) { c.LeaseTTL = time.Millisecond }, []string{"LeaseTTL"}},
		{"several", func(c *Config) { c.Selector, c.TargetPort = "a in", -1 }, []string{"Selector", "TargetPort"}},
		{"inference pool", func(c *Config) { c.InferencePool, c.Selector, c.TargetPort = "llama", "", 0 }, nil},
		{"inference pool with a dotted name", func(c *Config) { c.InferencePool, c.Selector, c.TargetPort = "llama.v1", "", 0 }, nil},
		{"inference pool and a selector", func(c *Config) { c.InferencePool, c.TargetPort = "llama", 0 }, []string{"Selector"}},
		{"inference pool and a port", func(c *Config) { c.InferencePool, c.Selector = "llama", "" }, []string{"TargetPort"}},
		{"invalid inference pool", func(c *Config) { c.InferencePool, c.Selector, c.TargetPort = "Llama_1", "", 0 }, []string{"InferencePool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.change(&c)
			err := c.Validate()
			var fields []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var fe *FieldError
					if !errors.As(e, &fe) {
						t.Fatalf("%v is not a FieldError", e)
					}
					fields = append(fields, fe.Field)
				}
			}
			if !slices.Equal(fields, tc.fields) {
				t.Fatalf("Validate() = %v; want errors about %v", err, tc.fields)
			}
		})
	}
}

func TestStartChecksConfig(t *testing.T) {
	valid := Config{Pool: "p", Namespace: "models", Selector: "app=vllm", TargetPort: 8000, ID: "r"}
	if _, err := Start(t.Context(), valid); err == nil || !strings.Contains(err.Error(), "Kubernetes client") {
		t.Fatalf("Start without clients: %v", err)
	}
	pool := Config{Pool: "p", Namespace: "models", InferencePool: "p", ID: "r", Kube: fake.NewClientset()}
	if _, err := Start(t.Context(), pool); err == nil || !strings.Contains(err.Error(), "dynamic client") {
		t.Fatalf("Start with an InferencePool and no dynamic client: %v", err)
	}
	c := valid
	c.Selector = ""
	var fe *FieldError
	if _, err := Start(t.Context(), c); !errors.As(err, &fe) || fe.Field != "Selector" {
		t.Fatalf("Start with an empty selector: %v", err)
	}
}

func TestNewClientFromKubeconfig(t *testing.T) {
	path := kubetest.WriteKubeconfig(t, "https://127.0.0.1:6443", "t", "inference")
	kube, ns, err := NewClient(path)
	if err != nil {
		t.Fatal(err)
	}
	if kube == nil || ns != "inference" {
		t.Fatalf("NewClient = %v, %q; want a client and the context's namespace", kube, ns)
	}
	if _, _, err := NewClient(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("NewClient of a missing file: %v", err)
	}
	// Outside a cluster, no kubeconfig is an error that says so.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, _, err := NewClient(""); err == nil || !strings.Contains(err.Error(), "in-cluster") {
		t.Fatalf("NewClient without kubeconfig outside a cluster: %v", err)
	}
}
