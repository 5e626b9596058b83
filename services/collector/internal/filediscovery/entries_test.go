package filediscovery

import (
	"strings"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func ep(name, model string) *registryv1.Endpoint {
	return &registryv1.Endpoint{Name: name, Pool: "p", Address: "h", Port: 1, Model: model}
}

func set(eps ...*registryv1.Endpoint) map[string]*registryv1.Endpoint {
	out := map[string]*registryv1.Endpoint{}
	for _, e := range eps {
		out[e.GetName()] = e
	}
	return out
}

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		old, next map[string]*registryv1.Endpoint
		want      string // added|changed|removed
	}{
		{"both empty", nil, nil, "||"},
		{"from nothing", nil, set(ep("b", "m"), ep("a", "m")), "a,b||"},
		{"to nothing", set(ep("a", "m")), nil, "||a"},
		{"same", set(ep("a", "m")), set(ep("a", "m")), "||"},
		{"all kinds", set(ep("a", "m"), ep("b", "m"), ep("c", "m")), set(ep("a", "m"), ep("b", "n"), ep("d", "m")), "d|b|c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := diff(tc.old, tc.next)
			got := strings.Join(d.Added, ",") + "|" + strings.Join(d.Changed, ",") + "|" + strings.Join(d.Removed, ",")
			if got != tc.want {
				t.Fatalf("diff = %s, want %s", got, tc.want)
			}
			if d.Empty() != (tc.want == "||") {
				t.Fatalf("Empty() = %v for %s", d.Empty(), got)
			}
		})
	}
}

// RegisteredAt is when a name first appeared: an edit keeps it, and it
// does not count as a change; the set signals changes only.
func TestEntrySetReplace(t *testing.T) {
	t.Parallel()
	s := newEntrySet()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { return clock }
	signalled := func() bool {
		select {
		case <-s.Changed():
			return true
		default:
			return false
		}
	}

	if d := s.replace(set(ep("a", "m"))); strings.Join(d.Added, ",") != "a" || !signalled() {
		t.Fatalf("first load: %+v", d)
	}
	first := s.Desired()["a"].GetRegisteredAt().AsTime()
	if !first.Equal(clock) {
		t.Fatalf("registered at %v, want %v", first, clock)
	}

	clock = clock.Add(time.Hour)
	if d := s.replace(set(ep("a", "m"))); !d.Empty() || signalled() {
		t.Fatalf("the same entries again: %+v, signalled", d)
	}
	d := s.replace(set(ep("a", "n"), ep("b", "m")))
	if strings.Join(d.Added, ",") != "b" || strings.Join(d.Changed, ",") != "a" || !signalled() {
		t.Fatalf("edit: %+v", d)
	}
	got := s.Desired()
	if at := got["a"].GetRegisteredAt().AsTime(); !at.Equal(first) {
		t.Errorf("a changed its registration time to %v", at)
	}
	if at := got["b"].GetRegisteredAt().AsTime(); !at.Equal(clock) {
		t.Errorf("b registered at %v, want %v", at, clock)
	}
	if d := s.replace(nil); strings.Join(d.Removed, ",") != "a,b" || s.len() != 0 || !signalled() {
		t.Fatalf("emptied: %+v, %d entries", d, s.len())
	}
}
