package filter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/filter"
	"github.com/hermod/hermod/libs/plugins/predictedlatency/predictiontest"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestSLOHeadroomTiers(t *testing.T) {
	eps := schedulingtest.Endpoints(4)
	p := predictiontest.New()
	p.By[eps[0].Name] = predictiontest.Headrooms(100, 5, 1)
	p.By[eps[1].Name] = predictiontest.Headrooms(10, -5, 1)
	p.By[eps[2].Name] = predictiontest.Headrooms(0, 0, 1)
	// eps[3]: no prediction, in the negative tier
	h := schedulingtest.NewHandle().Declare(p)
	keep := func(params string) string {
		f := schedulingtest.New[*filter.SLOHeadroomTier](t, h, filter.SLOHeadroomTierType, "tier", params)
		var names []string
		for _, e := range f.Filter(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{}, eps, nil) {
			names = append(names, e.Name)
		}
		return strings.Join(names, ",")
	}
	if got, want := keep(`{"epsilonExploreNeg": 0}`), eps[0].Name+","+eps[2].Name; got != want {
		t.Errorf("kept %s, want the tier meeting both SLOs %s", got, want)
	}
	if got, want := keep(`{"epsilonExploreNeg": 1}`), eps[1].Name+","+eps[3].Name; got != want {
		t.Errorf("exploring: kept %s, want %s", got, want)
	}
	p.By = map[string]scheduling.Prediction{}
	if got := strings.Count(keep(""), ",") + 1; got != 4 {
		t.Errorf("without predictions: kept %d, want all", got)
	}
	if _, err := schedulingtest.NewErr(h, filter.SLOHeadroomTierType, "x", `{"epsilonExploreNeg": 2}`); err == nil {
		t.Error("epsilonExploreNeg 2 accepted")
	}
}
