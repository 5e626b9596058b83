package cli

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/bustest"
)

var structuredFormats = []string{formatJSON, formatYAML}

// config get: -o json and -o yaml give the config with its revision, and
// config set takes them back; the default (raw, or -o table) is the
// document as stored.
func TestConfigGetOutputs(t *testing.T) {
	s := newStores(t)
	const stored = "# my comment\nplugins: [{type: queue-scorer}]\n"
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), writeFile(t, stored))...); code != ExitOK {
		t.Fatalf("set: %s", errs)
	}
	get := func(extra ...string) string {
		t.Helper()
		out, errs, code := run(append(append([]string{"config", "get"}, s.etcdFlags()...), extra...)...)
		if code != ExitOK {
			t.Fatalf("config get %v: %d %q", extra, code, errs)
		}
		return out
	}
	raw := get()
	m := regexp.MustCompile(`^# pool \S+, revision (\d+) \(\S+\)\n`).FindStringSubmatch(raw)
	if m == nil || strings.TrimPrefix(raw, m[0]) != stored {
		t.Fatalf("raw:\n%s", raw)
	}
	for _, alias := range []string{"raw", "table", "text"} {
		if out := get("-o", alias); out != raw {
			t.Errorf("-o %s: %q, want %q", alias, out, raw)
		}
	}
	for _, format := range structuredFormats {
		doc := decodeOne(t, format, get("-o", format))
		checkFields(t, "config get -o "+format, doc, map[string]string{
			"pool": s.pool, "key": coord.ConfigKey(s.pool), "revision": m[1], "version": "1",
			"config.plugins.0.type": "queue-scorer", "document": stored,
		})
	}
	// config set takes the JSON and YAML back: it stores their config.
	for _, format := range structuredFormats {
		file := writeFile(t, get("--output", format))
		if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), file)...); code != ExitOK {
			t.Fatalf("set what -o %s printed: %s", format, errs)
		}
		// Only the config block is stored: the header alone says revision.
		if out := get(); strings.Count(out, "# pool ") != 1 || strings.Count(out, "revision") != 1 || strings.Contains(out, "document") || !strings.Contains(out, "queue-scorer") {
			t.Errorf("after setting -o %s's output:\n%s", format, out)
		}
	}
}

func TestAutoscalerGetOutputs(t *testing.T) {
	s := newStores(t)
	s.apply(t, testVariant+"---\n"+testVariant2+"---\n"+testConfigMap)
	s.put(t, coord.AutoscalerPrefix(s.pool)+"status/llama-a10g", `{"desiredOptimizedAlloc":{"numReplicas":4},"actuation":{"applied":true}}`)
	s.put(t, coord.ReplicaTargetKey(s.pool, "llama-a10g"), "3")
	get := func(args ...string) string {
		t.Helper()
		out, errs, code := run(append(append([]string{"autoscaler", "get"}, s.etcdFlags()...), args...)...)
		if code != ExitOK {
			t.Fatalf("autoscaler get %v: %d %q", args, code, errs)
		}
		return out
	}
	if table := get(); get("-o", "table") != table || !strings.HasPrefix(table, "NAME ") {
		t.Errorf("-o table is not the default table:\n%s", table)
	}
	for _, format := range structuredFormats {
		checkFields(t, "variants -o "+format, decodeOne(t, format, get("-o", format)), map[string]string{
			"apiVersion": "v1", "kind": "List", "items": "len 2",
			"items.0.kind": "VariantAutoscaling", "items.0.metadata.name": "llama-a100", "items.0.status": "<missing>",
			"items.1.metadata.name": "llama-a10g", "items.1.spec.variantCost": "5.0",
			"items.1.status.desiredOptimizedAlloc.numReplicas": "4", "items.1.status.actuation.applied": "true",
		})
		checkFields(t, "configmaps -o "+format, decodeOne(t, format, get("configmaps", "-o", format)), map[string]string{
			"kind": "List", "items": "len 1", "items.0.kind": "ConfigMap", "items.0.metadata.name": "wva-saturation-scaling-config",
		})
		// One object; the flag after the name, as kubectl takes it.
		checkFields(t, "one variant -o "+format, decodeOne(t, format, get("llama-a10g", "-o", format)), map[string]string{
			"kind": "VariantAutoscaling", "metadata.name": "llama-a10g", "spec.minReplicas": "1", "status.desiredOptimizedAlloc.numReplicas": "4",
		})
		checkFields(t, "one configmap -o "+format, decodeOne(t, format, get("configmap/wva-saturation-scaling-config", "-o"+format)), map[string]string{
			"kind": "ConfigMap", "data.default": "kvCacheThreshold: 0.80\n", "metadata.name": "wva-saturation-scaling-config",
		})
	}
	if one := get("llama-a10g"); get("llama-a10g", "-o", "yaml") != one || !strings.HasPrefix(one, "# pool ") {
		t.Errorf("-o yaml is not one object's default:\n%s", one)
	}
	lines := strings.Split(strings.TrimSpace(get("llama-a10g", "-o", "table")), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1])[:8], " ") != "llama-a10g meta/llama-3.1-8b 1 10 5.0 3 4 true" {
		t.Errorf("one variant -o table:\n%s", strings.Join(lines, "\n"))
	}
	lines = strings.Split(strings.TrimSpace(get("-o", "table", "configmap/wva-saturation-scaling-config")), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "wva-saturation-scaling-config default,llama" {
		t.Errorf("one configmap -o table:\n%s", strings.Join(lines, "\n"))
	}
}

