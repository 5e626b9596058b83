package grpcauthz

import (
	"crypto/x509"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/testkit/certs"
)

var (
	gateway  = Peer{Verified: true, Identity: Gateway}
	picker   = Peer{Verified: true, Identity: Picker}
	envoy    = Peer{Verified: true, Identity: Envoy}
	nameless = Peer{Verified: true}
	anon     = Peer{}
)

// The default table, method by method.
func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		method string
		allow  []Peer
		deny   []Peer
	}{
		{pickerv1.PickerService_Pick_FullMethodName, []Peer{gateway}, []Peer{picker, envoy, nameless, anon}},
		{pickerv1.PickerService_Complete_FullMethodName, []Peer{gateway}, []Peer{picker, envoy, nameless, anon}},
		{ExtProcProcess, []Peer{envoy}, []Peer{gateway, picker, nameless, anon}},
		{indexerv1.IndexerService_Score_FullMethodName, []Peer{picker}, []Peer{gateway, envoy, nameless, anon}},
		{indexerv1.IndexerService_Lookup_FullMethodName, []Peer{picker}, []Peer{gateway, anon}},
		{responsesv1.ResponsesStore_Put_FullMethodName, []Peer{gateway}, []Peer{picker, envoy, nameless, anon}},
		{responsesv1.ResponsesStore_Get_FullMethodName, []Peer{gateway}, []Peer{picker, anon}},
		{responsesv1.ResponsesStore_GetChain_FullMethodName, []Peer{gateway}, []Peer{picker, anon}},
		{responsesv1.ResponsesStore_Submit_FullMethodName, []Peer{gateway}, []Peer{picker, anon}},
		{"/grpc.health.v1.Health/Check", []Peer{gateway, picker, nameless, anon}, nil},
		{"/grpc.health.v1.Health/Watch", []Peer{anon}, nil},
		{"/hermod.picker.v1.PickerService/Unknown", nil, []Peer{gateway, anon}},
		{"/other.Service/Method", nil, []Peer{gateway, picker, envoy, nameless, anon}},
	} {
		for _, who := range c.allow {
			if !p.Allowed(c.method, who) {
				t.Errorf("%s denied to %s", c.method, who)
			}
		}
		for _, who := range c.deny {
			if p.Allowed(c.method, who) {
				t.Errorf("%s allowed to %s", c.method, who)
			}
		}
	}
}

// Every method Hermod serves has a rule: a method added to a proto is
// denied until the table says who calls it, and this test says so.
func TestDefaultPolicyCoversEveryMethod(t *testing.T) {
	rules := DefaultPolicy().Rules()
	for _, sd := range []grpc.ServiceDesc{pickerv1.PickerService_ServiceDesc, indexerv1.IndexerService_ServiceDesc, responsesv1.ResponsesStore_ServiceDesc} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, n := range names {
			if _, ok := rules["/"+sd.ServiceName+"/"+n]; !ok {
				t.Errorf("no default rule for /%s/%s", sd.ServiceName, n)
			}
		}
	}
}

func TestPolicyMatchingAndMerge(t *testing.T) {
	p, err := NewPolicy(map[string][]string{
		"/a.S/M": {"x"},
		"/a.S/*": {Authenticated},
		"*":      {AnyCaller},
	})
	if err != nil {
		t.Fatal(err)
	}
	x, y := Peer{Verified: true, Identity: "x"}, Peer{Verified: true, Identity: "y"}
	for _, c := range []struct {
		method string
		who    Peer
		want   bool
	}{
		{"/a.S/M", x, true}, {"/a.S/M", y, false}, {"/a.S/M", anon, false},
		{"/a.S/N", y, true}, {"/a.S/N", nameless, true}, {"/a.S/N", anon, false},
		{"/b.T/M", anon, true},
	} {
		if got := p.Allowed(c.method, c.who); got != c.want {
			t.Errorf("%s by %s: %v, want %v", c.method, c.who, got, c.want)
		}
	}
	q, _ := NewPolicy(map[string][]string{"/a.S/M": {"y"}})
	m := p.Merge(q)
	if !m.Allowed("/a.S/M", y) || m.Allowed("/a.S/M", x) || !p.Allowed("/a.S/M", x) {
		t.Error("merge: the override does not replace the rule, or changed the base")
	}
	for _, bad := range []map[string][]string{
		{"a.S/M": {"x"}}, {"/a.S": {"x"}}, {"/a.S/M/N": {"x"}}, {"/*/M": {"x"}}, {"/a.S/M*": {"x"}},
		{"/a.S/M": {"Gateway"}}, {"/a.S/M": {"spiffe://hermod/x"}}, {"/a.S/M": {""}},
	} {
		if _, err := NewPolicy(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestIdentityOf(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		uris []string
		want string
	}{
		{[]string{"spiffe://hermod/gateway"}, "gateway"},
		{[]string{"https://example.com/x", "spiffe://hermod/picker"}, "picker"},
		{[]string{"spiffe://other/gateway"}, ""},
		{[]string{"spiffe://hermod/a/b"}, ""},
		{[]string{"spiffe://hermod/Gateway"}, ""},
		{[]string{"spiffe://hermod/gateway?x=1"}, ""},
		{[]string{"spiffe://hermod/gateway", "spiffe://hermod/picker"}, ""},
		{[]string{"spiffe://hermod/gateway", "spiffe://hermod/gateway"}, "gateway"},
		{nil, ""},
	} {
		cert := &x509.Certificate{}
		for _, s := range c.uris {
			cert.URIs = append(cert.URIs, u(s))
		}
		if got := IdentityOf(cert); got != c.want {
			t.Errorf("%v: %q, want %q", c.uris, got, c.want)
		}
	}
	// the testkit's certificates follow the scheme
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Client("gateway")
	if err != nil {
		t.Fatal(err)
	}
	if got := IdentityOf(kp.Cert); got != Gateway || certs.IdentityURI("x").String() != IdentityURIPrefix+"x" {
		t.Errorf("testkit certificate identity %q", got)
	}
	if s := (Peer{Verified: true, Identity: "gateway"}).String(); s != "spiffe://hermod/gateway" {
		t.Error(s)
	}
	if anon.String() != "anonymous" || !strings.HasPrefix(nameless.String(), "authenticated") {
		t.Error(anon.String(), nameless.String())
	}
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
