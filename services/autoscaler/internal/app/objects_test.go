package app

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// vaYAML is a stored VariantAutoscaling of namespace ns (none when "")
// with a cost.
func vaYAML(ns, name, cost string) string {
	meta := "{name: " + name + "}"
	if ns != "" {
		meta = "{name: " + name + ", namespace: " + ns + "}"
	}
	return "apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: " + meta +
		"\nspec: {scaleTargetRef: {kind: Deployment, name: " + name + "}, modelID: m, variantCost: \"" + cost + "\"}\n"
}

func apiVA(t *testing.T, ns, name, cost string) *config.VariantAutoscaling {
	t.Helper()
	objs, err := config.Parse([]byte(vaYAML(ns, name, cost)))
	if err != nil {
		t.Fatal(err)
	}
	return objs[0].(*config.VariantAutoscaling)
}

// variantsOf describes a set's variants as "ns/name=cost,...".
func variantsOf(s *config.Set) string {
	var out []string
	for _, v := range s.Variants() {
		out = append(out, v.Metadata.Namespace+"/"+v.Metadata.Name+"="+v.Spec.VariantCost)
	}
	return strings.Join(out, ",")
}

// The sources of the VariantAutoscaling objects by --va-source: etcd (and
// the file) only; the API only, the stored ConfigMaps kept; both, an API
// object winning over a stored one of the same namespace and name. An
// invalid stored object keeps the last valid set.
func TestObjectsMergeTheSources(t *testing.T) {
	const pool = "p"
	quietLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	stz := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-model-scale-to-zero-config}\ndata:\n  default: |\n    enable_scale_to_zero: true\n"
	fileObjs, err := config.Parse([]byte(vaYAML("", "from-file", "1")))
	if err != nil {
		t.Fatal(err)
	}
	etcd := map[string][]byte{
		store.VariantKey(pool, "stored"):                           []byte(vaYAML("llm", "stored", "2")),
		store.VariantKey(pool, "shared"):                           []byte(vaYAML("llm", "shared", "3")),
		store.ConfigMapKey(pool, "wva-model-scale-to-zero-config"): []byte(stz),
		store.StatusKey(pool, "stored"):                            []byte("not an object: ignored"),
	}
	api := []*config.VariantAutoscaling{apiVA(t, "llm", "shared", "30"), apiVA(t, "llm", "api", "4")}
	for _, tc := range []struct {
		source string
		want   string
	}{
		{VASourceEtcd, "/from-file=1,llm/shared=3,llm/stored=2"},
		{VASourceKubernetes, "llm/api=4,llm/shared=30"},
		{VASourceBoth, "/from-file=1,llm/api=4,llm/shared=30,llm/stored=2"},
	} {
		t.Run(tc.source, func(t *testing.T) {
			var got *config.Set
			o := newObjects(Config{VASource: tc.source}, fileObjs, func(s *config.Set) { got = s }, quietLog)
			o.pool = pool
			o.update(etcd, 7)
			o.setKube(api)
			if got == nil || variantsOf(got) != tc.want {
				t.Fatalf("variants %q, want %q", variantsOf(got), tc.want)
			}
			if !got.ScaleToZero("m", "llm", func(string) string { return "" }).Enabled {
				t.Error("the stored scale-to-zero ConfigMap is not applied")
			}
			// An invalid stored object: the last valid set stays.
			bad := map[string][]byte{store.VariantKey(pool, "bad"): []byte("kind: Nope")}
			last := got
			o.update(bad, 8)
			if got != last {
				t.Fatalf("an invalid stored object replaced the set: %q", variantsOf(got))
			}
		})
	}
}