func TestAutoscalerStatusOutputs(t *testing.T) {
	s := newStores(t)
	_, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	status := func(args ...string) string {
		t.Helper()
		out, errs, code := run(append(append([]string{"autoscaler", "status"}, s.flags()...), args...)...)
		if code != ExitOK {
			t.Fatalf("autoscaler status %v: %d %q", args, code, errs)
		}
		return out
	}
	for _, format := range structuredFormats {
		checkFields(t, "no leader -o "+format, decodeOne(t, format, status("-o", format)), map[string]string{
			"pool": s.pool, "leader": "", "election": "/hermod/election/autoscaler-" + s.pool + "/",
			"subject": "hermod.scaling." + s.pool, "decisions": "len 0",
		})
	}
	lead, err := coord.Campaign(context.Background(), s.cli, "autoscaler-"+s.pool, "autoscaler-test", 5*time.Second,
		coord.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lead.Close(context.Background()) })
	for i := range 3 {
		publishDecision(t, js, decision(s.pool, i))
	}
	if text := status(); status("-o", "text") != text || status("-o", "table") != text || !strings.Contains(text, "model-2") {
		t.Errorf("-o text and -o table are not the default:\n%s", text)
	}
	for _, format := range structuredFormats {
		checkFields(t, "-o "+format, decodeOne(t, format, status("--last", "2", "-o", format)), map[string]string{
			"leader": "autoscaler-test", "decisions": "len 2", "decisions.0.model_id": "model-1", "decisions.1.model_id": "model-2",
			"decisions.1.variants.0.variant": "llama-a10g", "decisions.1.variants.0.desired": "2", "decisions.1.reasons.0": "reason 2",
		})
		checkFields(t, "--last 0 -o "+format, decodeOne(t, format, status("--last", "0", "-o", format)), map[string]string{
			"leader": "autoscaler-test", "decisions": "len 0",
		})
	}
}

// With --follow, -o json is a stream: the status, then each new decision,
// one JSON document a line.
func TestAutoscalerStatusFollowJSON(t *testing.T) {
	s := newStores(t)
	_, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	publishDecision(t, js, decision(s.pool, 1))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"autoscaler", "status", "--follow", "-o", "json"}, s.flags()...), &out, &errs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "model-1") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for !strings.Contains(out.String(), "model-2") && time.Now().Before(deadline) {
		publishDecision(t, js, decision(s.pool, 2))
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("exit %d: %s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	checkFields(t, "the first line", decodeOne(t, formatJSON, lines[0]), map[string]string{"leader": "", "decisions": "len 1", "decisions.0.model_id": "model-1"})
	for _, l := range lines[1:] {
		checkFields(t, "a new decision", decodeOne(t, formatJSON, l), map[string]string{"model_id": "model-2", "pool": s.pool})
	}
}
