package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/tools/loadgen/bench"
)

func TestParseRoutingDefaults(t *testing.T) {
	c, err := parseRouting(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if o.Orders != 5 || !slices.Equal(o.Fleets, bench.Scenarios) || !c.defaultFleets || c.recommended != "predicted-latency" || c.run.noisy != 0 {
		t.Fatalf("defaults %+v", c)
	}
	have, missing := bench.AvailablePolicies(bench.RoutingPolicies)
	if !slices.Equal(o.Policies, have) || !slices.Equal(c.missingPolicies, missing) {
		t.Fatalf("policies %v (missing %v), want those with a config: %v", o.Policies, c.missingPolicies, have)
	}
	if o.Fleet.SpeedList() != "1,1,1,1" || !slices.Equal(o.Hetero.PodSpeed, []float64{1, 1, 0.5, 2}) || o.Hetero.Workload.Seed != 42 {
		t.Fatalf("fleets %s, hetero %v seed %d", o.Fleet.SpeedList(), o.Hetero.PodSpeed, o.Hetero.Workload.Seed)
	}
}

func TestParseRouting(t *testing.T) {
	c, err := parseRouting([]string{
		"--orders", "3", "--pod-speeds", "1,1,2", "--fleets", "slow", "--fleets", "hetero", "--policies", "round-robin,load-aware",
		"--recommended", "load-aware", "--noisy-neighbour", "2", "--seed", "7", "--hetero-speeds", "1,2", "--hetero-rate", "4", "--hetero-requests", "50",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if o.Orders != 3 || o.Fleet.Pods != 3 || o.Fleet.SpeedList() != "1,1,2" || !slices.Equal(o.Fleets, []string{"slow", "hetero"}) || c.defaultFleets {
		t.Fatalf("options %+v", o)
	}
	if !slices.Equal(o.Policies, []string{"round-robin", "load-aware"}) || len(c.missingPolicies) > 0 || c.recommended != "load-aware" || c.run.noisy != 2 {
		t.Fatalf("policies %v (missing %v), recommended %s, noisy %d", o.Policies, c.missingPolicies, c.recommended, c.run.noisy)
	}
	h := o.Hetero
	if !slices.Equal(h.PodSpeed, []float64{1, 2}) || h.Workload.Rate != 4 || h.Workload.Requests != 50 || h.Workload.Seed != 7 || o.Workload.Seed != 7 {
		t.Fatalf("hetero %+v", h)
	}
	specs, err := bench.RoutingSpecs(o)
	if err != nil || len(specs) != 2*3*2 || specs[0].Fleet.SpeedList() != "1,1,1" {
		t.Fatalf("%d specs (%v)", len(specs), err)
	}
}

func TestParseRoutingErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pod-speeds", "1,x"}, `invalid value "1,x" for flag -pod-speeds: pod 1: speed "x" is not a number`},
		{[]string{"--pod-speeds", "1,0"}, "pod 1: speed must be a positive number (got 0)"},
		{[]string{"--pod-speeds", ""}, "no pod speeds"},
		{[]string{"--pod-speeds", "1,1", "--pods", "3"}, "--pod-speeds gives 2 pods, --pods 3"},
		{[]string{"--pod-speeds", "1,1", "--slow-pods", "1"}, "--pod-speeds replaces --slow-pods and --slow-speed"},
		{[]string{"--pods", "2", "--slow-pods", "3"}, "slow pods must be between 0 and 2 (got 3)"},
		{[]string{"--hetero-speeds", "1,-2"}, "pod 1: speed must be a positive number (got -2)"},
		{[]string{"--hetero-rate", "3", "--hetero-load", "0.5"}, "--hetero-rate and --hetero-load both set"},
		{[]string{"--hetero-load", "0"}, "hetero: load must be positive (got 0)"},
		{[]string{"--hetero-requests", "0"}, ""}, // checked with the workload, below
		{[]string{"--orders", "0"}, "orders: must be at least 1 (got 0)"},
		{[]string{"--fleets", "identical,fast"}, `fleets: unknown scenario "fast"`},
		{[]string{"--policies", "round-robin,nope"}, `policies: no benchmark config "nope"`},
		{[]string{"--noisy-neighbour", "-1"}, "--noisy-neighbour: threads must be between 0 and 256 (got -1)"},
		{[]string{"--recommended", ""}, "--recommended: a policy required"},
		{[]string{"--speed", "0"}, "fleet: speed must be positive (got 0)"},
		{[]string{"extra"}, "unexpected arguments: extra"},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		c, err := parseRouting(tc.args, io.Discard)
		if tc.want == "" {
			// a workload knob: parsing passes, building the runs fails
			if err == nil {
				_, err = bench.RoutingSpecs(c.opts)
			}
			if err == nil || !strings.Contains(err.Error(), "requests: must be positive") {
				t.Errorf("%v: error %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Without a peer, peers says how to get one and fails; with one, the
// defaults run the llm-d router's configs on both and Hermod's on Hermod.
func TestParsePeers(t *testing.T) {
	t.Setenv("LLMD_EPP", "")
	t.Setenv("LLMD_ROUTER_SRC", "")
	if _, err := parsePeers(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "--llmd-src") {
		t.Fatalf("no peer: %v", err)
	}
	t.Setenv("LLMD_EPP", "/opt/epp")
	c, err := parsePeers([]string{"--orders", "2", "--fleets", "hetero"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.epp != "/opt/epp" || c.opts.Routing.Orders != 2 || !slices.Equal(c.opts.Routing.Fleets, []string{"hetero"}) ||
		!slices.Equal(c.opts.Shared, []string{"llm-d-random", "llm-d-optimized-baseline"}) || !slices.Equal(c.opts.HermodOnly, []string{"predicted-latency"}) || c.run.out != "bench-out/peers" {
		t.Fatalf("parsed %+v", c)
	}
}
