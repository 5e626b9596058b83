// Package giemetrics holds the metric families of the Gateway API
// Inference Extension's endpoint picker, with its names, labels and
// buckets, so that dashboards and alerts written for GIE and llm-d work
// on Hermod unchanged. Each service registers the families it observes:
// the objective (per-request) family by both ways in (the gateway and the
// picker's ext_proc server), the pool gauges and the build info by the
// picker, the prefix indexer's by prefix-cache-scorer, the flow-control
// family by the gateway's flow control, the scheduler's by libs/scheduling.
package giemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/telemetry"
)

// Buckets of the upstream histograms, as upstream lists them (two of its
// size and token buckets say 32778 where 32768 was meant; they are kept,
// so that bucket boundaries match series for series).
var (
	GeneralLatencyBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20,
		30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	TPOTBuckets = []float64{0.0005, 0.00205, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8,
		1, 1.5, 2, 3, 4.5, 6, 12, 18, 24, 30, 36, 48, 60, 90, 120, 180, 270, 360}
	RequestSizeBuckets = []float64{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288,
		1048576, 2097152, 4194304, 8388608, 16777216, 33554432, 67108864, 134217728, 268435456, 536870912, 1073741824}
	ResponseSizeBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536}
	InputTokenBuckets   = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536, 131072,
		262144, 524288, 1048576}
	OutputTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}
	NTPOTBuckets       = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0}
	FastBuckets        = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}
	FlowQueueBuckets   = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0}
	RatioBuckets       = []float64{0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
	HitBytesBuckets    = []float64{0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}
)

// EPPPrefix is the llm-d router's name prefix for its endpoint picker's
// metrics (v0.9+); GIE's inference_* names are its deprecated aliases,
// and both are served.
const EPPPrefix = "llm_d_epp_"

// help prefixes the upstream help texts' stability level.
func help(s string) string { return "[ALPHA] " + s }

// RegisterInfo registers inference_extension_info{commit, build_ref} = 1,
// from the binary's build information.
func RegisterInfo(reg prometheus.Registerer) error {
	b := telemetry.BuildInfo()
	commit, ref := b.Commit, b.Version
	g := telemetry.NewGaugeVec("inference_extension_info", help("General information of the current build of Inference Extension."), "commit", "build_ref")
	if err := reg.Register(g); err != nil {
		return err
	}
	g.WithLabelValues(commit, ref).Set(1)
	return nil
}
