package extproc

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/reservedheaders"
	"github.com/hermod/hermod/libs/scheduling"
)

// Header and metadata names of the GIE endpoint-picker protocol.
const (
	// DestinationHeader carries the chosen endpoints, "ip:port" primary
	// first then the fallbacks, comma-separated (as Envoy's override_host
	// load balancer reads it; an ORIGINAL_DST cluster reading the header
	// takes one address: run the picker with --fallbacks=0 for it);
	// DestinationNamespace and DestinationHeader name the same value in
	// the dynamic metadata.
	DestinationHeader    = reservedheaders.Destination
	DestinationNamespace = "envoy.lb"
	// SubsetNamespace and SubsetKey name the subset hint in the request's
	// metadata (a list of "ip:port"); SubsetKey is also a request header
	// (comma-separated), read here and never passed on: like every
	// x-gateway-destination-endpoint* header it is reserved.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	// ServedKey, in the response's metadata namespace DestinationNamespace,
	// names the endpoint that served (when the data plane reports it).
	ServedKey = "x-gateway-destination-endpoint-served"
	// RequestIDHeader is the request's id, kept when the client sent a
	// valid one.
	RequestIDHeader = "x-request-id"
)

// upstreamAddressAttr is Envoy's attribute of the upstream host's address
// (sent when listed in the filter's response_attributes).
const upstreamAddressAttr = "upstream.address"

// headerMap returns the headers of an HttpHeaders message by lower-case
// name, first value of each (Envoy sends raw_value; value is read when
// raw_value is empty).
func headerMap(hm *corev3.HeaderMap) map[string]string {
	hs := hm.GetHeaders()
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		k := strings.ToLower(h.GetKey())
		if _, dup := out[k]; dup {
			continue
		}
		v := h.GetValue()
		if raw := h.GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		out[k] = v
	}
	return out
}

// pickHeaders are the request headers the picker's plugins see: no
// pseudo-headers, credentials or transport headers, nor the routing
// headers a client may not set (reservedheaders).
func pickHeaders(h map[string]string, requestID string) map[string]string {
	out := make(map[string]string, len(h)+1)
	for k, v := range h {
		if strings.HasPrefix(k, ":") {
			continue
		}
		if !reservedheaders.Unseen(k) && !reservedheaders.Is(k) {
			out[k] = v
		}
	}
	out[RequestIDHeader] = requestID
	return out
}

// subsetHint returns the subset hint of a request: the metadata's list
// when present, else the header's. present is false when neither says
// anything; a present hint with no endpoint leaves no candidate.
func subsetHint(md *corev3.Metadata, h map[string]string) (subset []string, present bool) {
	if s, ok := md.GetFilterMetadata()[SubsetNamespace]; ok {
		if v, ok := s.GetFields()[SubsetKey]; ok {
			return stringList(v), true
		}
	}
	if v, ok := h[SubsetKey]; ok {
		return splitList(v), true
	}
	return nil, false
}

// stringList returns the strings of a metadata value: a list of strings,
// or one string of comma-separated items.
func stringList(v *structpb.Value) []string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		var out []string
		for _, e := range k.ListValue.GetValues() {
			if s := strings.TrimSpace(e.GetStringValue()); s != "" {
				out = append(out, s)
			}
		}
		return out
	case *structpb.Value_StringValue:
		return splitList(k.StringValue)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// servedAddress returns the endpoint the data plane says served the
// request: the ServedKey of its DestinationNamespace metadata, or the
// upstream.address attribute; "" when it says nothing.
func servedAddress(req *extprocv3.ProcessingRequest) string {
	if s, ok := req.GetMetadataContext().GetFilterMetadata()[DestinationNamespace]; ok {
		if v := strings.TrimSpace(s.GetFields()[ServedKey].GetStringValue()); v != "" {
			return v
		}
	}
	for _, attrs := range req.GetAttributes() {
		if v := attrs.GetFields()[upstreamAddressAttr].GetStringValue(); v != "" {
			return v
		}
	}
	return ""
}

// setHeader is a header mutation that replaces any value the header had.
func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// destinationMetadata is the dynamic metadata naming the destination:
// envoy.lb/x-gateway-destination-endpoint.
func destinationMetadata(dest string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		DestinationNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationHeader: structpb.NewStringValue(dest),
		}}),
	}}
}

// attributesMetadata is the dynamic metadata of reported attributes:
// {namespace: {name: value}}; nil when there are none.
func attributesMetadata(attrs []scheduling.Attribute) *structpb.Struct {
	if len(attrs) == 0 {
		return nil
	}
	md := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, a := range attrs {
		ns := md.Fields[a.Namespace].GetStructValue()
		if ns == nil {
			ns = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			md.Fields[a.Namespace] = structpb.NewStructValue(ns)
		}
		ns.Fields[a.Name] = structpb.NewNumberValue(a.Value)
	}
	return md
}

// labels are the exchange's metric labels: its model, priority and flow.
func (x *exchange) labels() giemetrics.Labels {
	l := giemetrics.Labels{Model: x.model, Priority: priorityOf(x.headers)}
	for _, h := range scheduling.FairnessHeaders {
		if v := x.headers[h]; v != "" {
			l.FairnessID = v
			break
		}
	}
	return l
}

// priorityOf is a request's priority from its headers (0 when absent or
// not an integer): ext_proc has no flow control to resolve an objective.
func priorityOf(h map[string]string) int {
	p, err := strconv.Atoi(h[scheduling.PriorityHeader])
	if err != nil {
		return 0
	}
	return p
}
