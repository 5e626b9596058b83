package standard_test

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/scheduling"
)

// notYetBuilt are the llm-d router v0.10 plugin types this build does not
// provide yet: a config naming one fails with "unknown plugin type". Each
// leaves the list when it is built (or refused, saying what to use
// instead); the list must end empty.
var notYetBuilt = map[string]bool{}

// Every plugin type of the llm-d router v0.10 registry is built here, or
// refused with a reason (the corpus tests say which), or still listed in
// notYetBuilt; a listed type that is now registered must leave the list.
func TestUpstreamRegistryCovered(t *testing.T) {
	f, err := os.Open("testdata/llm-d-router-v0.10-types.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var types []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			types = append(types, line)
		}
	}
	if err := sc.Err(); err != nil || len(types) < 90 {
		t.Fatalf("read %d types: %v", len(types), err)
	}
	built := 0
	for _, typ := range types {
		_, registered := scheduling.DefaultRegistry.Lookup(typ)
		switch {
		case registered && notYetBuilt[typ]:
			t.Errorf("%s is registered now: remove it from notYetBuilt", typ)
		case !registered && !notYetBuilt[typ]:
			t.Errorf("%s (llm-d router v0.10) is neither registered nor listed as not yet built", typ)
		case registered:
			built++
		}
	}
	for typ := range notYetBuilt {
		found := false
		for _, u := range types {
			found = found || u == typ
		}
		if !found {
			t.Errorf("notYetBuilt lists %s, which the llm-d router v0.10 does not register", typ)
		}
	}
	t.Logf("llm-d router v0.10 plugin types: %d, registered here %d, not yet built %d", len(types), built, len(notYetBuilt))
}
