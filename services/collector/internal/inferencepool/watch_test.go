package inferencepool

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newFakeClient returns a fake dynamic client that serves InferencePools.
func newFakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: ListKind}, objs...)
}

// changes records the OnChange calls of a Watch.
type changes chan *Pool

func (c changes) next(t *testing.T, what string) *Pool {
	t.Helper()
	select {
	case p := <-c:
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("no OnChange for %s", what)
		return nil
	}
}

func (c changes) none(t *testing.T, what string) {
	t.Helper()
	select {
	case p := <-c:
		t.Fatalf("OnChange(%v) for %s", p, what)
	case <-time.After(200 * time.Millisecond):
	}
}

// The watch hands over the pool as listed, each change of its target or
// picker, nil on deletion; it skips other pools, versions that change
// neither, and invalid versions (keeping the last valid one).
func TestWatchFollowsThePool(t *testing.T) {
	ctx := context.Background()
	cli := newFakeClient(object("llama", spec([]int64{8000})), object("other", spec([]int64{9000})))
	pools := cli.Resource(GVR).Namespace("models")
	got := make(changes, 16)
	w, err := StartWatch(ctx, WatchConfig{Client: cli, Namespace: "models", Name: "llama", OnChange: func(p *Pool) { got <- p },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if p := got.next(t, "the first list"); p == nil || p.Name != "llama" || p.TargetPorts[0] != 8000 {
		t.Fatalf("first OnChange(%v)", p)
	}
	select {
	case <-w.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	update := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := pools.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	update(object("llama", spec([]int64{8000, 8001})))
	if p := got.next(t, "two ports"); len(p.TargetPorts) != 2 {
		t.Fatalf("OnChange(%v), want two ports", p)
	}
	labelled := object("llama", spec([]int64{8000, 8001}))
	labelled.SetLabels(map[string]string{"team": "a"})
	update(labelled)
	got.none(t, "a change of the labels only")
	update(object("other", spec([]int64{9001})))
	got.none(t, "another pool")
	update(object("llama", spec(nil)))
	got.none(t, "an invalid version")
	if p := w.Current(); p == nil || len(p.TargetPorts) != 2 {
		t.Fatalf("Current() = %v after an invalid version, want the last valid one", p)
	}
	update(object("llama", spec([]int64{8000, 8001}, func(s map[string]any) {
		s["endpointPickerRef"] = map[string]any{"name": "picker", "port": map[string]any{"number": int64(9002)}}
	})))
	if p := got.next(t, "a picker"); p.EndpointPicker == nil || p.EndpointPicker.Port != 9002 {
		t.Fatalf("OnChange(%v), want the picker", p)
	}

	if err := pools.Delete(ctx, "llama", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := got.next(t, "the deletion"); p != nil {
		t.Fatalf("OnChange(%v) on deletion, want nil", p)
	}
	if w.Current() != nil {
		t.Fatal("Current() after the deletion")
	}
	if _, err := pools.Create(ctx, object("llama", spec([]int64{7000})), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := got.next(t, "the pool created again"); p == nil || p.TargetPorts[0] != 7000 {
		t.Fatalf("OnChange(%v)", p)
	}
}

// A pool absent at the start: the watch syncs without a call and
// Current is nil.
func TestWatchAbsentPool(t *testing.T) {
	got := make(changes, 1)
	w, err := StartWatch(context.Background(), WatchConfig{Client: newFakeClient(), Namespace: "models", Name: "llama",
		OnChange: func(p *Pool) { got <- p }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	got.none(t, "an absent pool")
	if w.Current() != nil {
		t.Fatal("Current() of an absent pool")
	}
}

func TestStartWatchChecksConfig(t *testing.T) {
	on := func(*Pool) {}
	for name, cfg := range map[string]WatchConfig{
		"no client":  {Namespace: "m", Name: "p", OnChange: on},
		"no name":    {Client: newFakeClient(), Namespace: "m", OnChange: on},
		"no handler": {Client: newFakeClient(), Namespace: "m", Name: "p"},
	} {
		if w, err := StartWatch(context.Background(), cfg); err == nil {
			w.Close()
			t.Errorf("%s: no error", name)
		}
	}
}
