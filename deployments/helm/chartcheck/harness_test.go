package chartcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The release every render uses: release "hermod" in namespace "hermod",
// so that object names are hermod-<service> (the names
// deployments/envoy/envoy.yaml assumes).
const (
	release   = "hermod"
	namespace = "hermod"
)

// The services, their binaries and the chart's paths.
var services = []string{"gateway", "picker", "indexer", "collector", "responses", "autoscaler"}

func binaryOf(service string) string { return "hermod-" + service }

// repo is what every test needs: the repository root and the helm binary.
type repo struct {
	root  string // the directory holding go.work
	helm  string // the helm binary
	chart string // deployments/helm/hermod
}

func (r *repo) path(elem ...string) string {
	return filepath.Join(append([]string{r.root}, elem...)...)
}

var findRepo = sync.OnceValues(func() (*repo, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("no go.work above the test's directory")
		}
		dir = parent
	}
	r := &repo{root: dir, chart: filepath.Join(dir, "deployments", "helm", "hermod")}
	r.helm = os.Getenv("HELM")
	if r.helm == "" {
		r.helm = filepath.Join(dir, "bin", "helm")
	}
	if fi, err := os.Stat(r.helm); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return r, fmt.Errorf("helm not found at %s ($HELM, else bin/helm; `make deps` builds it)", r.helm)
	}
	return r, nil
})

// needRepo returns the repository, skipping the test under -short when
// helm is missing and failing it otherwise.
func needRepo(t *testing.T) *repo {
	t.Helper()
	r, err := findRepo()
	if err != nil {
		if r != nil && testing.Short() {
			t.Skipf("skipping under -short: %v", err)
		}
		t.Fatal(err)
	}
	return r
}

// runHelm runs helm with args and returns its standard output.
func (r *repo) runHelm(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.helm, args...)
	cmd.Dir = r.root
	// no repository configuration or cache of the user's: helm stays offline
	home := os.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "chartcheck-helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "chartcheck-helm-config"),
		"HELM_DATA_HOME="+filepath.Join(home, "chartcheck-helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// object is one rendered Kubernetes object, decoded strictly.
type object struct {
	Source string // the template it came from (helm's "# Source:" line)
	Raw    []byte
	GVK    schema.GroupVersionKind
	Meta   metav1.Object
	Obj    any // a typed object of client-go's scheme, or *serviceMonitor
}

func (o *object) key() string {
	return o.GVK.Kind + "/" + o.Meta.GetNamespace() + "/" + o.Meta.GetName()
}

func (o *object) component() string {
	return o.Meta.GetLabels()["app.kubernetes.io/component"]
}

// rendered is one `helm template` of the chart.
type rendered struct {
	args    []string
	objects []*object
}

// byKind returns the objects of one kind.
func (r *rendered) byKind(kind string) []*object {
	var out []*object
	for _, o := range r.objects {
		if o.GVK.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// get returns the object of a kind and name, or nil.
func (r *rendered) get(kind, ns, name string) *object {
	for _, o := range r.objects {
		if o.GVK.Kind == kind && o.Meta.GetName() == name && o.Meta.GetNamespace() == ns {
			return o
		}
	}
	return nil
}

// keys returns the set of the objects' kind/namespace/name.
func (r *rendered) keys() map[string]bool {
	m := map[string]bool{}
	for _, o := range r.objects {
		m[o.key()] = true
	}
	return m
}

// render runs helm template with extra args (values files, --set) and
// decodes every object. Renders with the same args are shared between tests.
func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	r := needRepo(t)
	key := strings.Join(args, "\x00")
	v, _ := renders.LoadOrStore(key, &renderOnce{})
	ro := v.(*renderOnce)
	ro.once.Do(func() { ro.out, ro.err = r.template(args...) })
	if ro.err != nil {
		t.Fatal(ro.err)
	}
	return ro.out
}

type renderOnce struct {
	once sync.Once
	out  *rendered
	err  error
}

var renders sync.Map

func (r *repo) template(args ...string) (*rendered, error) {
	full := append([]string{"template", release, r.chart, "--namespace", namespace}, args...)
	out, err := r.runHelm(full...)
	if err != nil {
		return nil, err
	}
	objs, err := decodeAll(out)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", strings.Join(args, " "), err)
	}
	return &rendered{args: args, objects: objs}, nil
}

// strictCodec decodes YAML into client-go's scheme types, failing on
// unknown and duplicate fields and on wrong types.
var strictCodec = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// decodeAll splits helm's multi-document output and decodes each object.
func decodeAll(out []byte) ([]*object, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []*object
	var errs []error
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		source, empty := docSource(doc)
		if empty {
			continue
		}
		if source == "" {
			// helm writes one before every object; none means a template
			// emitted an empty document whose separator swallowed it
			errs = append(errs, fmt.Errorf("an object without helm's \"# Source:\" line:\n%s", doc))
			continue
		}
		o, err := decode(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		o.Source = source
		objs = append(objs, o)
	}
	return objs, errors.Join(errs...)
}

// docSource returns a document's "# Source:" and whether it holds only
// comments and blank lines.
func docSource(doc []byte) (source string, empty bool) {
	empty = true
	for line := range strings.SplitSeq(string(doc), "\n") {
		l := strings.TrimSpace(line)
		if s, ok := strings.CutPrefix(l, "# Source: "); ok && source == "" {
			source = s
		}
		if l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			empty = false
		}
	}
	return source, empty
}

