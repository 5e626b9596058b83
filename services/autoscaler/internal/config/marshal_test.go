package config

import "testing"

func TestMarshalNilObjects(t *testing.T) {
	for _, tc := range []struct {
		obj  Object
		want string
	}{
		{(*VariantAutoscaling)(nil), "marshal: nil VariantAutoscaling"},
		{(*SaturationConfigMap)(nil), "marshal: nil ConfigMap"},
		{(*QueueingConfigMap)(nil), "marshal: nil ConfigMap"},
		{(*ScaleToZeroConfigMap)(nil), "marshal: nil ConfigMap"},
		{nil, "marshal: unsupported object <nil>"},
	} {
		if _, err := Marshal(tc.obj); err == nil || err.Error() != tc.want {
			t.Errorf("Marshal(%T) error = %v, want %q", tc.obj, err, tc.want)
		}
	}
}

func TestMarshalConfigMaps(t *testing.T) {
	meta := ObjectMeta{Name: QueueingConfigMapName, Namespace: "wva"}
	out, err := Marshal(&QueueingConfigMap{Metadata: meta, Entries: map[string]QueueingEntry{
		DefaultEntry: {SLOMultiplier: ptr(2.5)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
data:
  default: |
    sloMultiplier: 2.5
kind: ConfigMap
metadata:
  name: wva-queueing-model-config
  namespace: wva
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
