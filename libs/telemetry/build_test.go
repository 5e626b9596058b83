package telemetry

import "testing"

func TestApplyStamps(t *testing.T) {
	base := Build{Version: "(devel)", Commit: "0123456789abcdef", Time: "2025-01-01T00:00:00Z", Modified: true, Go: "go1.26.0"}
	for _, tc := range []struct {
		name                            string
		version, commit, time, modified string
		want                            string
	}{
		{"no stamps keep the build information", "", "", "", "", "(devel) (commit 0123456789ab+changes, 2025-01-01T00:00:00Z, go1.26.0)"},
		{"a release stamp", "0.1.0", "fedcba9876543210fedc", "2025-11-26T10:00:00Z", "", "0.1.0 (commit fedcba987654, 2025-11-26T10:00:00Z, go1.26.0)"},
		{"a stamped dirty tree", "0.1.0", "fedcba9876543210fedc", "2025-11-26T10:00:00Z", "true", "0.1.0 (commit fedcba987654+changes, 2025-11-26T10:00:00Z, go1.26.0)"},
		{"a version alone", "0.2.0", "", "", "", "0.2.0 (commit 0123456789ab+changes, 2025-01-01T00:00:00Z, go1.26.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := applyStamps(base, tc.version, tc.commit, tc.time, tc.modified).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