// decode decodes one object: a kind of client-go's scheme strictly into
// its type, a ServiceMonitor strictly into the local struct; any other
// kind is an error.
func decode(doc []byte) (*object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("type meta: %w", err)
	}
	gvk := tm.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("no apiVersion or kind in\n%s", doc)
	}
	o := &object{Raw: doc, GVK: gvk}
	if scheme.Scheme.Recognizes(gvk) {
		obj, _, err := strictCodec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		o.Obj, o.Meta = obj, m
		return o, nil
	}
	switch gvk {
	case certificateGVK:
		var c certificate
		if err := yaml.UnmarshalStrict(doc, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		o.Obj, o.Meta = &c, &c.ObjectMeta
		return o, nil
	case serviceMonitorGVK:
		var sm serviceMonitor
		if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		o.Obj, o.Meta = &sm, &sm.ObjectMeta
		return o, nil
	case inferencePoolGVK:
		var p inferencePool
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		o.Obj, o.Meta = &p, &p.ObjectMeta
		return o, nil
	case httpRouteGVK:
		var hr httpRoute
		if err := yaml.UnmarshalStrict(doc, &hr); err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		o.Obj, o.Meta = &hr, &hr.ObjectMeta
		return o, nil
	}
	return nil, fmt.Errorf("%s: a kind the checks do not know (not in client-go's scheme, no local type)", gvk)
}

// serviceMonitorGVK is the Prometheus Operator's ServiceMonitor.
var serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart may render; any other field fails the strict decode.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              serviceMonitorSpec `json:"spec"`
}

type serviceMonitorSpec struct {
	JobLabel          string               `json:"jobLabel,omitempty"`
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector *namespaceSelector   `json:"namespaceSelector,omitempty"`
	Endpoints         []monitorEndpoint    `json:"endpoints"`
}

type namespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

type monitorEndpoint struct {
	Port              string        `json:"port,omitempty"`
	Path              string        `json:"path,omitempty"`
	Scheme            string        `json:"scheme,omitempty"`
	Interval          string        `json:"interval,omitempty"`
	ScrapeTimeout     string        `json:"scrapeTimeout,omitempty"`
	HonorLabels       bool          `json:"honorLabels,omitempty"`
	Relabelings       []relabeling  `json:"relabelings,omitempty"`
	MetricRelabelings []relabeling  `json:"metricRelabelings,omitempty"`
	BearerTokenSecret *secretKeyRef `json:"bearerTokenSecret,omitempty"`
}

// secretKeyRef is a key of a Secret of the object's namespace.
type secretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// certificateGVK is cert-manager's Certificate.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// certificate is the part of cert-manager.io/v1 Certificate the chart may
// render; any other field fails the strict decode.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              certificateSpec `json:"spec"`
}

type certificateSpec struct {
	SecretName  string   `json:"secretName"`
	CommonName  string   `json:"commonName,omitempty"`
	DNSNames    []string `json:"dnsNames,omitempty"`
	URIs        []string `json:"uris,omitempty"`
	Usages      []string `json:"usages,omitempty"`
	Duration    string   `json:"duration,omitempty"`
	RenewBefore string   `json:"renewBefore,omitempty"`
	PrivateKey  *struct {
		Algorithm      string `json:"algorithm,omitempty"`
		Size           int    `json:"size,omitempty"`
		RotationPolicy string `json:"rotationPolicy,omitempty"`
	} `json:"privateKey,omitempty"`
	IssuerRef struct {
		Name  string `json:"name"`
		Kind  string `json:"kind,omitempty"`
		Group string `json:"group,omitempty"`
	} `json:"issuerRef"`
}

type relabeling struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// helpFlags returns the flags a binary's --help lists, or ok false when the
// binary is not built.
func helpFlags(t *testing.T, binary string) (flags map[string]bool, ok bool) {
	t.Helper()
	r := needRepo(t)
	v, _ := helps.LoadOrStore(binary, &helpOnce{})
	h := v.(*helpOnce)
	h.once.Do(func() { h.flags, h.ok, h.err = r.readHelp(binary) })
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h.flags, h.ok
}

type helpOnce struct {
	once  sync.Once
	flags map[string]bool
	ok    bool
	err   error
}

var helps sync.Map

func (r *repo) readHelp(binary string) (map[string]bool, bool, error) {
	path := r.path("bin", binary)
	if _, err := os.Stat(path); err != nil {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// --help exits non-zero with the flag package's usage; only the text matters
	out, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	flags := map[string]bool{}
	for line := range strings.SplitSeq(string(out), "\n") {
		// "  -name type" starts a flag; its description lines start with a tab
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ := strings.Cut(rest, " ")
			flags[strings.TrimSpace(name)] = true
		}
	}
	if len(flags) == 0 {
		return nil, false, fmt.Errorf("%s --help lists no flags:\n%s", path, out)
	}
	return flags, true, nil
}
