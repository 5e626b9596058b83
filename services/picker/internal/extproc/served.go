package extproc

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/hermod/hermod/libs/scheduling"
)

// verifyServed runs the served verifiers (Options.Served) on a response
// whose headers arrived, with the dynamic metadata the data plane sent
// with them, and returns the headers they set (nil: none, or no
// verifiers).
func (x *exchange) verifyServed(req *extprocv3.ProcessingRequest) []*corev3.HeaderValueOption {
	if x.s.o.Served == nil {
		return nil
	}
	resp := &scheduling.ServedResponse{RequestID: x.requestID, Metadata: metadataValues(req.GetMetadataContext())}
	for _, t := range x.pick.GetTargets() {
		if a := t.GetAddress(); a != "" {
			resp.Chosen = append(resp.Chosen, a)
		}
	}
	x.s.o.Served(x.ctx, resp)
	if len(resp.Headers) == 0 {
		return nil
	}
	return sortedHeaders(resp.Headers)
}

// metadataValues returns the untyped filter metadata of md by namespace,
// as JSON values; nil when there is none.
func metadataValues(md *corev3.Metadata) map[string]any {
	fm := md.GetFilterMetadata()
	if len(fm) == 0 {
		return nil
	}
	out := make(map[string]any, len(fm))
	for ns, s := range fm {
		out[ns] = s.AsMap()
	}
	return out
}
