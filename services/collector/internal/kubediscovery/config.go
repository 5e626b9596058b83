package kubediscovery

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kube"
	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// Defaults of Config.
const (
	DefaultResync         = registrysync.DefaultResync
	DefaultLeaseTTL       = registrysync.DefaultLeaseTTL
	DefaultRequestTimeout = registrysync.DefaultRequestTimeout
	DefaultMinBackoff     = registrysync.DefaultMinBackoff
	DefaultMaxBackoff     = registrysync.DefaultMaxBackoff
)

// ServicePrefix names a pool's discovery election: discovery-<pool>.
const ServicePrefix = "discovery-"

// userAgent is sent on the requests of a client built by NewClient.
const userAgent = "hermod-collector"

// Config configures a Source. The pods are picked either by Selector and
// TargetPort, or by an InferencePool whose selector and target ports are
// followed as they change.
type Config struct {
	// Pool is the pool whose registry the source writes. Required.
	Pool string
	// Namespace is the namespace whose pods are watched (and the
	// InferencePool's). Required.
	Namespace string
	// Selector is the label selector of the pods (labels.Parse syntax, e.g.
	// "app=vllm,llm-d.ai/role in (decode,both)"). Required without
	// InferencePool: an empty selector would pick every pod of the
	// namespace.
	Selector string
	// TargetPort is the port of the model servers' HTTP API (1..65535).
	// Required without InferencePool.
	TargetPort int
	// InferencePool, when set, names the InferencePool
	// (inference.networking.k8s.io/v1) of Namespace whose
	// spec.selector.matchLabels picks the pods and whose
	// spec.targetPorts are their endpoints' ports (several ports: one
	// endpoint per pod and port, the port's index its rank), as GIE's
	// endpoint picker does. Selector and TargetPort must then be unset.
	// While the InferencePool does not exist, no pod is selected.
	InferencePool string
	// Resync is the period of the informer's resync and of the leader's
	// whole-registry sync (DefaultResync when zero).
	Resync time.Duration

	// Kube is the Kubernetes client. Required.
	Kube kubernetes.Interface
	// Dynamic is the dynamic client that reads the InferencePool.
	// Required with InferencePool.
	Dynamic dynamic.Interface
	// Etcd is the etcd client of the registry. Required.
	Etcd *clientv3.Client
	// ID is this replica's candidate id in the election. Required.
	ID string
	// LeaseTTL is the TTL of the leadership and of the leader's entries
	// (DefaultLeaseTTL when zero; at least one second).
	LeaseTTL time.Duration
	// RequestTimeout bounds every etcd request (DefaultRequestTimeout when
	// zero).
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delays between retries of a
	// failed sync or campaign (DefaultMinBackoff, DefaultMaxBackoff when
	// zero).
	MinBackoff, MaxBackoff time.Duration
	// Registerer gets the source's metrics (none when nil); Close
	// unregisters them.
	Registerer prometheus.Registerer
	// Logger logs (slog.Default when nil).
	Logger *slog.Logger
}

// FieldError is a Config field with an invalid value. Callers map Field to
// the flag or setting that sets it.
type FieldError struct {
	// Field is the Config field's name: Namespace, Selector, TargetPort,
	// Resync, ...
	Field string
	// Err says what is wrong.
	Err error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("kubernetes discovery: %s: %v", e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks the fields that a user sets (Pool, Namespace, Selector,
// TargetPort, InferencePool, Resync); each failure is a *FieldError.
func (c Config) Validate() error {
	var errs []error
	if err := coord.ValidatePoolName(c.Pool); err != nil {
		errs = append(errs, &FieldError{Field: "Pool", Err: err})
	}
	if err := validateNamespace(c.Namespace); err != nil {
		errs = append(errs, &FieldError{Field: "Namespace", Err: err})
	}
	if c.InferencePool != "" {
		errs = append(errs, c.validatePoolMode()...)
	} else {
		if _, err := ParseSelector(c.Selector); err != nil {
			errs = append(errs, &FieldError{Field: "Selector", Err: err})
		}
		if c.TargetPort < 1 || c.TargetPort > 65535 {
			errs = append(errs, &FieldError{Field: "TargetPort", Err: fmt.Errorf("%d is not a port (1..65535)", c.TargetPort)})
		}
	}
	if c.Resync < 0 {
		errs = append(errs, &FieldError{Field: "Resync", Err: fmt.Errorf("%s is negative", c.Resync)})
	}
	if c.LeaseTTL != 0 && c.LeaseTTL < time.Second {
		errs = append(errs, &FieldError{Field: "LeaseTTL", Err: fmt.Errorf("%s is shorter than 1s", c.LeaseTTL)})
	}
	return errors.Join(errs...)
}

// validatePoolMode checks the fields of InferencePool mode.
func (c Config) validatePoolMode() []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(c.InferencePool); len(msgs) > 0 {
		errs = append(errs, &FieldError{Field: "InferencePool", Err: fmt.Errorf("%q is not an object name: %s", c.InferencePool, strings.Join(msgs, "; "))})
	}
	if c.Selector != "" {
		errs = append(errs, &FieldError{Field: "Selector", Err: fmt.Errorf("%q given with an InferencePool, whose selector picks the pods", c.Selector)})
	}
	if c.TargetPort != 0 {
		errs = append(errs, &FieldError{Field: "TargetPort", Err: fmt.Errorf("%d given with an InferencePool, whose targetPorts are the ports", c.TargetPort)})
	}
	return errs
}

func validateNamespace(ns string) error {
	if ns == "" {
		return errors.New("empty namespace")
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
	}
	return nil
}

// ParseSelector parses a label selector. It fails for an empty one, which
// would select every pod of the namespace.
func ParseSelector(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty label selector: one is required (an empty one would pick every pod of the namespace)")
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", s, err)
	}
	return sel, nil
}

// withDefaults returns c with the zero fields set, after checking it.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	switch {
	case c.Kube == nil:
		return c, errors.New("kubernetes discovery: no Kubernetes client")
	case c.InferencePool != "" && c.Dynamic == nil:
		return c, errors.New("kubernetes discovery: no dynamic client for the InferencePool")
	case c.Etcd == nil:
		return c, errors.New("kubernetes discovery: no etcd client")
	case c.ID == "":
		return c, errors.New("kubernetes discovery: empty replica id")
	}
	if c.Resync == 0 {
		c.Resync = DefaultResync
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// RESTConfig returns the client configuration and the namespace to watch
// when none is given, as kube.Load(path, ...) with the collector's user
// agent: the kubeconfig at path (its current context), or, when path is
// empty, the cluster the process runs in.
func RESTConfig(path string) (*rest.Config, string, error) {
	return kube.Load(path, userAgent)
}

// NewClient returns a Kubernetes client and the namespace of RESTConfig(path).
func NewClient(path string) (kubernetes.Interface, string, error) {
	cfg, ns, err := RESTConfig(path)
	if err != nil {
		return nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, ns, nil
}

// NewClientsForConfig returns the typed and the dynamic client of cfg.
func NewClientsForConfig(cfg *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return cs, dyn, nil
}
