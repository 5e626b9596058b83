package config

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics, that whatever it accepts is
// valid, resolves without error and survives a Marshal/Parse round trip.
// The seed corpus is in testdata/fuzz/FuzzParse plus the reference
// examples.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"variants.yaml", "saturation-config.yaml", "queueing-config.yaml", "scale-to-zero-config.yaml"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse(data)
		if err != nil {
			if objs != nil {
				t.Fatal("objects returned with an error")
			}
			return
		}
		for _, o := range objs {
			if err := o.Validate(); err != nil {
				t.Fatalf("Parse accepted an invalid object: %v", err)
			}
			out, err := Marshal(o)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			back, err := Parse(out)
			if err != nil || len(back) != 1 {
				t.Fatalf("Parse(Marshal) = %d objects, %v\n%s", len(back), err, out)
			}
			out2, err := Marshal(back[0])
			if err != nil || !bytes.Equal(out, out2) {
				t.Fatalf("round trip not stable (%v):\n%s\n---\n%s", err, out, out2)
			}
		}
		s, err := NewSet(objs...)
		if err != nil {
			return // duplicates
		}
		for _, g := range s.Groups() {
			if _, err := s.Saturation(g.ModelID, g.Namespace); err != nil {
				t.Fatalf("Saturation(%q, %q): %v", g.ModelID, g.Namespace, err)
			}
			if _, err := s.Analyzer(g.ModelID, g.Namespace); err != nil {
				t.Fatal(err)
			}
			s.Queueing(g.ModelID, g.Namespace)
			s.ScaleToZero(g.ModelID, g.Namespace, func(string) string { return "bad" })
		}
	})
}
