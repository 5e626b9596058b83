package kubeva

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// Defaults of StatusConfig.
const (
	// DefaultRefresh is how often an unchanged status is written again
	// (its lastRunTime moves on), as WVA's loop does.
	DefaultRefresh = 30 * time.Second
	// DefaultCallTimeout bounds each API call.
	DefaultCallTimeout = 10 * time.Second
	// FieldManager names the autoscaler's writes.
	FieldManager = "hermod-autoscaler"
)

// StatusConfig configures a StatusWriter.
type StatusConfig struct {
	// Client is the dynamic client of the cluster. Required.
	Client dynamic.Interface
	// Known, when set, says whether the API holds a variant (Source.Has):
	// statuses of the others (variants stored in etcd) are not written.
	Known func(namespace, name string) bool
	// Refresh: an unchanged status is written again at most this often
	// (DefaultRefresh when zero).
	Refresh time.Duration
	// CallTimeout bounds every API call (DefaultCallTimeout when zero).
	CallTimeout time.Duration
	// Backoff is the retry schedule of update conflicts
	// (retry.DefaultRetry when Steps is zero).
	Backoff wait.Backoff
	// Registerer gets the writer's metrics (none when nil).
	Registerer prometheus.Registerer
	// Logger logs (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// StatusWriter writes the status subresource of VariantAutoscaling
// objects. SetStatus queues (the latest status per object wins) and Run
// writes, one object at a time: a GET, the autoscaler's fields set
// (conditions merged by type, their lastTransitionTime kept while their
// status holds), an UPDATE of /status, again on a conflict.
type StatusWriter struct {
	cfg    StatusConfig
	log    *slog.Logger
	writes *prometheus.CounterVec
	wake   chan struct{}

	mu      sync.Mutex
	pending map[key]config.VariantAutoscalingStatus
	written map[key]writtenStatus
	warned  map[key]bool // told that the accelerator is unknown
}

type key struct{ namespace, name string }

type writtenStatus struct {
	st config.VariantAutoscalingStatus
	at time.Time
}

// NewStatusWriter returns a writer; Run writes what SetStatus queues.
func NewStatusWriter(cfg StatusConfig) (*StatusWriter, error) {
	if cfg.Client == nil {
		return nil, errors.New("VariantAutoscaling status writer: no dynamic client")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Backoff.Steps == 0 {
		cfg.Backoff = retry.DefaultRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &StatusWriter{
		cfg: cfg, log: cfg.Logger,
		writes: telemetry.NewCounterVec("hermod_autoscaler_va_status_writes_total",
			"Writes of VariantAutoscaling status subresources in the Kubernetes API, by result (ok, conflict: retried, error, gone: the object was deleted).", "result"),
		wake:    make(chan struct{}, 1),
		pending: map[key]config.VariantAutoscalingStatus{},
		written: map[key]writtenStatus{},
		warned:  map[key]bool{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.writes); err != nil {
			return nil, fmt.Errorf("VariantAutoscaling status writer: %w", err)
		}
	}
	return w, nil
}

// SetStatus queues a variant's status, unless the same (but for its times)
// was written less than Refresh ago or the API does not hold the variant.
// It does not block.
func (w *StatusWriter) SetStatus(namespace, name string, st config.VariantAutoscalingStatus) {
	if namespace == "" || (w.cfg.Known != nil && !w.cfg.Known(namespace, name)) {
		return
	}
	k := key{namespace, name}
	w.mu.Lock()
	last, ok := w.written[k]
	if ok && sameStatus(last.st, st) && w.cfg.Now().Sub(last.at) < w.cfg.Refresh {
		w.mu.Unlock()
		return
	}
	w.pending[k] = st
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run writes the queued statuses until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		}
		w.mu.Lock()
		batch := w.pending
		w.pending = map[key]config.VariantAutoscalingStatus{}
		w.mu.Unlock()
		for _, k := range slices.SortedFunc(maps.Keys(batch), func(a, b key) int {
			return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
		}) {
			select {
			case <-ctx.Done():
				return nil
			default:
			}
			w.write(ctx, k, batch[k])
		}
	}
}

// errGone stops the retries of an object that was deleted.
var errGone = errors.New("gone")

func (w *StatusWriter) write(ctx context.Context, k key, st config.VariantAutoscalingStatus) {
	res := w.cfg.Client.Resource(GVR).Namespace(k.namespace)
	withAlloc := true
	attempts := 0
	err := retry.OnError(w.cfg.Backoff, func(err error) bool {
		if apierrors.IsConflict(err) {
			w.writes.WithLabelValues("conflict").Inc()
			return true
		}
		// The CRD requires desiredOptimizedAlloc.accelerator: without one,
		// write the rest (once).
		if apierrors.IsInvalid(err) && withAlloc && st.DesiredOptimizedAlloc.Accelerator == "" {
			withAlloc = false
			return true
		}
		return false
	}, func() error {
		attempts++
		cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		defer cancel()
		u, err := res.Get(cctx, k.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errGone
		}
		if err != nil {
			return err
		}
		if err := setStatus(u, st, withAlloc); err != nil {
			return err
		}
		_, err = res.UpdateStatus(cctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return errGone
		}
		return err
	})
	label := k.namespace + "/" + k.name
	switch {
	case errors.Is(err, errGone):
		w.writes.WithLabelValues("gone").Inc()
		return
	case err != nil:
		w.writes.WithLabelValues("error").Inc()
		w.log.Warn("writing the VariantAutoscaling status failed; the next evaluation writes it again", "variant", label, "attempts", attempts, "error", err)
		return
	}
	w.writes.WithLabelValues("ok").Inc()
	w.mu.Lock()
	w.written[k] = writtenStatus{st: st, at: w.cfg.Now()}
	warn := !withAlloc && !w.warned[k]
	w.warned[k] = w.warned[k] || !withAlloc
	w.mu.Unlock()
	if warn {
		w.log.Warn("the VariantAutoscaling CRD requires status.desiredOptimizedAlloc.accelerator, which is unknown: "+
			"the replicas chosen are left out of its status (label the object with "+config.LabelAccelerator+")", "variant", label)
	}
}

// setStatus sets the autoscaler's fields of the object's status, keeping
// the others: desiredOptimizedAlloc (unless withAlloc is false),
// actuation.applied, and the conditions merged by type.
func setStatus(u *unstructured.Unstructured, st config.VariantAutoscalingStatus, withAlloc bool) error {
	if withAlloc {
		alloc := map[string]any{
			"numReplicas": int64(st.DesiredOptimizedAlloc.NumReplicas),
			"lastRunTime": metav1.NewTime(st.DesiredOptimizedAlloc.LastRunTime).UTC().Format(time.RFC3339),
		}
		acc := st.DesiredOptimizedAlloc.Accelerator
		if acc == "" {
			// keep the one the object has, if any
			acc, _, _ = unstructured.NestedString(u.Object, "status", "desiredOptimizedAlloc", "accelerator")
		}
		if acc != "" {
			alloc["accelerator"] = acc
		}
		if err := unstructured.SetNestedMap(u.Object, alloc, "status", "desiredOptimizedAlloc"); err != nil {
			return fmt.Errorf("status.desiredOptimizedAlloc: %w", err)
		}
	}
	if err := unstructured.SetNestedField(u.Object, st.Actuation.Applied, "status", "actuation", "applied"); err != nil {
		return fmt.Errorf("status.actuation: %w", err)
	}
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		list := map[string]any{"items": raw}
		var wrapped struct {
			Items []metav1.Condition `json:"items"`
		}
		// Conditions that do not decode are replaced.
		if runtime.DefaultUnstructuredConverter.FromUnstructured(list, &wrapped) == nil {
			conds = wrapped.Items
		}
	}
	for _, c := range st.Conditions {
		reason := c.Reason
		if reason == "" {
			reason = string(c.Status)
		}
		meta.SetStatusCondition(&conds, metav1.Condition{
			Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: reason, Message: c.Message,
			ObservedGeneration: u.GetGeneration(), LastTransitionTime: metav1.NewTime(c.LastTransitionTime),
		})
	}
	out := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return fmt.Errorf("status.conditions: %w", err)
		}
		// metav1.Condition's message is required by the CRD, even empty.
		if _, ok := m["message"]; !ok {
			m["message"] = ""
		}
		out = append(out, m)
	}
	return unstructured.SetNestedSlice(u.Object, out, "status", "conditions")
}

// sameStatus compares two statuses but for their times.
func sameStatus(a, b config.VariantAutoscalingStatus) bool {
	a.DesiredOptimizedAlloc.LastRunTime, b.DesiredOptimizedAlloc.LastRunTime = time.Time{}, time.Time{}
	strip := func(cs []config.Condition) []config.Condition {
		out := slices.Clone(cs)
		for i := range out {
			out[i].LastTransitionTime = time.Time{}
		}
		return out
	}
	a.Conditions, b.Conditions = strip(a.Conditions), strip(b.Conditions)
	return reflect.DeepEqual(a, b)
}
