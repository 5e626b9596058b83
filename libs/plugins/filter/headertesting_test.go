package filter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/filter"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestHeaderTestingFilterKeepsTheListedEndpoints(t *testing.T) {
	f := schedulingtest.New[*filter.HeaderTesting](t, schedulingtest.NewHandle(), filter.HeaderTestingType, "select", "")
	eps := []*scheduling.Endpoint{
		scheduling.NewEndpoint("a", "10.0.0.1", 8000, nil),
		scheduling.NewEndpoint("b", "10.0.0.2", 8000, nil),
		scheduling.NewEndpoint("b2", "10.0.0.2", 8001, nil),
		scheduling.NewEndpoint("v6", "fd00::7", 8000, nil),
	}
	keep := func(header string) string {
		var names []string
		req := &scheduling.Request{Headers: map[string]string{filter.TestEndpointSelectionHeader: header}}
		for _, e := range f.Filter(context.Background(), schedulingtest.CycleState(1), req, eps, nil) {
			names = append(names, e.Name)
		}
		return strings.Join(names, ",")
	}
	for header, want := range map[string]string{
		"10.0.0.2:8001, 10.0.0.1": "b2,a",
		"10.0.0.2":                "b",
		"[fd00::7]:8000,10.0.0.9": "v6",
		"10.0.0.1,10.0.0.1:8000":  "a",
		"":                        "",
		"10.0.0.1:http":           "",
	} {
		if got := keep(header); got != want {
			t.Errorf("%q: kept %q, want %q", header, got, want)
		}
	}
}
