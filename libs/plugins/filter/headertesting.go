package filter

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// HeaderTestingType is the llm-d router's header-based-testing-filter,
// which conformance tests use to choose the endpoints a request may go
// to: it keeps, in the header's order, the endpoints the request's
// test-epp-endpoint-selection header lists (IPs or IP:port, comma
// separated), and none when the header is absent. A client chooses its
// endpoint with it: declare it in test configurations only.
const HeaderTestingType = "header-based-testing-filter"

// TestEndpointSelectionHeader is the header header-based-testing-filter
// reads.
const TestEndpointSelectionHeader = "test-epp-endpoint-selection"

// maxTestSelections bounds the entries of the header looked at.
const maxTestSelections = 64

func init() {
	scheduling.Register(scheduling.Registration{Type: HeaderTestingType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		h.Warn(HeaderTestingType + ": a client's test-epp-endpoint-selection header chooses its endpoints: for conformance tests, not for a production pool")
		return &HeaderTesting{Named: scheduling.Named{Type: HeaderTestingType, Name: name}}, nil
	}})
}

// HeaderTesting is header-based-testing-filter.
type HeaderTesting struct {
	scheduling.Named
}

// Filter implements scheduling.Filter.
func (f *HeaderTesting) Filter(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	items := strings.Split(req.Header(TestEndpointSelectionHeader), ",")
	if len(items) > maxTestSelections {
		items = items[:maxTestSelections]
	}
	start := len(dst)
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		host, port := strings.Trim(item, "[]"), 0
		if h, p, err := net.SplitHostPort(item); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			host, port = strings.Trim(h, "[]"), n
		}
		for _, e := range in {
			if e.Address != host || (port != 0 && e.Port != port) || containsEndpoint(dst[start:], e) {
				continue
			}
			dst = append(dst, e)
			break
		}
	}
	return dst
}

func containsEndpoint(eps []*scheduling.Endpoint, e *scheduling.Endpoint) bool {
	for _, x := range eps {
		if x == e {
			return true
		}
	}
	return false
}
