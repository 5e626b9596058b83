package profilehandler_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// header-profile-handler runs the profile EPP-Profile names, the default
// one without it, and refuses a profile the pool does not have.
func TestHeaderProfileHandler(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: header-profile-handler
  parameters: {defaultProfile: fast}
- {type: by-label, name: gold, parameters: {label: tier, validValues: [gold]}}
- {type: max-score-picker}
schedulingProfiles:
- name: fast
  plugins: [{pluginRef: max-score-picker}]
- name: gold
  plugins: [{pluginRef: gold}, {pluginRef: max-score-picker}]
`)
	eps := schedulingtest.Endpoints(3)
	eps[2].Labels = map[string]string{"tier": "gold"}
	ask := func(profile string) (*scheduling.Result, error) {
		r := schedulingtest.Completion("r", "m", "hi")
		if profile != "" {
			r.Headers = map[string]string{"epp-profile": profile}
		}
		return s.Schedule(context.Background(), r, eps)
	}
	for range 10 {
		res, err := ask("gold")
		if err != nil {
			t.Fatal(err)
		}
		if res.Primary.Profile != "gold" || res.Target().Endpoint.Name != "pod-2" {
			t.Fatalf("gold: profile %s, target %s", res.Primary.Profile, res.Target().Endpoint.Name)
		}
		res.Release()
	}
	res, err := ask("")
	if err != nil || res.Primary.Profile != "fast" {
		t.Fatalf("no header: %v", err)
	}
	res.Release()
	_, err = ask("slow")
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindBadRequest || !strings.Contains(se.Msg, `"slow" is not a profile`) {
		t.Errorf("unknown profile: %v", err)
	}
	c, err := scheduling.ParseConfig([]byte("plugins: [{type: header-profile-handler}, {type: max-score-picker}]\nschedulingProfiles: [{name: a, plugins: [{pluginRef: max-score-picker}]}, {name: b, plugins: [{pluginRef: max-score-picker}]}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduling.New(c); err == nil || !strings.Contains(err.Error(), `defaultProfile "decode" is not a configured profile`) {
		t.Errorf("default profile missing: %v", err)
	}
}
