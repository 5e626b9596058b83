package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
	"github.com/hermod/hermod/testkit/natsembed"
)

type stores struct {
	etcd, nats, pool string
	cli              *clientv3.Client
	ns               *natsembed.Server
}

func newStores(t *testing.T) stores {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and NATS servers; skipped with -short")
	}
	cli, _ := coordtest.Start(t)
	ns := bustest.Start(t)
	return stores{etcd: strings.Join(cli.Endpoints(), ","), nats: ns.ClientURL(), pool: coordtest.PoolName(t), cli: cli, ns: ns}
}

func (s stores) natsFlags(extra ...string) []string {
	return append([]string{"--pool", s.pool, "--nats-url", s.nats}, extra...)
}

func (s stores) flags(extra ...string) []string {
	return append([]string{"--pool", s.pool, "--etcd-endpoints", s.etcd, "--nats-url", s.nats}, extra...)
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigSetAndGet(t *testing.T) {
	s := newStores(t)
	if _, errs, code := run(append([]string{"config", "get"}, s.flags()[:4]...)...); code != ExitFailure || !strings.Contains(errs, "has no config") {
		t.Errorf("get before set: %d %q", code, errs)
	}
	bad := writeFile(t, "plugins: [{type: queue-scorer, parameters: {bogus: 1}}]\nunknown: 1\n")
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), bad)...); code != ExitFailure || !strings.Contains(errs, "nothing was written") {
		t.Errorf("invalid config: %d %q", code, errs)
	}
	good := writeFile(t, "plugins: [{type: queue-scorer}]\n")
	out, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "200ms")...), good)...)
	if code != ExitOK || !strings.Contains(out, "config written (revision") || !strings.Contains(out, "no picker reported") {
		t.Fatalf("set: %d %q %q", code, out, errs)
	}
	out, _, code = run(append([]string{"config", "get"}, s.flags()[:4]...)...)
	if code != ExitOK || !strings.HasPrefix(out, "# pool "+s.pool+", revision ") || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("get: %d %q", code, out)
	}
	// A compare-and-swap on a stale revision is refused.
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0", "--if-revision", "1")...), good)...); code != ExitFailure || !strings.Contains(errs, "changed") {
		t.Errorf("stale if-revision: %d %q", code, errs)
	}
}

// A picker's report on the new revision is shown, and a refusal fails the
// command.
func TestConfigSetWaitsForThePickers(t *testing.T) {
	s := newStores(t)
	nc, _ := bustest.Connect(t, s.ns)
	subject, _ := bus.ConfigSubject(s.pool)
	cli := s.cli
	// A fake picker: it refuses every config it sees.
	w, err := coord.WatchConfig(context.Background(), cli, s.pool, func(v coord.ConfigVersion) {
		if v.Deleted {
			return
		}
		_ = bus.PublishCore(nc, subject, &eventsv1.ConfigStatus{Pool: s.pool, Replica: "picker-x", Revision: v.Revision, Error: "no GPU for this"})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	good := writeFile(t, "plugins: [{type: queue-scorer}]\n")
	out, _, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "5s")...), good)...)
	if code != ExitFailure || !strings.Contains(out, "picker-x: REFUSED") || !strings.Contains(out, "no GPU for this") {
		t.Errorf("%d %q", code, out)
	}
}

