package cmdline

import "testing"

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"2GiB": 2 << 30, "500MiB": 500 << 20, "64MB": 64e6, "1048576": 1 << 20, "1.5KiB": 1536, " 3 GB ": 3e9, "0": 0, "10B": 10} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1GiB", "2XB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
}
