package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/bustest"
)

// testVariant2 has no bounds nor cost: the autoscaler's defaults apply.
const testVariant2 = `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-a100
spec:
  scaleTargetRef: {kind: Deployment, name: llama-a100}
  modelID: meta/llama-3.1-8b
`

func (s stores) etcdFlags(extra ...string) []string {
	return append([]string{"--pool", s.pool, "--etcd-endpoints", s.etcd}, extra...)
}

// get returns a key's value, "" when it is missing.
func (s stores) get(t *testing.T, key string) string {
	t.Helper()
	resp, err := s.cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func (s stores) put(t *testing.T, key, value string) {
	t.Helper()
	if _, err := s.cli.Put(context.Background(), key, value); err != nil {
		t.Fatal(err)
	}
}

func (s stores) apply(t *testing.T, content string) {
	t.Helper()
	if out, errs, code := run(append([]string{"autoscaler", "apply", "-f", writeFile(t, content)}, s.etcdFlags()...)...); code != ExitOK {
		t.Fatalf("apply: %d %q %q", code, out, errs)
	}
}

func TestAutoscalerApply(t *testing.T) {
	s := newStores(t)
	out, errs, code := run(append([]string{"autoscaler", "apply", "-f", writeFile(t, testVariant+"---\n"+testConfigMap)}, s.etcdFlags()...)...)
	if code != ExitOK || out != "variantautoscaling/llama-a10g configured\nconfigmap/wva-saturation-scaling-config configured\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if got := s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a10g"); got != testVariant {
		t.Errorf("variant key holds %q", got)
	}
	if got := s.get(t, coord.AutoscalerConfigMapsPrefix(s.pool)+"wva-saturation-scaling-config"); got != testConfigMap {
		t.Errorf("configmap key holds %q", got)
	}

	// From stdin; the variant is replaced.
	changed := strings.Replace(testVariant, "maxReplicas: 10", "maxReplicas: 12", 1)
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader(changed + "---\n" + testVariant2)
	out, errs, code = run(append([]string{"autoscaler", "apply", "-f", "-"}, s.etcdFlags()...)...)
	if code != ExitOK || out != "variantautoscaling/llama-a10g configured\nvariantautoscaling/llama-a100 configured\n" {
		t.Fatalf("stdin: %d %q %q", code, out, errs)
	}
	if got := s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a10g"); got != changed {
		t.Errorf("variant key holds %q", got)
	}
	if got := s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a100"); got != testVariant2 {
		t.Errorf("second variant key holds %q", got)
	}

	if _, errs, code := run(append([]string{"autoscaler", "apply"}, s.etcdFlags()...)...); code != ExitUsage || !strings.Contains(errs, "Usage:") {
		t.Errorf("no -f: %d %q", code, errs)
	}
}