func TestEndpointsList(t *testing.T) {
	s := newStores(t)
	cli := s.cli
	for i, name := range []string{"pod-b", "pod-a"} {
		reg, err := coord.Register(context.Background(), cli, &registryv1.Endpoint{Name: name, Pool: s.pool, Address: "10.0.0.1", Port: int32(8000 + i),
			ServedModels: []string{"llama"}, Labels: map[string]string{"zone": "z1"}}, 5*time.Second, coord.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close(context.Background()) })
	}
	nc, js := bustest.Connect(t, s.ns)
	_ = nc
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), bus.MetricsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.PutLatestMetrics(context.Background(), kv, &eventsv1.PodMetrics{Pool: s.pool, Endpoint: "pod-a", Time: timestamppb.Now(),
		RunningRequests: 3, WaitingRequests: 1, KvCacheUsage: 0.25}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(append([]string{"endpoints", "list"}, s.flags()...)...)
	if code != ExitOK {
		t.Fatalf("%d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "pod-a") || !strings.Contains(lines[1], "25.0%") || !strings.Contains(lines[1], "zone=z1") ||
		!strings.HasPrefix(lines[2], "pod-b") || !strings.Contains(lines[2], " - ") {
		t.Errorf("table:\n%s", out)
	}
	out, _, code = run(append([]string{"endpoints", "list", "-o", "json"}, s.flags()...)...)
	if code != ExitOK || !strings.Contains(out, `"running_requests": 3`) && !strings.Contains(out, `"running_requests":"3"`) && !strings.Contains(out, `"running_requests": "3"`) {
		t.Errorf("json:\n%s", out)
	}
	out, _, code = run(append([]string{"endpoints", "list", "-o", "yaml"}, s.flags()...)...)
	if code != ExitOK || !strings.Contains(out, "- endpoint:") || !strings.Contains(out, "running_requests:") {
		t.Errorf("yaml:\n%s", out)
	}
	for _, format := range structuredFormats {
		out, _, _ := run(append([]string{"endpoints", "list", "--output", format}, s.flags()...)...)
		checkFields(t, "endpoints list -o "+format, decodeOne(t, format, out), map[string]string{
			"0.endpoint.name": "pod-a", "0.endpoint.port": "8001", "0.endpoint.labels.zone": "z1", "0.metrics.running_requests": "3",
			"1.endpoint.name": "pod-b", "1.endpoint.served_models.0": "llama", "1.metrics": "<missing>",
		})
		out, _, _ = run(append([]string{"endpoints", "list", "-o", format}, s.flags("--pool", s.pool+"-empty")...)...)
		if doc := decodeOne(t, format, out); field(doc, "0") != "<missing>" || !strings.HasPrefix(out, "[]") {
			t.Errorf("endpoints list -o %s of an empty pool: %q", format, out)
		}
	}
	if table, _, _ := run(append([]string{"endpoints", "list", "-o", "table"}, s.flags()...)...); !strings.HasPrefix(table, "NAME ") {
		t.Errorf("-o table:\n%s", table)
	}
}

func TestAuditReplay(t *testing.T) {
	s := newStores(t)
	nc, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	pub, err := bus.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := bus.DecisionsSubject(s.pool)
	for i := range 3 {
		pub.Publish(subject, strconv.Itoa(i), &eventsv1.RoutingDecision{
			DecisionId: strconv.Itoa(i), RequestId: "req-" + strconv.Itoa(i), Pool: s.pool, Time: timestamppb.Now(),
			PrimaryName: "pod-a", PrimaryEndpoint: "10.0.0.1:8000",
			Profiles: []*eventsv1.ProfileDecision{{Profile: "default", Role: eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY,
				Scorers:   []*eventsv1.Scorer{{Name: "queue-scorer", Weight: 1}},
				Endpoints: []*eventsv1.EndpointScores{{Name: "pod-b", Scores: []float64{0.5}, Total: 0.5}, {Name: "pod-a", Scores: []float64{1}, Total: 1}}}},
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(append([]string{"audit", "replay", "--since", "1m"}, s.natsFlags()...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitOK || len(lines) != 3 || !strings.Contains(lines[0], "req-0") || !strings.Contains(lines[0], "-> pod-a (10.0.0.1:8000)") ||
		!strings.Contains(lines[0], "total 1.00: queue-scorer=1.00") || !strings.Contains(lines[0], "| next pod-b 0.50") {
		t.Errorf("%d %q\n%s", code, errs, out)
	}
	if _, errs, code := run(append([]string{"audit", "replay", "--since", "yesterday"}, s.natsFlags()...)...); code != ExitUsage || !strings.Contains(errs, "RFC 3339") {
		t.Errorf("bad --since: %d %q", code, errs)
	}
	out, _, _ = run(append([]string{"audit", "replay", "--since", "1m", "-o", "json"}, s.natsFlags()...)...)
	if !strings.Contains(out, `"request_id":"req-2"`) {
		t.Errorf("json:\n%s", out)
	}
	out, _, _ = run(append([]string{"audit", "replay", "--since", "1m", "-o", "yaml"}, s.natsFlags()...)...)
	if !strings.Contains(out, "---\n") || !strings.Contains(out, "request_id: req-2") {
		t.Errorf("yaml:\n%s", out)
	}
	// One document per decision, each parsing on its own (JSON: one a line).
	for _, format := range structuredFormats {
		out, _, _ := run(append([]string{"audit", "replay", "--since", "1m", "--output", format}, s.natsFlags()...)...)
		docs := decodeAll(t, format, out)
		if len(docs) != 3 || format == formatJSON && strings.Count(out, "\n") != 3 {
			t.Fatalf("-o %s: %d documents:\n%s", format, len(docs), out)
		}
		for i, doc := range docs {
			checkFields(t, "audit replay -o "+format, doc, map[string]string{
				"request_id": "req-" + strconv.Itoa(i), "primary_name": "pod-a", "profiles.0.scorers.0.name": "queue-scorer", "profiles.0.endpoints.1.total": "1",
			})
		}
	}
	text, _, _ := run(append([]string{"audit", "replay", "--since", "1m"}, s.natsFlags()...)...)
	for _, alias := range []string{"text", "table"} {
		if out, _, _ := run(append([]string{"audit", "replay", "--since", "1m", "-o", alias}, s.natsFlags()...)...); out != text {
			t.Errorf("-o %s: %q, want %q", alias, out, text)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if got, _ := parseSince("90m", now); !got.Equal(now.Add(-90 * time.Minute)) {
		t.Errorf("90m -> %v", got)
	}
	if got, _ := parseSince("2026-11-21T10:00:00Z", now); !got.Equal(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("rfc3339 -> %v", got)
	}
	for _, bad := range []string{"-5m", "soon", ""} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// audit tail shows decisions taken after it started, not older ones.
func TestAuditTail(t *testing.T) {
	s := newStores(t)
	nc, js := bustest.Connect(t, s.ns)
	if err := bus.EnsureStreams(context.Background(), js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	subject, _ := bus.DecisionsSubject(s.pool)
	publish := func(id string) {
		b, _ := proto.Marshal(&eventsv1.RoutingDecision{DecisionId: id, RequestId: "req-" + id, Pool: s.pool, Time: timestamppb.Now(), PrimaryName: "pod-" + id})
		if _, err := js.Publish(context.Background(), subject, b); err != nil {
			t.Fatal(err)
		}
	}
	publish("old")
	_ = nc
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, append([]string{"audit", "tail"}, s.natsFlags()...), &out, &errs) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "req-new") && time.Now().Before(deadline) {
		publish("new")
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("exit %d: %s", code, errs.String())
	}
	if got := out.String(); !strings.Contains(got, "-> pod-new") || strings.Contains(got, "req-old") {
		t.Errorf("tail output:\n%s", got)
	}
}

// What config get printed sets again without its header piling up, and a
// Heimdall values file stores its config block alone.
func TestConfigRoundTripAndValuesFile(t *testing.T) {
	s := newStores(t)
	first := writeFile(t, "# my comment\nplugins: [{type: queue-scorer}]\n")
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), first)...); code != ExitOK {
		t.Fatalf("set: %s", errs)
	}
	for range 2 {
		out, _, code := run(append([]string{"config", "get"}, s.flags()[:4]...)...)
		if code != ExitOK {
			t.Fatal("get failed")
		}
		if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), writeFile(t, out))...); code != ExitOK {
			t.Fatalf("set what get printed: %s", errs)
		}
	}
	out, _, _ := run(append([]string{"config", "get"}, s.flags()[:4]...)...)
	if n := strings.Count(out, "# pool "); n != 1 || !strings.Contains(out, "# my comment") {
		t.Fatalf("after two round trips:\n%s", out)
	}
	values := writeFile(t, "replicaCount: 2\nimage: {tag: v1}\nconfig:\n  plugins:\n    - type: kv-cache-utilization-scorer\n")
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), values)...); code != ExitOK {
		t.Fatalf("set a values file: %s", errs)
	}
	out, _, _ = run(append([]string{"config", "get"}, s.flags()[:4]...)...)
	if strings.Contains(out, "replicaCount") || strings.Contains(out, "config:") || !strings.Contains(out, "kv-cache-utilization-scorer") {
		t.Fatalf("a values file stored as:\n%s", out)
	}
}

