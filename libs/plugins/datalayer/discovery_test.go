package datalayer

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// file-discovery's two parameters, as upstream's docs give them, and its
// defaults: watchFile false, the name its type.
func TestFileDiscoveryParameters(t *testing.T) {
	for _, tc := range []struct {
		name, params, wantName, wantPath string
		watch                            bool
	}{
		{"", `{"path": "/etc/epp/endpoints.yaml", "watchFile": true}`, FileDiscoveryType, "/etc/epp/endpoints.yaml", true},
		{"my-endpoints", `{"path": "/etc/epp/endpoints.yaml"}`, "my-endpoints", "/etc/epp/endpoints.yaml", false},
		{"file-disc", `{"path": "endpoints.yaml", "watchFile": false}`, "file-disc", "endpoints.yaml", false},
		{"", `{"path": "/e.yaml", "watchFile": null}`, FileDiscoveryType, "/e.yaml", false},
	} {
		h := schedulingtest.NewHandle()
		d := schedulingtest.New[*FileDiscovery](t, h, FileDiscoveryType, tc.name, tc.params)
		if got := d.TypedName(); got.Type != FileDiscoveryType || got.Name != tc.wantName {
			t.Errorf("%s: typed name %v, want %s/%s", tc.params, got, FileDiscoveryType, tc.wantName)
		}
		var disc scheduling.EndpointDiscovery = d
		if disc.EndpointsFile() != tc.wantPath || disc.WatchFile() != tc.watch {
			t.Errorf("%s: file %q watch %v, want %q %v", tc.params, disc.EndpointsFile(), disc.WatchFile(), tc.wantPath, tc.watch)
		}
		if p, ok := d.Parameters().(FileDiscoveryParams); !ok || p != d.Params() {
			t.Errorf("%s: Parameters() = %#v", tc.params, d.Parameters())
		}
		if len(h.Warnings) != 0 {
			t.Errorf("%s: warnings %v", tc.params, h.Warnings)
		}
		if eps := scheduling.ExtensionPoints(d); len(eps) != 1 || eps[0] != "EndpointDiscovery" {
			t.Errorf("extension points %v", eps)
		}
	}
}

// The path is required, as upstream checks it when the config loads; the
// file itself is not read (pickers build the config where the file need
// not exist). Types are checked, a misspelt parameter is an error, and
// an unknown one a warning.
func TestFileDiscoveryBadParameters(t *testing.T) {
	for params, want := range map[string]string{
		``:                                    "parameters.path: required",
		`{}`:                                  "parameters.path: required",
		`null`:                                "parameters.path: required",
		`{"path": ""}`:                        "parameters.path: required",
		`{"watchFile": true}`:                 "parameters.path: required",
		`{"path": 7}`:                         "parameters.path",
		`{"path": ["/a", "/b"]}`:              "parameters.path",
		`{"path": "/e.yaml", "watchFile": 1}`: "parameters.watchFile",
		`{"path": "/e.yaml", "watchFile": "true"}`: "parameters.watchFile",
		`{"paths": "/e.yaml"}`:                     "paths",
		`{"path": "/e.yaml", "watchFiles": true}`:  "watchFiles",
		`["/e.yaml"]`: "parameters",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), FileDiscoveryType, "", params)
		var pe *scheduling.ParamError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a parameter error containing %q", params, err, want)
		}
	}

	// a path to no file loads: the collector reads it
	d := schedulingtest.New[*FileDiscovery](t, schedulingtest.NewHandle(), FileDiscoveryType, "", `{"path": "/nonexistent/endpoints.yaml"}`)
	if d.EndpointsFile() != "/nonexistent/endpoints.yaml" {
		t.Errorf("path %q", d.EndpointsFile())
	}

	h := schedulingtest.NewHandle()
	schedulingtest.New[*FileDiscovery](t, h, FileDiscoveryType, "", `{"path": "/e.yaml", "pollInterval": "5s"}`)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "pollInterval: unknown parameter") {
		t.Errorf("warnings %v, want one for pollInterval", h.Warnings)
	}

	if _, err := NewFileDiscovery("x", FileDiscoveryParams{}); err == nil {
		t.Error("NewFileDiscovery without a path: no error")
	}
}
