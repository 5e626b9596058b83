package standard_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// corpusPods are a pool to schedule the corpus over: each role in each
// labelling convention, idle, with fresh metrics.
func corpusPods(now time.Time) []*scheduling.Endpoint {
	labels := []map[string]string{
		{"mif.moreh.io/role": "decode", "tier": "gold"},
		{"mif.moreh.io/role": "prefill"},
		{"mif.moreh.io/role": "encode"},
		{"llm-d.ai/role": "decode", "zone": "a"},
		{"llm-d.ai/role": "prefill-decode"},
	}
	eps := schedulingtest.Endpoints(len(labels))
	for i, l := range labels {
		eps[i].Labels = l
		eps[i].Metrics = &scheduling.Metrics{WaitingRequests: i % 2, KVCacheUsage: 0.1, UpdatedAt: now}
	}
	return eps
}

// corpusRequests are what each corpus config schedules: a chat with an
// image and a completion.
func corpusRequests(name string) []*scheduling.Request {
	chat := schedulingtest.Chat("chat-"+name, "m", "be brief", strings.Repeat("describe the picture in detail ", 20))
	chat.Body.Messages[1].Media = openai.MediaImage
	return []*scheduling.Request{chat, schedulingtest.Completion("cmpl-"+name, "m", strings.Repeat("once upon a time ", 40))}
}

var typeLine = regexp.MustCompile(`(?m)^\s*-?\s*\{?\s*type:\s*([a-z0-9-]+)`)

// The conformance corpus: configurations written from the upstream
// documentation (testdata/upstream), one or more per plugin type, each
// loaded without an error or an unknown parameter and run through the
// scheduler, a chat with an image and a completion alike; the types
// Hermod refuses (testdata/upstream/refused) fail to load saying what to
// use instead. Every plugin type of this build appears in one or the
// other.
func TestUpstreamCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/upstream/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	covered := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typeLine.FindAllStringSubmatch(string(data), -1) {
			covered[m[1]] = true
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := load(t, f)
			if err != nil {
				t.Fatalf("does not load: %v", err)
			}
			defer func() { _ = s.Close() }()
			for _, w := range s.Describe().Warnings {
				if strings.Contains(w, "unknown parameter") || strings.Contains(w, "skipped") {
					t.Errorf("warning: %s", w)
				}
			}
			for _, req := range corpusRequests(filepath.Base(f)) {
				pods := corpusPods(time.Now())
				// header-based-testing-filter's selection: one of every role
				req.Headers = map[string]string{"test-epp-endpoint-selection": pods[0].HostPort() + "," + pods[1].HostPort() + "," + pods[2].HostPort()}
				res, err := s.Schedule(context.Background(), req, pods)
				if err != nil {
					t.Fatalf("%s: %v", req.ID, err)
				}
				if res.Target().Endpoint == nil {
					t.Fatalf("%s: no target", req.ID)
				}
				res.Release()
			}
		})
	}
	refused, err := filepath.Glob("testdata/upstream/refused/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range refused {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typeLine.FindAllStringSubmatch(string(data), -1) {
			covered[m[1]] = true
		}
		if _, err := load(t, f); err == nil || !strings.Contains(err.Error(), "not supported") || !strings.Contains(err.Error(), "use ") {
			t.Errorf("%s: error %v, want a refusal that says what to use instead", filepath.Base(f), err)
		}
	}
	var missing []string
	for _, typ := range scheduling.DefaultRegistry.Types() {
		if !covered[typ] {
			missing = append(missing, typ)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("plugin types without a corpus config: %s", strings.Join(missing, ", "))
	}
}