// An operator registers a server Hermod did not start, permanently or for
// a lease, and deregisters it; endpoints list shows it.
func TestEndpointsRegisterAndDeregister(t *testing.T) {
	s := newStores(t)
	ctl := func(args ...string) (string, string, int) {
		return run(append(append([]string{"endpoints"}, args[0]), append(s.flags()[:4], args[1:]...)...)...)
	}
	out, errs, code := ctl("register", "--model", "llama", "--served-models", "llama,sql-lora", "--labels", "mif.moreh.io/role=decode,zone=a",
		"--kv-events", "tcp://10.0.0.5:5557", "--kv-replay", "tcp://10.0.0.5:5558", "--permanent", "vm-a", "10.0.0.5:8000")
	if code != ExitOK || !strings.Contains(out, "vm-a registered") || !strings.Contains(out, "permanent") {
		t.Fatalf("register: %d %q %q", code, out, errs)
	}
	snap, err := coord.LoadSnapshot(context.Background(), s.cli, s.pool)
	ep := snap.Endpoints["vm-a"]
	if err != nil || ep.GetPort() != 8000 || ep.GetLabels()["zone"] != "a" || len(ep.GetServedModels()) != 2 || ep.GetKvReplayEndpoint() != "tcp://10.0.0.5:5558" {
		t.Fatalf("registered %v, %v", ep, err)
	}
	for _, bad := range [][]string{
		{"register", "vm-b", "10.0.0.6:8000"},                                     // no model
		{"register", "--model", "m", "vm-b", "10.0.0.6"},                          // no port
		{"register", "--model", "m", "--labels", "novalue", "vm-b", "h:1"},        // a label without =
		{"register", "--model", "m", "--kv-events", "10.0.0.6:1", "vm-b", "h:1"},  // not tcp://
		{"register", "--model", "m", "--kv-replay", "tcp://h", "vm-b", "h:1"},     // not tcp://host:port
		{"register", "--model", "m", "vm-b", ":8000"},                             // no host
		{"register", "--model", "m", "--data-parallel-rank", "-1", "vm-b", "h:1"}, // not a rank
		{"register", "--model", "m", "--data-parallel-rank", "x", "vm-b", "h:1"},  // not a number
	} {
		if _, _, code := ctl(bad...); code != ExitUsage {
			t.Errorf("%v: code %d, want usage", bad, code)
		}
	}
	// Each fault is said on its own line, naming the flag or argument.
	_, errs, code = ctl("register", "--kv-events", "h:1", "vm/b", "h:1")
	for _, want := range []string{"register: --model: required\n", "register: --kv-events: \"h:1\" is not tcp://host:port\n", "register: NAME: "} {
		if code != ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("register with three faults: %d %q, want %q", code, errs, want)
		}
	}
	// The model is added to --served-models when missing.
	if out, errs, code := ctl("register", "--model", "llama", "--served-models", "sql-lora", "--ttl", "1m", "vm-c", "10.0.0.7:8000"); code != ExitOK {
		t.Fatalf("register vm-c: %d %q %q", code, out, errs)
	}
	snap, err = coord.LoadSnapshot(context.Background(), s.cli, s.pool)
	if got := snap.Endpoints["vm-c"].GetServedModels(); err != nil || !slices.Equal(got, []string{"llama", "sql-lora"}) {
		t.Fatalf("served models of vm-c %v, %v", got, err)
	}
	if out, errs, code := ctl("deregister", "vm-a"); code != ExitOK || !strings.Contains(out, "deregistered") {
		t.Fatalf("deregister: %d %q %q", code, out, errs)
	}
	if _, errs, code := ctl("deregister", "vm-a"); code != ExitFailure || !strings.Contains(errs, "no endpoint vm-a") {
		t.Fatalf("deregister again: %d %q", code, errs)
	}
}
