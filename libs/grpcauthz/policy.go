package grpcauthz

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
)

// Special callers in a rule.
const (
	// AnyCaller allows every caller, with or without a certificate.
	AnyCaller = "*"
	// Authenticated allows every caller whose certificate the CA verified,
	// whatever its identity.
	Authenticated = "authenticated"
)

// Full method names of services Hermod serves but does not define.
const (
	// ExtProcProcess is Envoy's external-processing stream (the picker
	// serves it; GIE endpoint-picker protocol).
	ExtProcProcess = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
	// HealthService matches every method of gRPC health checking.
	HealthService = "/grpc.health.v1.Health/*"
)

// Identities of Hermod's peers.
const (
	Gateway = "gateway"
	Picker  = "picker"
	Envoy   = "envoy"
)

// Policy says which callers may call which methods. A key is a full
// method name ("/pkg.Service/Method"), every method of a service
// ("/pkg.Service/*") or every method ("*"); the most specific key that
// matches decides. A method no key matches is denied. It is read-only
// once built.
type Policy struct {
	rules map[string]rule
}

type rule struct {
	any, authenticated bool
	ids                []string
}

// DefaultPolicy is the table of who calls whom in Hermod:
//
//	picker    PickerService/Pick, /Complete       <- gateway
//	picker    ExternalProcessor/Process (ext_proc) <- envoy
//	indexer   IndexerService/Score, /Lookup       <- picker
//	responses ResponsesStore/* (each method)      <- gateway
//	any       grpc.health.v1.Health/*             <- any caller
//
// (The picker's ext_proc path does not use the responses store: only the
// gateway's /v1/responses does.)
func DefaultPolicy() *Policy {
	p, err := NewPolicy(defaultRules())
	if err != nil {
		panic(fmt.Sprintf("grpcauthz: the default policy is invalid: %v", err)) // a test holds it valid
	}
	return p
}

func defaultRules() map[string][]string {
	r := map[string][]string{
		pickerv1.PickerService_Pick_FullMethodName:     {Gateway},
		pickerv1.PickerService_Complete_FullMethodName: {Gateway},
		ExtProcProcess: {Envoy},
		indexerv1.IndexerService_Score_FullMethodName:  {Picker},
		indexerv1.IndexerService_Lookup_FullMethodName: {Picker},
		HealthService: {AnyCaller},
	}
	for _, m := range responsesv1.ResponsesStore_ServiceDesc.Methods {
		r["/"+responsesv1.ResponsesStore_ServiceDesc.ServiceName+"/"+m.MethodName] = []string{Gateway}
	}
	return r
}

// NewPolicy builds a policy from rules: method key -> callers (identity
// names, AnyCaller or Authenticated).
func NewPolicy(rules map[string][]string) (*Policy, error) {
	p := &Policy{rules: make(map[string]rule, len(rules))}
	for key, callers := range rules {
		if err := validKey(key); err != nil {
			return nil, err
		}
		var r rule
		for _, c := range callers {
			switch {
			case c == AnyCaller:
				r.any = true
			case c == Authenticated:
				r.authenticated = true
			case validName(c):
				r.ids = append(r.ids, c)
			default:
				return nil, fmt.Errorf("method %s: caller %q: want an identity name (lower-case letters, digits, dashes: the <name> of %s<name>), %q or %q",
					key, c, IdentityURIPrefix, AnyCaller, Authenticated)
			}
		}
		slices.Sort(r.ids)
		r.ids = slices.Compact(r.ids)
		p.rules[key] = r
	}
	return p, nil
}

func validKey(key string) error {
	if key == "*" {
		return nil
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(key, "/"), "/")
	if !strings.HasPrefix(key, "/") || !ok || svc == "" || method == "" || strings.ContainsAny(method, "/*") && method != "*" || strings.Contains(svc, "*") {
		return fmt.Errorf("method %q: want /package.Service/Method, /package.Service/* or *", key)
	}
	return nil
}

// Allowed says whether the caller may call the full method name.
func (p *Policy) Allowed(fullMethod string, caller Peer) bool {
	r, ok := p.match(fullMethod)
	if !ok {
		return false
	}
	switch {
	case r.any:
		return true
	case !caller.Verified:
		return false
	case r.authenticated:
		return true
	}
	return caller.Identity != "" && slices.Contains(r.ids, caller.Identity)
}

func (p *Policy) match(fullMethod string) (rule, bool) {
	if r, ok := p.rules[fullMethod]; ok {
		return r, true
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if r, ok := p.rules[fullMethod[:i]+"/*"]; ok {
			return r, true
		}
	}
	r, ok := p.rules["*"]
	return r, ok
}

// Rules are the policy's rules: method key -> callers, sorted.
func (p *Policy) Rules() map[string][]string {
	out := make(map[string][]string, len(p.rules))
	for key, r := range p.rules {
		var callers []string
		if r.any {
			callers = append(callers, AnyCaller)
		}
		if r.authenticated {
			callers = append(callers, Authenticated)
		}
		out[key] = append(callers, r.ids...)
	}
	return out
}

// Merge is p with the rules of o replacing p's for the same keys.
func (p *Policy) Merge(o *Policy) *Policy {
	out := &Policy{rules: maps.Clone(p.rules)}
	maps.Copy(out.rules, o.rules)
	return out
}
