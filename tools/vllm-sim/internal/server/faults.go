package server

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"

	"github.com/hermod/hermod/libs/scheduling"
)

// Faults are the failure-injection settings of a pod.
type Faults struct {
	// ErrorRates maps an HTTP status (429, 500 or 503) to the fraction of
	// requests answered with it at once.
	ErrorRates map[string]float64 `json:"error_rates,omitempty"`
	// ExtraLatency delays every request (simulated time) before it reaches
	// the engine.
	ExtraLatency scheduling.Duration `json:"extra_latency,omitempty"`
	// GPUUtilization, in percent, is what the fleet's DCGM exporter page
	// reports for the pod instead of the utilisation its load makes.
	GPUUtilization *float64 `json:"gpu_utilization,omitempty"`
}

// Validate checks the rates.
func (f *Faults) Validate() error {
	total := 0.0
	for code, r := range f.ErrorRates {
		switch code {
		case "429", "500", "503":
		default:
			return fmt.Errorf("error_rates: %q is not one of 429, 500, 503", code)
		}
		if r < 0 || r > 1 {
			return fmt.Errorf("error_rates.%s: must be between 0 and 1 (got %v)", code, r)
		}
		total += r
	}
	if total > 1 {
		return fmt.Errorf("error_rates: add up to %v, more than 1", total)
	}
	if f.ExtraLatency < 0 {
		return fmt.Errorf("extra_latency: must not be negative")
	}
	if u := f.GPUUtilization; u != nil && (*u < 0 || *u > 100) {
		return fmt.Errorf("gpu_utilization: must be a percentage, 0 to 100 (got %v)", *u)
	}
	return nil
}

// inject returns the status to fail a request with, or 0.
func (f *Faults) inject() int {
	if len(f.ErrorRates) == 0 {
		return 0
	}
	codes := make([]string, 0, len(f.ErrorRates))
	for c := range f.ErrorRates {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	x := rand.Float64()
	for _, c := range codes {
		if x < f.ErrorRates[c] {
			status, _ := strconv.Atoi(c)
			return status
		}
		x -= f.ErrorRates[c]
	}
	return 0
}

func injectedMessage(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "The server is overloaded (injected fault)."
	case http.StatusServiceUnavailable:
		return "The server is not ready (injected fault)."
	}
	return "Internal server error (injected fault)."
}

func (p *Pod) getFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, p.faults.Load())
}

// putFaults replaces the failure-injection settings.
func (p *Pod) putFaults(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var f Faults
	if err := json.Unmarshal(body, &f); err != nil {
		writeError(w, http.StatusBadRequest, "invalid faults: "+err.Error())
		return
	}
	if err := f.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p.faults.Store(&f)
	writeJSON(w, http.StatusOK, &f)
}

// GPUUtilization is the pod's GPU utilisation in percent, as a DCGM
// exporter would report DCGM_FI_DEV_GPU_UTIL: the share of its
// --max-num-seqs running, or the gpu_utilization fault when set.
func (p *Pod) GPUUtilization() float64 {
	if f := p.faults.Load(); f != nil && f.GPUUtilization != nil {
		return *f.GPUUtilization
	}
	seqs := p.cfg.Engine.MaxNumSeqs
	if seqs <= 0 {
		return 0
	}
	return 100 * min(1, float64(p.engine.Snapshot().Running)/float64(seqs))
}
