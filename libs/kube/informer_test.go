package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var widgets = Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", CRD: true}

// record is a log record: its level and message.
type record struct {
	level slog.Level
	msg   string
}

// recorder is a slog handler that keeps the records.
type recorder struct {
	mu      sync.Mutex
	records []record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, record{rec.Level, rec.Message})
	return nil
}

func (r *recorder) all() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

func TestWatchErrorHandler(t *testing.T) {
	pods := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "pod"}
	for _, tc := range []struct {
		name string
		res  Resource
		err  error
		want []record // none: not logged
	}{
		{"watch closed", widgets, io.EOF, nil},
		{"watch closed, wrapped", widgets, fmt.Errorf("watch: %w", io.EOF), nil},
		{"expired", widgets, apierrors.NewResourceExpired("too old resource version"),
			[]record{{slog.LevelDebug, "Widget watch expired; listing again"}}},
		{"gone", widgets, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone}},
			[]record{{slog.LevelDebug, "Widget watch expired; listing again"}}},
		{"CRD not installed", widgets, apierrors.NewNotFound(widgets.GVR.GroupResource(), ""),
			[]record{{slog.LevelWarn, "Widget list failed: is the CRD widgets.example.com installed, serving v1? Retrying"}}},
		{"built-in resource not found", pods, apierrors.NewNotFound(pods.GVR.GroupResource(), ""),
			[]record{{slog.LevelWarn, "pod list or watch failed; retrying"}}},
		{"forbidden", widgets, apierrors.NewForbidden(widgets.GVR.GroupResource(), "", errors.New("no RBAC")),
			[]record{{slog.LevelWarn, "Widget list forbidden: grant get, list and watch on widgets.example.com. Retrying"}}},
		{"built-in resource forbidden", pods, apierrors.NewForbidden(pods.GVR.GroupResource(), "", errors.New("no RBAC")),
			[]record{{slog.LevelWarn, "pod list forbidden: grant get, list and watch on pods. Retrying"}}},
		{"unexpected EOF", widgets, io.ErrUnexpectedEOF,
			[]record{{slog.LevelWarn, "Widget list or watch failed; retrying"}}},
		{"connection refused", widgets, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"),
			[]record{{slog.LevelWarn, "Widget list or watch failed; retrying"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			WatchErrorHandler(tc.res, slog.New(rec))(t.Context(), nil, tc.err)
			if got := rec.all(); !slices.Equal(got, tc.want) {
				t.Fatalf("logged %v; want %v", got, tc.want)
			}
		})
	}
}

func widget(name string, labels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": "ns", "labels": labels},
	}}
}

func newFakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets.GVR: "WidgetList"}, objs...)
}

// The informer lists the objects its tweak selects, and stops when its
// context ends.
func TestInformer(t *testing.T) {
	cli := newFakeClient(widget("a", map[string]any{"pool": "x"}), widget("b", map[string]any{"pool": "y"}))
	inf, err := NewInformer(cli, widgets, "ns", 0, func(o *metav1.ListOptions) { o.LabelSelector = "pool=x" }, slog.New(&recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := Run(ctx, inf, slog.New(&recorder{}))
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	if keys := inf.GetStore().ListKeys(); !slices.Equal(keys, []string{"ns/a"}) {
		t.Fatalf("informer holds %v; want [ns/a]", keys)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

// A failing list goes to the watch error handler, which logs it with its
// hint.
func TestInformerLogsFailedLists(t *testing.T) {
	cli := newFakeClient()
	cli.PrependReactor("list", widgets.GVR.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(widgets.GVR.GroupResource(), "", errors.New("no RBAC"))
	})
	rec := &recorder{}
	inf, err := NewInformer(cli, widgets, "ns", 0, nil, slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := Run(ctx, inf, slog.New(&recorder{}))
	defer func() { cancel(); <-done }()
	const hint = "Widget list forbidden: grant get, list and watch on widgets.example.com. Retrying"
	deadline := time.After(10 * time.Second)
	for !slices.Contains(rec.all(), record{slog.LevelWarn, hint}) {
		select {
		case <-deadline:
			t.Fatalf("no forbidden list logged: %v", rec.all())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WithLogger's context sends klog's (client-go's) logs to slog.
func TestWithLogger(t *testing.T) {
	rec := &recorder{}
	klog.FromContext(WithLogger(t.Context(), slog.New(rec))).Info("from client-go")
	if got := rec.all(); !slices.Equal(got, []record{{slog.LevelInfo, "from client-go"}}) {
		t.Fatalf("logged %v; want the klog record", got)
	}
}
