package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// smallRouting is the routing benchmark at a tenth of its size, on the
// round-robin and load-aware configs (which exist in every build).
func smallRouting() RoutingOptions {
	o := DefaultRouting()
	o.Workload.Total, o.Workload.HeavySeeds = 80, 40
	o.Hetero.Workload.Requests = 100
	o.Orders = 3
	o.Policies = []string{"round-robin", "load-aware"}
	return o
}

func TestRoutingSpecs(t *testing.T) {
	o := smallRouting()
	specs, err := RoutingSpecs(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3*3*2 {
		t.Fatalf("%d specs, want 3 fleets x 3 orders x 2 policies", len(specs))
	}
	ref, err := workload.Reference(o.Workload)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for i, s := range specs {
		if err := s.validate(); err != nil {
			t.Fatal(err)
		}
		if names[s.Name] {
			t.Fatalf("two runs named %s", s.Name)
		}
		names[s.Name] = true
		// fleets, then orders, then policies
		if want := o.Fleets[i/6]; s.Scenario != want || s.Order != (i/2)%3 || s.Stack.Policy != o.Policies[i%2] {
			t.Fatalf("spec %d: %s %s order %d", i, s.Scenario, s.Stack.Policy, s.Order)
		}
		if !strings.Contains(s.Stack.Config, "kind: EndpointPickerConfig") {
			t.Fatalf("%s config %q", s.Name, s.Stack.Config)
		}
		if i%2 == 1 {
			// the policies of an order share its fleet and workload
			if prev := specs[i-1]; prev.Workload != s.Workload || !reflect.DeepEqual(prev.Fleet, s.Fleet) {
				t.Fatalf("%s and %s do not share one fleet and one workload", prev.Name, s.Name)
			}
		}
		speeds := s.Fleet.SpeedList()
		switch s.Scenario {
		case ScenarioIdentical, ScenarioSlow:
			if len(s.Workload.Requests) != 80 || s.Workload.Name != "reference" {
				t.Fatalf("%s: workload %s of %d requests", s.Name, s.Workload.Name, len(s.Workload.Requests))
			}
			if s.Order == 0 && !reflect.DeepEqual(s.Workload.Requests, ref.Requests) {
				t.Fatalf("%s: order 0 is not the reference's", s.Name)
			}
			if s.Order > 0 && reflect.DeepEqual(s.Workload.Requests, ref.Requests) {
				t.Fatalf("%s: order %d is the reference's", s.Name, s.Order)
			}
			if want := map[string]string{ScenarioIdentical: "1,1,1,1", ScenarioSlow: "1,1,1,0.5"}[s.Scenario]; speeds != want {
				t.Fatalf("%s: pod speeds %s, want %s", s.Name, speeds, want)
			}
		case ScenarioHetero:
			if len(s.Workload.Requests) != 100 || s.Workload.Name != "mixed" || speeds != "1,1,0.5,2" {
				t.Fatalf("%s: workload %s of %d requests on %s", s.Name, s.Workload.Name, len(s.Workload.Requests), speeds)
			}
		}
	}
	// the hetero orders are seeds of one Poisson process: different
	// arrivals of the same requests
	h0, h1 := specs[12].Workload, specs[14].Workload
	if h0.Requests[0].At == h1.Requests[0].At || len(h0.Requests) != len(h1.Requests) {
		t.Fatal("the hetero orders have the same arrivals")
	}
}

func TestRoutingOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*RoutingOptions)
		want string
	}{
		{"no orders", func(o *RoutingOptions) { o.Orders = 0 }, "orders: must be at least 1 (got 0)"},
		{"unknown fleet", func(o *RoutingOptions) { o.Fleets = []string{"identical", "fast"} }, `fleets: unknown scenario "fast" (have identical, slow, hetero)`},
		{"fleet twice", func(o *RoutingOptions) { o.Fleets = []string{"slow", "slow"} }, "fleets: slow given twice"},
		{"no fleet", func(o *RoutingOptions) { o.Fleets = nil }, "fleets: at least one scenario required"},
		{"missing config", func(o *RoutingOptions) { o.Policies = []string{"round-robin", "nope"} }, `policies: no benchmark config "nope" (configs/nope.yaml; have `},
		{"policy twice", func(o *RoutingOptions) { o.Policies = []string{"round-robin", "round-robin"} }, "policies: round-robin given twice"},
		{"no policy", func(o *RoutingOptions) { o.Policies = nil }, "policies: at least one required"},
		{"no pickers", func(o *RoutingOptions) { o.Pickers = 0 }, "pickers: must be positive"},
		{"fleet", func(o *RoutingOptions) { o.Fleet.Speed = 0 }, "fleet: speed must be positive"},
		{"hetero load", func(o *RoutingOptions) { o.Hetero.Load = 0 }, "hetero: load must be positive"},
		{"hetero speeds", func(o *RoutingOptions) { o.Hetero.PodSpeed = []float64{1, 0} }, "hetero: pod 1: speed must be a positive number (got 0)"},
		{"hetero rate", func(o *RoutingOptions) { o.Hetero.Workload.Rate = -1 }, "hetero: rate must be positive, or 0 to follow the load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := smallRouting()
			tc.edit(&o)
			_, err := RoutingSpecs(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// the hetero options matter only when the hetero fleet runs
	o := smallRouting()
	o.Fleets, o.Hetero.Load = []string{ScenarioIdentical}, 0
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

// At the default rate the hetero workload offers 55-65% of the fleet's
// capacity on the ideal bound's cost model (whose perfect batching no
// pod reaches: the pods are busier than that).
func TestHeteroDefaultLoad(t *testing.T) {
	h := DefaultHetero()
	f := HeteroFleet(RoutingFleet(), h.PodSpeed)
	rate, err := HeteroRate(h.Workload, f, h.Load)
	if err != nil {
		t.Fatal(err)
	}
	h.Workload.Rate = rate
	w, err := workload.Mixed(h.Workload)
	if err != nil {
		t.Fatal(err)
	}
	b := IdealBound(w, f)
	perRequest := b.Work / float64(len(w.Requests))
	if load := rate * perRequest / b.Capacity; math.Abs(load-0.6) > 1e-9 {
		t.Fatalf("rate %.2f/s offers %.3f of the capacity", rate, load)
	}
	// the Poisson process's actual offer over its arrivals
	if load := b.Work / (b.Capacity * w.Duration().Seconds()); load < 0.55 || load > 0.65 {
		t.Fatalf("the default workload offers %.3f of the capacity over its %.0fs", load, w.Duration().Seconds())
	}
	if b.Capacity != 4.5 || rate < 5 || rate > 20 {
		t.Fatalf("capacity %v, rate %v", b.Capacity, rate)
	}
}

func TestAvailablePolicies(t *testing.T) {
	have, missing := AvailablePolicies([]string{"round-robin", "no-such-policy", "load-aware"})
	if !slices.Equal(have, []string{"round-robin", "load-aware"}) || !slices.Equal(missing, []string{"no-such-policy"}) {
		t.Fatalf("have %v, missing %v", have, missing)
	}
	for _, p := range DefaultRouting().Policies {
		if !slices.Contains(RoutingPolicies, p) || !slices.Contains(Configs(), p) {
			t.Fatalf("default policy %s", p)
		}
	}
	if !slices.Contains(Configs(), "round-robin") || !slices.IsSorted(Configs()) {
		t.Fatalf("configs %v", Configs())
	}
}

func TestFleetSpeeds(t *testing.T) {
	f := RoutingFleet()
	if s := f.SpeedList(); s != "1,1,1,1" {
		t.Fatalf("speeds %s", s)
	}
	f.SlowPods, f.SlowSpeed = 1, 0.5
	if s := SlowFleet(f).SpeedList(); s != "1,1,1,0.25" {
		t.Fatalf("slow fleet of a fleet with a slow pod: %s", s)
	}
	g := f.WithPodSpeeds([]float64{1, 2, 0.5})
	if g.Pods != 3 || g.SlowPods != 0 || !slices.Equal(g.PodSpeeds(), []float64{1, 2, 0.5}) {
		t.Fatalf("fleet %+v", g)
	}
	g.PodSpeeds()[0] = 9 // a copy
	if g.PodSpeed[0] != 1 {
		t.Fatal("PodSpeeds returned the fleet's own slice")
	}
	for _, tc := range []struct {
		edit func(*Fleet)
		want string
	}{
		{func(f *Fleet) { f.Pods = 4 }, "fleet: 3 pod speeds for 4 pods"},
		{func(f *Fleet) { f.SlowPods = 1 }, "fleet: pod speeds and slow pods are exclusive"},
		{func(f *Fleet) { f.PodSpeed[1] = math.Inf(1) }, "fleet: pod 1: speed must be a positive number"},
	} {
		bad := g.WithPodSpeeds(g.PodSpeed)
		tc.edit(&bad)
		if err := bad.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate = %v, want %q", err, tc.want)
		}
	}
}

func TestParsePodSpeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float64
		err  string
	}{
		{in: "1,1,1,0.5", want: []float64{1, 1, 1, 0.5}},
		{in: " 2 , 0.25", want: []float64{2, 0.25}},
		{in: "", err: "no pod speeds"},
		{in: "1,,2", err: `pod 1: speed "" is not a number`},
		{in: "1,fast", err: `pod 1: speed "fast" is not a number`},
		{in: "1,-1", err: "pod 1: speed must be a positive number (got -1)"},
		{in: "0", err: "pod 0: speed must be a positive number (got 0)"},
		{in: "NaN", err: "pod 0: speed must be a positive number (got NaN)"},
		{in: "1,Inf", err: "pod 1: speed must be a positive number (got +Inf)"},
	} {
		got, err := ParsePodSpeeds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePodSpeeds(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParsePodSpeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestDevstackSpeedArgs(t *testing.T) {
	for _, tc := range []struct {
		speeds []float64
		want   []string
		perPod bool
	}{
		{[]float64{1, 1, 1, 1}, []string{"--slow-pods", "0"}, false},
		{[]float64{1, 1, 1, 0.5}, []string{"--slow-pods", "1", "--slow-speed", "0.5"}, false},
		{[]float64{1, 0.25, 0.25}, []string{"--slow-pods", "2", "--slow-speed", "0.25"}, false},
		{[]float64{2, 2}, []string{"--slow-pods", "2", "--slow-speed", "2"}, false},
		{[]float64{1, 1, 0.5, 2}, []string{"--pod-speeds", "1,1,0.5,2"}, true},
		{[]float64{0.5, 1}, []string{"--pod-speeds", "0.5,1"}, true},
	} {
		args, perPod := devstackSpeedArgs(RoutingFleet().WithPodSpeeds(tc.speeds))
		if !slices.Equal(args, tc.want) || perPod != tc.perPod {
			t.Errorf("speeds %v: %v (per pod %v), want %v", tc.speeds, args, perPod, tc.want)
		}
	}
	f := RoutingFleet()
	f.SlowPods, f.SlowSpeed = 1, 0.5
	if args, _ := devstackSpeedArgs(f); !slices.Equal(args, []string{"--slow-pods", "1", "--slow-speed", "0.5"}) {
		t.Errorf("slow pods: %v", args)
	}
}

// CheckDevstack asks the devstack's usage for --pod-speeds only when a
// fleet needs it.
func TestCheckDevstack(t *testing.T) {
	fake := func(usage string) string {
		dir := t.TempDir()
		script := "#!/bin/sh\ncat >&2 <<'EOF'\nUsage of hermod-devstack:\n" + usage + "EOF\nexit 0\n"
		if err := os.WriteFile(filepath.Join(dir, "hermod-devstack"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	old := fake("  -slow-pods int\n    \thow many of the pods are slower (default 1)\n  -slow-speed float\n")
	withFlag := fake("  -pod-speeds value\n    \tspeed factor of every pod\n  -slow-pods int\n")
	specs, err := RoutingSpecs(smallRouting())
	if err != nil {
		t.Fatal(err)
	}
	identical := slices.DeleteFunc(slices.Clone(specs), func(s Spec) bool { return s.Scenario == ScenarioHetero })
	if err := CheckDevstack(old, identical); err != nil {
		t.Fatalf("identical and slow fleets need no --pod-speeds: %v", err)
	}
	err = CheckDevstack(old, specs)
	if !errors.Is(err, ErrNoPodSpeeds) || !strings.Contains(err.Error(), "pod speeds 1,1,0.5,2: hermod-devstack has no --pod-speeds flag") {
		t.Fatalf("error %v", err)
	}
	if err := CheckDevstack(withFlag, specs); err != nil {
		t.Fatal(err)
	}
	if err := CheckDevstack(t.TempDir(), specs); err == nil || errors.Is(err, ErrNoPodSpeeds) {
		t.Fatalf("no devstack: %v", err)
	}
}
