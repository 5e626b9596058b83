package stack

import (
	"slices"
	"strings"
	"testing"
)

func TestPodSpeeds(t *testing.T) {
	got, err := ParsePodSpeeds([]string{"1", " 1", "0.5", "2"})
	if err != nil || !slices.Equal(got, []float64{1, 1, 0.5, 2}) {
		t.Fatalf("ParsePodSpeeds = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"1", "0"}, {"fast"}, {"-1"}, {"NaN"}, {"+Inf"}} {
		if _, err := ParsePodSpeeds(bad); err == nil || !strings.Contains(err.Error(), "--pod-speeds") {
			t.Errorf("ParsePodSpeeds(%v) = %v, want an error naming the flag", bad, err)
		}
	}
	o := Options{Pods: 4, SlowPods: 1, SlowSpeed: 0.5}
	if s := []float64{o.podSpeed(0), o.podSpeed(3)}; !slices.Equal(s, []float64{1, 0.5}) {
		t.Fatalf("slow pods: %v", s)
	}
	o.PodSpeeds = []float64{1, 2, 0.5, 1}
	if s := []float64{o.podSpeed(1), o.podSpeed(2), o.podSpeed(3)}; !slices.Equal(s, []float64{2, 0.5, 1}) {
		t.Fatalf("pod speeds: %v", s)
	}
}
