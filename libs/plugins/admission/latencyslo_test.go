package admission_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hermod/hermod/libs/plugins/admission"
	"github.com/hermod/hermod/libs/plugins/predictedlatency/predictiontest"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestLatencySLOAdmitter(t *testing.T) {
	eps := schedulingtest.Endpoints(2)
	for _, e := range eps {
		e.Metrics = &scheduling.Metrics{KVCacheUsage: 0.5}
	}
	p := predictiontest.New()
	p.By[eps[0].Name] = predictiontest.Headrooms(-10, 5, 2)
	p.By[eps[1].Name] = predictiontest.Headrooms(50, -5, 1)
	a := schedulingtest.New[*admission.LatencySLO](t, schedulingtest.NewHandle().Declare(p), admission.LatencySLOAdmitterType, "slo", "")
	admit := func(priority string) error {
		return a.Admit(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{Headers: map[string]string{scheduling.PriorityHeader: priority}}, eps)
	}
	var se *scheduling.Error
	if err := admit("-1"); !errors.As(err, &se) || se.Kind != scheduling.KindShed {
		t.Fatalf("a sheddable request no endpoint serves in time: %v", err)
	}
	if err := admit("0"); err != nil {
		t.Fatalf("a request that is not sheddable: %v", err)
	}
	p.By[eps[1].Name] = predictiontest.Headrooms(50, -5, 0) // idle
	if err := admit("-1"); err != nil {
		t.Fatalf("an idle endpoint: %v", err)
	}
	p.By[eps[1].Name] = predictiontest.Headrooms(50, -5, 3)
	eps[0].Metrics.KVCacheUsage = 0.01 // cold: predictions unreliable
	if err := admit("-1"); err != nil {
		t.Fatalf("a cold endpoint: %v", err)
	}
	eps[0].Metrics.KVCacheUsage = 0.5
	p.By[eps[0].Name] = predictiontest.Headrooms(10, 5, 3)
	if err := admit("-1"); err != nil {
		t.Fatalf("an endpoint meeting the SLOs: %v", err)
	}
}
