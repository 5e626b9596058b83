package coord

import (
	"fmt"
	"testing"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func TestOwnershipSplitsEndpointsAmongMembers(t *testing.T) {
	var eps []*registryv1.Endpoint
	for i := range 40 {
		eps = append(eps, &registryv1.Endpoint{Name: fmt.Sprintf("pod-%d", i), Pool: "p"})
	}
	members := []string{"a", "b", "c"}
	got := map[string][]*registryv1.Endpoint{}
	owners := map[string]*Ownership{}
	for _, m := range members {
		o := NewOwnership("p", m, func(mine []*registryv1.Endpoint) { got[m] = mine })
		if o.Ready() == nil {
			t.Fatal("ready before listing")
		}
		o.SetEndpoints(eps)
		if o.Ready() == nil {
			t.Fatal("ready before joining")
		}
		o.SetMembers(members)
		if err := o.Ready(); err != nil {
			t.Fatal(err)
		}
		owners[m] = o
	}
	seen := map[string]string{}
	for m, mine := range got {
		if len(mine) == 0 {
			t.Fatalf("%s owns nothing of 40 endpoints", m)
		}
		for _, ep := range mine {
			if other, dup := seen[ep.GetName()]; dup {
				t.Fatalf("%s owned by %s and %s", ep.GetName(), other, m)
			}
			seen[ep.GetName()] = m
		}
	}
	if len(seen) != len(eps) {
		t.Fatalf("%d of %d endpoints owned", len(seen), len(eps))
	}
	// a replica that does not see itself among the members acts alone
	// rather than dropping its endpoints
	owners["a"].SetMembers([]string{"b", "c"})
	if len(got["a"]) == 0 {
		t.Fatal("a replica missing from the members owns nothing")
	}
}
