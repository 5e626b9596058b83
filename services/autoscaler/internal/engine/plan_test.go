package engine

import (
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// A scale-up follows the fleet as it is now; a scale-down needs the whole
// window to allow it.
func TestCombineUpSinceSettledDownOverTheWindow(t *testing.T) {
	up := scaling.Analysis{Role: scaling.RoleBoth, Required: 1}
	hold := scaling.Analysis{Role: scaling.RoleBoth, Hold: true}
	quiet := scaling.Analysis{Role: scaling.RoleBoth, Spare: 2, Reasons: []string{"since"}}
	none := scaling.Analysis{Role: scaling.RoleBoth}
	spareFull := scaling.Analysis{Role: scaling.RoleBoth, Spare: 1, Reasons: []string{"full"}}
	cases := []struct {
		name          string
		since, full   scaling.Analysis
		required, spr float64
	}{
		{"the fleet falls short now", up, none, 1, 0},
		{"hold wins", hold, spareFull, 0, 0},
		{"quiet now, busy earlier in the minute: no scale-down", quiet, none, 0, 0},
		{"quiet over the whole minute: scale down", quiet, spareFull, 0, 1},
		{"nothing now, spare over the minute", none, spareFull, 0, 1},
	}
	for _, c := range cases {
		got := combine([]scaling.Analysis{c.since}, []scaling.Analysis{c.full})
		if len(got) != 1 || got[0].Required != c.required || got[0].Spare != c.spr {
			t.Errorf("%s: %+v, want required %v spare %v", c.name, got, c.required, c.spr)
		}
	}
	// roles are matched
	got := combine([]scaling.Analysis{{Role: scaling.RolePrefill}, {Role: scaling.RoleDecode, Required: 2}},
		[]scaling.Analysis{{Role: scaling.RoleDecode, Spare: 3}, {Role: scaling.RolePrefill, Spare: 1}})
	if got[0].Spare != 1 || got[1].Required != 2 || got[1].Spare != 0 {
		t.Fatalf("roles: %+v", got)
	}
}
