package kubeva

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
)

// sets records the OnChange calls of a Source as "ns/name,ns/name".
type sets chan string

func (s sets) onChange(vas []*config.VariantAutoscaling) {
	names := make([]string, len(vas))
	for i, va := range vas {
		names[i] = va.Metadata.Namespace + "/" + va.Metadata.Name
	}
	s <- strings.Join(names, ",")
}

func (s sets) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case got := <-s:
		return got
	case <-time.After(10 * time.Second):
		t.Fatalf("no OnChange for %s", what)
		return ""
	}
}

func (s sets) none(t *testing.T, what string) {
	t.Helper()
	select {
	case got := <-s:
		t.Fatalf("OnChange(%q) for %s", got, what)
	case <-time.After(200 * time.Millisecond):
	}
}

// The source hands over the valid objects of its namespace once listed
// and after each change of a spec or labels; an invalid object is left
// out without the others; status writes and other namespaces change
// nothing.
func TestSourceFollowsTheObjects(t *testing.T) {
	ctx := context.Background()
	cli := newFakeClient(
		variant("llm", "b"),
		variant("llm", "a"),
		variant("llm", "bad", func(o map[string]any) { spec(o)["minReplicas"] = int64(20) }),
		variant("other", "c"),
	)
	vas := cli.Resource(GVR).Namespace("llm")
	got := make(sets, 16)
	src, err := StartSource(ctx, SourceConfig{Client: cli, Namespace: "llm", OnChange: got.onChange, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s := got.next(t, "the first list"); s != "llm/a,llm/b" {
		t.Fatalf("first set %q", s)
	}
	if !src.Has("llm", "bad") || src.Has("llm", "nope") || src.Has("other", "c") {
		t.Fatal("Has does not follow the informer")
	}
	update := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := vas.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(variant("llm", "bad"))
	if s := got.next(t, "the invalid object fixed"); s != "llm/a,llm/b,llm/bad" {
		t.Fatalf("set %q", s)
	}
	withStatus := variant("llm", "a", func(o map[string]any) {
		o["status"] = map[string]any{"actuation": map[string]any{"applied": true}}
	})
	if _, err := vas.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.none(t, "a status write")
	update(variant("llm", "a", func(o map[string]any) { spec(o)["maxReplicas"] = int64(3) }))
	if s := got.next(t, "a spec change"); s != "llm/a,llm/b,llm/bad" {
		t.Fatalf("set %q", s)
	}
	update(variant("llm", "b", func(o map[string]any) { spec(o)["variantCost"] = "free" }))
	if s := got.next(t, "b made invalid"); s != "llm/a,llm/bad" {
		t.Fatalf("set %q", s)
	}
	if err := vas.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := got.next(t, "a deleted"); s != "llm/bad" {
		t.Fatalf("set %q", s)
	}
}

// Every namespace and a label selector.
func TestSourceAllNamespacesSelected(t *testing.T) {
	pooled := func(o map[string]any) { metadata(o)["labels"] = map[string]any{"hermod.io/pool": "p"} }
	cli := newFakeClient(variant("llm", "a", pooled), variant("other", "c", pooled), variant("llm", "unpooled"))
	got := make(sets, 4)
	src, err := StartSource(context.Background(), SourceConfig{Client: cli, Selector: "hermod.io/pool=p", OnChange: got.onChange, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s := got.next(t, "the first list"); s != "llm/a,other/c" {
		t.Fatalf("first set %q", s)
	}
	// An empty list is handed over too: the engine then drops the objects.
	empty := make(sets, 1)
	src2, err := StartSource(context.Background(), SourceConfig{Client: newFakeClient(), Namespace: "llm", OnChange: empty.onChange, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if s := empty.next(t, "an empty list"); s != "" {
		t.Fatalf("first set %q", s)
	}
}

func TestStartSourceChecksConfig(t *testing.T) {
	on := func([]*config.VariantAutoscaling) {}
	for name, cfg := range map[string]SourceConfig{
		"no client":    {OnChange: on},
		"no handler":   {Client: newFakeClient()},
		"bad selector": {Client: newFakeClient(), OnChange: on, Selector: "a in ("},
	} {
		if s, err := StartSource(context.Background(), cfg); err == nil {
			s.Close()
			t.Errorf("%s: no error", name)
		}
	}
}
