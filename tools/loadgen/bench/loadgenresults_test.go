package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/tools/loadgen/runner"
)

// hermod-loadgen --save-json files are runs a report compares, named after
// their files.
func TestReportOfLoadgenResults(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, name := range []string{"before", "after"} {
		res := &runner.Results{Workload: "reference", Started: time.Now(), Requests: []runner.Result{
			{ID: "1", Kind: "light", Status: 200, Latency: 1 + float64(i)},
			{ID: "2", Kind: "heavy", Status: 500, Error: "boom"},
		}}
		res.Summary = runner.Summarize(res.Requests, 3)
		p := filepath.Join(dir, name+".json")
		if err := res.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var runs []*RunResult
	for _, p := range paths {
		r, err := ReadResult(p)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if runs[0].Spec.Name != "before" || runs[1].Results.Summary.Failed != 1 {
		t.Fatalf("runs %+v %+v", runs[0].Spec, runs[1].Results.Summary)
	}
	rep, err := NewReport("loadgen", "", runs)
	if err != nil {
		t.Fatal(err)
	}
	md, err := rep.Write(filepath.Join(dir, "report"))
	if err != nil || !strings.Contains(md, "before") || !strings.Contains(md, "after") {
		t.Fatalf("report: %v\n%s", err, md)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"x": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResult(bad); err == nil || !strings.Contains(err.Error(), "hermod-loadgen --save-json") {
		t.Fatalf("not results: %v", err)
	}
}
