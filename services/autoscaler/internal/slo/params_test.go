package slo

import (
	"errors"
	"math"
	"testing"
)

// Worked example A: alpha 10, beta 0.1, gamma 0.001 ms; i 100, o 9.
//
//	f = (i+o)/(o+1) = 109/10 = 10.9      g = i + o/2 = 104.5
//	per request = beta f + gamma g = 1.09 + 0.1045 = 1.1945
//	T(n)  = 10 + 1.1945 n
//	Tp(n) = T(n) + (beta+gamma) i = T(n) + 0.101 x 100 = T(n) + 10.1
//	Td(n) = T(n) + beta + gamma g = T(n) + 0.1 + 0.1045 = T(n) + 0.2045
//	D(n)  = Tp(n) + 9 Td(n);  mu(n) = n / D(n)
var exampleA = struct {
	p Params
	w Workload
}{Params{Alpha: 10, Beta: 0.1, Gamma: 0.001}, Workload{InputTokens: 100, OutputTokens: 9}}

func TestPerformanceFormulas(t *testing.T) {
	def := DefaultParams()
	defW := Workload{InputTokens: 1000, OutputTokens: 200}
	tests := []struct {
		name string
		p    Params
		w    Workload
		n    float64
		// want T, Tp, Td, D (ms) and mu (requests per second).
		iter, prefill, decode, service, muPerSecond float64
	}{
		{
			// T(0) = 10; Tp(0) = 20.1; Td(0) = 10.2045;
			// D(0) = 20.1 + 9 x 10.2045 = 111.9405; mu(0) = 0.
			name: "A n=0", p: exampleA.p, w: exampleA.w, n: 0,
			iter: 10, prefill: 20.1, decode: 10.2045, service: 111.9405, muPerSecond: 0,
		},
		{
			// T(1) = 11.1945; Tp(1) = 21.2945; Td(1) = 11.399;
			// D(1) = 21.2945 + 102.591 = 123.8855; mu(1) = 1000/123.8855.
			name: "A n=1", p: exampleA.p, w: exampleA.w, n: 1,
			iter: 11.1945, prefill: 21.2945, decode: 11.399, service: 123.8855, muPerSecond: 1000 / 123.8855,
		},
		{
			// T(2) = 12.389; Tp(2) = 22.489; Td(2) = 12.5935;
			// D(2) = 22.489 + 113.3415 = 135.8305;
			// mu(2) = 2/135.8305 per ms = 14.72423351 per s.
			name: "A n=2", p: exampleA.p, w: exampleA.w, n: 2,
			iter: 12.389, prefill: 22.489, decode: 12.5935, service: 135.8305, muPerSecond: 14.724233511619,
		},
		{
			// Defaults, i 1000, o 200, n 10:
			// f = 1200/201 = 5.970149254; g = 1100;
			// per request = 0.05 f + 0.00005 x 1100 = 0.298507463 + 0.055 = 0.353507463
			// T = 5 + 3.53507463 = 8.53507463
			// Tp = T + 0.05005 x 1000 = 58.58507463
			// Td = T + 0.05 + 0.055 = 8.64007463
			// D = 58.58507463 + 200 x 8.64007463 = 58.58507463 + 1728.01492537 = 1786.6
			// mu = 10/1786.6 per ms = 5.597223777 per s
			name: "defaults n=10", p: def, w: defW, n: 10,
			iter: 5 + 10*(0.05*1200.0/201+0.055), prefill: 5 + 10*(0.05*1200.0/201+0.055) + 50.05,
			decode: 5 + 10*(0.05*1200.0/201+0.055) + 0.105, service: 1786.6,
			muPerSecond: 5.5972237770066,
		},
		{
			// Decode only (i 0, o 1): f = 1/2, g = 1/2; per request =
			// 0.05 x 0.5 + 0.00005 x 0.5 = 0.025025; T(4) = 5.1001;
			// Tp = T; Td = T + 0.05 + 0.000025 = 5.150125;
			// D = 10.250225; mu = 4000/10.250225 = 390.235...
			name: "decode only", p: def, w: Workload{OutputTokens: 1}, n: 4,
			iter: 5.1001, prefill: 5.1001, decode: 5.150125, service: 10.250225, muPerSecond: 4000 / 10.250225,
		},
		{
			// Prefill only (o 0): f = i, g = i = 500; per request =
			// 0.05 x 500 + 0.00005 x 500 = 25.025; T(2) = 55.05;
			// Tp = 55.05 + 0.05005 x 500 = 80.075; Td = 55.05 + 0.05 + 0.025;
			// D = Tp (o = 0); mu = 2000/80.075.
			name: "prefill only", p: def, w: Workload{InputTokens: 500}, n: 2,
			iter: 55.05, prefill: 80.075, decode: 55.125, service: 80.075, muPerSecond: 2000 / 80.075,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			near(t, "T", tc.p.IterationTimeMs(tc.w, tc.n), tc.iter, 1e-9)
			near(t, "Tp", tc.p.PrefillTimeMs(tc.w, tc.n), tc.prefill, 1e-9)
			near(t, "Td", tc.p.DecodeStepTimeMs(tc.w, tc.n), tc.decode, 1e-9)
			near(t, "D", tc.p.ServiceTimeMs(tc.w, tc.n), tc.service, 1e-9)
			near(t, "mu/s", tc.p.ServiceRatePerSecond(tc.w, tc.n), tc.muPerSecond, 1e-9)
			near(t, "mu/ms", tc.p.ServiceRatePerMs(tc.w, tc.n)*1000, tc.muPerSecond, 1e-9)
		})
	}
}

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"defaults", DefaultParams(), true},
		{"zero beta and gamma", Params{Alpha: 1}, true},
		{"at limit", Params{Alpha: LimitParamMs, Beta: LimitParamMs, Gamma: LimitParamMs}, true},
		{"zero alpha", Params{Beta: 1}, false},
		{"negative beta", Params{Alpha: 1, Beta: -1}, false},
		{"NaN gamma", Params{Alpha: 1, Gamma: math.NaN()}, false},
		{"infinite alpha", Params{Alpha: math.Inf(1)}, false},
		{"beyond limit", Params{Alpha: 1, Beta: 2 * LimitParamMs}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tc.p, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("error %v does not wrap ErrInvalidParams", err)
			}
		})
	}
}

func TestWorkloadValidate(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		ok   bool
	}{
		{"typical", Workload{InputTokens: 1000, OutputTokens: 200}, true},
		{"prefill only", Workload{InputTokens: 1000}, true},
		{"decode only", Workload{OutputTokens: 1}, true},
		{"empty", Workload{}, true},
		{"fractional output below one", Workload{InputTokens: 10, OutputTokens: 0.5}, false},
		{"negative input", Workload{InputTokens: -1, OutputTokens: 2}, false},
		{"NaN output", Workload{OutputTokens: math.NaN()}, false},
		{"too long", Workload{InputTokens: 2 * LimitTokens}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tc.w, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidWorkload) {
				t.Fatalf("error %v does not wrap ErrInvalidWorkload", err)
			}
		})
	}
}
