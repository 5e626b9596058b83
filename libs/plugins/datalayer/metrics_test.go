package datalayer

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// A metrics-data-source fetches the exposition at its scheme and path; the
// core-metrics-extractor turns it into the endpoint's metrics.
func TestMetricsSourceAndCoreExtractor(t *testing.T) {
	body, err := os.ReadFile("../../enginemetrics/testdata/vllm-sim.prom")
	if err != nil {
		t.Fatal(err)
	}
	for _, tlsServer := range []bool{false, true} {
		srv := pod(t, tlsServer, "/custom/metrics", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(body)
		})
		scheme := "http"
		if tlsServer {
			scheme = "https"
		}
		h := schedulingtest.NewHandle()
		ep := endpointOf(t, srv)
		params := `{"scheme": "` + scheme + `", "path": "custom/metrics"}`
		if tlsServer {
			// certificates are verified unless the config says otherwise
			verifying := schedulingtest.New[*MetricsSource](t, h, MetricsSourceType, "", params)
			if _, err := verifying.Fetch(context.Background(), ep); err == nil || !strings.Contains(err.Error(), "insecureSkipVerify") {
				t.Fatalf("a self-signed endpoint, verified by default: %v", err)
			}
			params = `{"scheme": "https", "path": "custom/metrics", "insecureSkipVerify": true}`
		}
		src := schedulingtest.New[*MetricsSource](t, h, MetricsSourceType, "", params)
		data, err := src.Fetch(context.Background(), ep)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		x := schedulingtest.New[*CoreMetricsExtractor](t, h, CoreMetricsExtractorType, "", "")
		if err := x.Extract(context.Background(), data, ep); err != nil {
			t.Fatal(err)
		}
		if m := ep.Metrics; m == nil || m.UpdatedAt.IsZero() || m.NumGPUBlocks == 0 || m.BlockSize == 0 {
			t.Fatalf("%s: metrics %+v", scheme, m)
		}
		_ = src.Close()
	}
	// a path nothing serves: the status error, as models-data-source's
	srv := pod(t, false, "/metrics", nil)
	src := schedulingtest.New[*MetricsSource](t, schedulingtest.NewHandle(), MetricsSourceType, "", `{"path": "/nope"}`)
	_, err = src.Fetch(context.Background(), endpointOf(t, srv))
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
		t.Fatalf("fetch of a missing path: %v", err)
	}
}

func TestCoreExtractorParameters(t *testing.T) {
	for params, field := range map[string]string{
		`{"defaultEngine": "trtllm-serve"}`:                             "defaultEngine",
		`{"engineLabelKey": ""}`:                                        "engineLabelKey",
		`{"engineConfigs": [{"name": "vllm", "kvUsageSpec": "x"}]}`:     "engineConfigs",
		`{"defaultEngine": "triton-tensorrt-llm", "engineConfigs": []}`: "defaultEngine",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), CoreMetricsExtractorType, "", params)
		var pe *scheduling.ParamError
		if !errors.As(err, &pe) || !strings.HasSuffix(pe.Path, field) {
			t.Errorf("%s: %v, want an error naming %s", params, err, field)
		}
	}
	x := schedulingtest.New[*CoreMetricsExtractor](t, schedulingtest.NewHandle(), CoreMetricsExtractorType, "", `{"defaultEngine": "sglang"}`)
	if err := x.Extract(context.Background(), []Model{}, scheduling.NewEndpoint("p", "h", 1, nil)); err == nil {
		t.Error("extracting a model list did not fail")
	}
	if err := x.Extract(context.Background(), Exposition{Body: []byte("vllm:num_requests_waiting{x=\"}\n")}, scheduling.NewEndpoint("p", "h", 1, nil)); err == nil {
		t.Error("a malformed exposition did not fail")
	}
}