// A file with an invalid document writes nothing, not even its valid ones.
func TestAutoscalerApplyIsAtomic(t *testing.T) {
	s := newStores(t)
	s.apply(t, testVariant)
	before := s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a10g")
	changed := strings.Replace(testVariant, "maxReplicas: 10", "maxReplicas: 12", 1)
	bad := strings.Replace(testConfigMap, "wva-saturation-scaling-config", "my-config", 1)
	file := writeFile(t, changed+"---\n"+bad+"---\n"+testVariant2)
	out, errs, code := run(append([]string{"autoscaler", "apply", "-f", file}, s.etcdFlags()...)...)
	if code != ExitFailure || out != "" || !strings.Contains(errs, file+": invalid; nothing was written") ||
		!strings.Contains(errs, `document 2: ConfigMap "my-config": metadata.name: must be wva-saturation-scaling-config,`) {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	resp, err := s.cli.Get(context.Background(), coord.AutoscalerPrefix(s.pool), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != before {
		t.Errorf("the failed apply changed the keys: %v", resp.Kvs)
	}
}

func TestAutoscalerGet(t *testing.T) {
	s := newStores(t)
	s.apply(t, testVariant+"---\n"+testVariant2+"---\n"+testConfigMap)
	ran := time.Now().Add(-90 * time.Second).UTC()
	s.put(t, coord.AutoscalerPrefix(s.pool)+"status/llama-a10g", fmt.Sprintf(
		`{"desiredOptimizedAlloc":{"numReplicas":4,"lastRunTime":%q},"actuation":{"applied":true},`+
			`"conditions":[{"type":"OptimizationReady","status":"True","reason":"Optimized","message":"saturation-percentage-based / cost-aware","lastTransitionTime":%[1]q}]}`,
		ran.Format(time.RFC3339Nano)))
	s.put(t, coord.ReplicaTargetKey(s.pool, "llama-a10g"), "3")

	out, errs, code := run(append([]string{"autoscaler", "get"}, s.etcdFlags()...)...)
	if code != ExitOK || errs != "" {
		t.Fatalf("%d %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", out)
	}
	for i, want := range [][]string{
		{"NAME", "MODEL", "MIN", "MAX", "COST", "TARGET", "DESIRED", "APPLIED", "LAST", "RUN"},
		{"llama-a100", "meta/llama-3.1-8b", "-", "-", "-", "-", "-", "-", "-"},
		{"llama-a10g", "meta/llama-3.1-8b", "1", "10", "5.0", "3", "4", "true", "1m30s", "ago"},
	} {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d: %q, want %q", i, got, want)
		}
	}

	// One variant: as applied, with its status.
	out, errs, code = run(append([]string{"autoscaler", "get"}, s.etcdFlags("llama-a10g")...)...)
	if code != ExitOK {
		t.Fatalf("get NAME: %d %q", code, errs)
	}
	for _, want := range []string{
		"# pool " + s.pool + ", revision ", "# replica target (local actuator): 3\n", "# the cheap variant\n", "name: llama-a10g\n",
		`variantCost: "5.0"`, "  scaleTargetRef:\n    kind: Deployment\n", "status:\n  desiredOptimizedAlloc:\n    numReplicas: 4\n",
		"  actuation:\n    applied: true\n", "reason: Optimized",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get NAME lacks %q:\n%s", want, out)
		}
	}
	out, _, code = run(append([]string{"autoscaler", "get", "-o", "json"}, s.etcdFlags("variantautoscaling/llama-a10g")...)...)
	var obj struct {
		Spec struct {
			VariantCost string `json:"variantCost"`
		} `json:"spec"`
		Status variantStatus `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &obj); code != ExitOK || err != nil || obj.Spec.VariantCost != "5.0" ||
		obj.Status.DesiredOptimizedAlloc.NumReplicas != 4 || !obj.Status.DesiredOptimizedAlloc.LastRunTime.Equal(ran) {
		t.Errorf("-o json: %d %v %+v\n%s", code, err, obj, out)
	}
	out, _, _ = run(append([]string{"autoscaler", "get"}, s.etcdFlags("llama-a100")...)...)
	if !strings.Contains(out, "# no status: ") || strings.Contains(out, "\nstatus:") {
		t.Errorf("get NAME without a status:\n%s", out)
	}

	// ConfigMaps.
	out, _, code = run(append([]string{"autoscaler", "get"}, s.etcdFlags("configmaps")...)...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 2 ||
		strings.Join(strings.Fields(lines[1]), " ") != "wva-saturation-scaling-config default,llama" {
		t.Errorf("get configmaps: %d\n%s", code, out)
	}
	out, _, code = run(append([]string{"autoscaler", "get"}, s.etcdFlags("configmap/wva-saturation-scaling-config")...)...)
	if code != ExitOK || !strings.Contains(out, "  default: |\n    kvCacheThreshold: 0.80\n") {
		t.Errorf("get configmap/NAME: %d\n%s", code, out)
	}

	if _, errs, code := run(append([]string{"autoscaler", "get"}, s.etcdFlags("llama-h100")...)...); code != ExitFailure ||
		!strings.Contains(errs, "variantautoscaling/llama-h100: not found in pool "+s.pool) {
		t.Errorf("missing: %d %q", code, errs)
	}
	if _, errs, code := run(append([]string{"autoscaler", "get"}, s.etcdFlags("deployment/llama")...)...); code != ExitUsage || !strings.Contains(errs, "unknown resource") {
		t.Errorf("bad resource: %d %q", code, errs)
	}
}

func TestAutoscalerGetEmpty(t *testing.T) {
	s := newStores(t)
	out, _, code := run(append([]string{"autoscaler", "get"}, s.etcdFlags()...)...)
	if code != ExitOK || out != "pool "+s.pool+" has no VariantAutoscaling objects\n" {
		t.Errorf("%d %q", code, out)
	}
	for _, format := range structuredFormats {
		for _, ref := range []string{"variantautoscalings", "configmaps"} {
			out, errs, code := run(append([]string{"autoscaler", "get", ref, "-o", format}, s.etcdFlags()...)...)
			if code != ExitOK {
				t.Fatalf("get %s -o %s: %d %q", ref, format, code, errs)
			}
			checkFields(t, "an empty list", decodeOne(t, format, out), map[string]string{"kind": "List", "items": "len 0"})
		}
	}
}

func TestAutoscalerDelete(t *testing.T) {
	s := newStores(t)
	s.apply(t, testVariant+"---\n"+testVariant2+"---\n"+testConfigMap)
	statusKey := coord.AutoscalerPrefix(s.pool) + "status/llama-a10g"
	s.put(t, statusKey, `{"desiredOptimizedAlloc":{"numReplicas":4}}`)
	s.put(t, coord.ReplicaTargetKey(s.pool, "llama-a10g"), "3")

	out, errs, code := run(append([]string{"autoscaler", "delete"}, s.etcdFlags("llama-a10g")...)...)
	if code != ExitOK || out != "variantautoscaling/llama-a10g deleted\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a10g") != "" || s.get(t, statusKey) != "" {
		t.Error("the variant or its status is still there")
	}
	if s.get(t, coord.AutoscalerVariantsPrefix(s.pool)+"llama-a100") == "" || s.get(t, coord.ReplicaTargetKey(s.pool, "llama-a10g")) != "3" {
		t.Error("delete removed more than the variant and its status")
	}
	if _, errs, code := run(append([]string{"autoscaler", "delete"}, s.etcdFlags("llama-a10g")...)...); code != ExitFailure || !strings.Contains(errs, "not found") {
		t.Errorf("again: %d %q", code, errs)
	}
	out, _, code = run(append([]string{"autoscaler", "delete"}, s.etcdFlags("configmap/wva-saturation-scaling-config")...)...)
	if code != ExitOK || out != "configmap/wva-saturation-scaling-config deleted\n" || s.get(t, coord.AutoscalerConfigMapsPrefix(s.pool)+"wva-saturation-scaling-config") != "" {
		t.Errorf("configmap: %d %q", code, out)
	}
	if _, _, code := run(append([]string{"autoscaler", "delete"}, s.etcdFlags("configmaps")...)...); code != ExitUsage {
		t.Errorf("a list: %d", code)
	}
}

// decision is a test decision of model-<i>.
func decision(pool string, i int) *eventsv1.ScalingDecision {
	return &eventsv1.ScalingDecision{DecisionId: pool + "-" + strconv.Itoa(i), Pool: pool, ModelId: "model-" + strconv.Itoa(i), Time: timestamppb.Now(),
		Trigger: "metrics", Analyzer: "saturation-percentage-based", Optimizer: "cost-aware", Reasons: []string{"reason " + strconv.Itoa(i)},
		Variants: []*eventsv1.VariantDecision{{Variant: "llama-a10g", Current: 1, Desired: 2, Applied: true}}}
}

func publishDecision(t *testing.T, js jetstream.JetStream, d *eventsv1.ScalingDecision) {
	t.Helper()
	subject, _ := bus.ScalingSubject(d.GetPool())
	b, _ := proto.Marshal(d)
	if _, err := js.Publish(context.Background(), subject, b); err != nil {
		t.Fatal(err)
	}
}

func TestAutoscalerStatus(t *testing.T) {
	s := newStores(t)
	_, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(append([]string{"autoscaler", "status"}, s.flags()...)...)
	if code != ExitOK || out != fmt.Sprintf("leader: none (no hermod-autoscaler of pool %s holds /hermod/election/autoscaler-%[1]s/)\nno scaling decisions of pool %[1]s in HERMOD_SCALING\n", s.pool) {
		t.Fatalf("no leader, no decisions: %d %q %q", code, out, errs)
	}

	lead, err := coord.Campaign(context.Background(), s.cli, "autoscaler-"+s.pool, "autoscaler-test", 5*time.Second,
		coord.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lead.Close(context.Background()) })
	// 30 decisions of the pool, each after one of another pool's.
	for i := range 30 {
		publishDecision(t, js, decision(s.pool+"-other", i))
		publishDecision(t, js, decision(s.pool, i))
	}
	out, errs, code = run(append([]string{"autoscaler", "status"}, s.flags()...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitOK || len(lines) != 12 || lines[0] != "leader: autoscaler-test (/hermod/election/autoscaler-"+s.pool+"/)" ||
		lines[1] != "last 10 scaling decisions (hermod.scaling."+s.pool+"), newest last:" ||
		!strings.Contains(lines[2], "  model-20  metrics  saturation-percentage-based/cost-aware  llama-a10g 1->2 applied  | reason 20") ||
		!strings.Contains(lines[11], "  model-29  ") {
		t.Fatalf("%d %q\n%s", code, errs, out)
	}
	// More than the stream holds: all of them.
	out, _, _ = run(append([]string{"autoscaler", "status", "--last", "50"}, s.flags()...)...)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 32 || !strings.Contains(lines[2], "  model-0  ") || !strings.Contains(lines[31], "  model-29  ") || strings.Contains(out, "-other") {
		t.Errorf("--last 50:\n%s", out)
	}
	out, _, _ = run(append([]string{"autoscaler", "status", "--last", "0"}, s.flags()...)...)
	if strings.Count(out, "\n") != 1 {
		t.Errorf("--last 0:\n%s", out)
	}
	if _, _, code := run(append([]string{"autoscaler", "status", "--last", "-1"}, s.flags()...)...); code != ExitUsage {
		t.Errorf("--last -1: %d", code)
	}
}

// status --follow prints the last decisions, then the new ones.
func TestAutoscalerStatusFollow(t *testing.T) {
	s := newStores(t)
	_, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	publishDecision(t, js, decision(s.pool, 1))
	publishDecision(t, js, decision(s.pool, 2))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"autoscaler", "status", "--follow", "--last", "1"}, s.flags()...), &out, &errs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "model-2 ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for !strings.Contains(out.String(), "model-3 ") && time.Now().Before(deadline) {
		publishDecision(t, js, decision(s.pool, 3))
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("exit %d: %s", code, errs.String())
	}
	got := out.String()
	if !strings.Contains(got, "leader: none") || strings.Contains(got, "model-1 ") || strings.Count(got, "model-2 ") != 1 ||
		strings.Index(got, "model-2 ") > strings.Index(got, "model-3 ") {
		t.Errorf("output:\n%s", got)
	}
}
