package scorer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/scorer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestHeaderLabelAffinity(t *testing.T) {
	h := schedulingtest.NewHandle()
	s := schedulingtest.New[*scorer.HeaderLabelAffinity](t, h, scorer.HeaderLabelAffinityType, "zone",
		`{"headerName": "X-Preferred-Zone", "labelKey": "topology.kubernetes.io/zone"}`)
	eps := []*scheduling.Endpoint{
		schedulingtest.Endpoint("a", map[string]string{"topology.kubernetes.io/zone": "z1"}, nil),
		schedulingtest.Endpoint("b", map[string]string{"topology.kubernetes.io/zone": "z2"}, nil),
		schedulingtest.Endpoint("c", nil, nil),
	}
	score := func(headers map[string]string) string {
		scores := make([]float64, len(eps))
		s.Score(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{Headers: headers}, eps, scores)
		return fmt.Sprint(scores)
	}
	if got := score(map[string]string{"x-preferred-zone": "z2"}); got != "[0 1 0]" {
		t.Errorf("zone z2: %s", got)
	}
	if got := score(nil); got != "[0 0 0]" {
		t.Errorf("no header: %s", got)
	}
	for params, want := range map[string]string{`{"labelKey": "k"}`: "headerName", `{"headerName": "h"}`: "labelKey"} {
		if _, err := schedulingtest.NewErr(h, scorer.HeaderLabelAffinityType, "x", params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", params, err)
		}
	}
}
