package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendString: AppendString writes what encoding/json writes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\r\t\x00\x1f", "\u2028\u2029", "\xff", "é中🙂", "<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got  %s\n want %s", s, got, want)
		}
		if utf8.ValidString(s) {
			var back string
			if err := json.Unmarshal(want, &back); err != nil || back != s {
				t.Fatalf("round trip of %q: %q %v", s, back, err)
			}
		}
	})
}
