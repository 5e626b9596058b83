package datalayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// A DaemonSet exporter's page (DCGM_EXPORTER_KUBERNETES=true): two GPUs of
// pod vllm-0, one of vllm-1, and a GPU no pod uses.
const dcgmDaemonSetPage = `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",container="vllm",namespace="llm",pod="vllm-0"} 37
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",container="vllm",namespace="llm",pod="vllm-0"} 81
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",container="vllm",namespace="llm",pod="vllm-1"} 12
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",pod="vllm-0"} 70211
`

// A sidecar's page: no pod labels, so every sample is the pod's.
const dcgmSidecarPage = `# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-z"} 64
`

func dcgmSource(t *testing.T, params string) *DCGMSource {
	t.Helper()
	s := schedulingtest.New[*DCGMSource](t, schedulingtest.NewHandle(), DCGMSourceType, "gpus", params)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func fetchGPU(t *testing.T, s *DCGMSource, ep *scheduling.Endpoint) (float64, error) {
	t.Helper()
	data, err := s.Fetch(context.Background(), ep)
	if err != nil {
		return 0, err
	}
	x := schedulingtest.New[*DCGMExtractor](t, schedulingtest.NewHandle(), DCGMExtractorType, "", "")
	if err := x.Extract(context.Background(), data, ep); err != nil {
		return 0, err
	}
	v, ok := ep.Attribute(GPUUtilizationKey)
	if !ok {
		t.Fatal("no attribute after a good extract")
	}
	return v, nil
}

func TestDCGMDaemonSetOnTheNode(t *testing.T) {
	srv := pod(t, false, "/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(dcgmDaemonSetPage)) })
	exporter := endpointOf(t, srv)
	s := dcgmSource(t, fmt.Sprintf(`{"port": %d, "useNodeAddress": true}`, exporter.Port))
	for name, want := range map[string]float64{"vllm-0": 0.81, "vllm-1": 0.12} {
		// The pod's own address is unreachable: the node's is scraped.
		ep := scheduling.NewEndpoint(name, "192.0.2.1", 8000, nil)
		ep.NodeAddress = exporter.Address
		ep.Metrics = &scheduling.Metrics{WaitingRequests: 3, Attributes: map[string]float64{"other": 1}}
		shared := ep.Metrics
		got, err := fetchGPU(t, s, ep)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v (its busiest GPU)", name, got, err, want)
		}
		if ep.Metrics.WaitingRequests != 3 || ep.Metrics.Attributes["other"] != 1 || len(shared.Attributes) != 1 {
			t.Errorf("%s: the extract changed what it did not own: %+v, shared %+v", name, ep.Metrics, shared)
		}
	}
	ep := scheduling.NewEndpoint("vllm-9", "192.0.2.1", 8000, nil)
	ep.NodeAddress = exporter.Address
	if _, err := fetchGPU(t, s, ep); !errors.Is(err, ErrNoGPUSample) {
		t.Errorf("a pod with no GPU on the page: %v", err)
	}
	if _, err := s.Fetch(context.Background(), scheduling.NewEndpoint("vllm-0", "192.0.2.1", 8000, nil)); err == nil || !strings.Contains(err.Error(), "node address") {
		t.Errorf("no node address: %v", err)
	}
}

func TestDCGMSidecarOnThePod(t *testing.T) {
	srv := pod(t, false, "/gpu", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(dcgmSidecarPage)) })
	ep := endpointOf(t, srv)
	s := dcgmSource(t, fmt.Sprintf(`{"port": %d, "path": "gpu"}`, ep.Port))
	ep.Port = 8000 // the serving port is not the exporter's
	if got, err := fetchGPU(t, s, ep); err != nil || got != 0.64 {
		t.Errorf("sidecar: %v, %v", got, err)
	}
}

func TestDCGMFetchErrors(t *testing.T) {
	bad := pod(t, false, "/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("DCGM_FI_DEV_GPU_UTIL{gpu=0} x\n"))
	})
	ep := endpointOf(t, bad)
	if _, err := dcgmSource(t, fmt.Sprintf(`{"port": %d}`, ep.Port)).Fetch(context.Background(), ep); !isBodyError(err) {
		t.Errorf("a page that does not parse: %v", err)
	}
	down := pod(t, false, "/other", nil)
	ep = endpointOf(t, down)
	var status *StatusError
	if _, err := dcgmSource(t, fmt.Sprintf(`{"port": %d}`, ep.Port)).Fetch(context.Background(), ep); !errors.As(err, &status) || status.StatusCode != http.StatusNotFound {
		t.Errorf("404: %v", err)
	}
	x := schedulingtest.New[*DCGMExtractor](t, schedulingtest.NewHandle(), DCGMExtractorType, "", "")
	if err := x.Extract(context.Background(), []Model{}, ep); err == nil || !strings.Contains(err.Error(), DCGMSourceType) {
		t.Errorf("extract of a model list: %v", err)
	}
	for params, field := range map[string]string{`{"port": 0}`: "port", `{"scheme": "ftp"}`: "scheme", `{"interval": "-1s"}`: "interval"} {
		if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), DCGMSourceType, "", params); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", params, err)
		}
	}
}

func FuzzDCGMPage(f *testing.F) {
	f.Add([]byte(dcgmDaemonSetPage), "vllm-0")
	f.Add([]byte(dcgmSidecarPage), "")
	f.Add([]byte("DCGM_FI_DEV_GPU_UTIL{pod=\"a\"} NaN\nDCGM_FI_DEV_GPU_UTIL{pod=\"a\"} +Inf\n"), "a")
	f.Fuzz(func(t *testing.T, body []byte, pod string) {
		families, err := ParseExposition(body)
		if err != nil {
			return
		}
		if u, ok := GPUUtilization(families, pod); ok && !(u >= 0 && u <= 1) {
			t.Fatalf("utilisation %v outside 0..1", u)
		}
	})
}
