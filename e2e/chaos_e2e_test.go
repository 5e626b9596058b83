package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/faultproxy"
	"github.com/hermod/hermod/testkit/mongotest"
	"github.com/hermod/hermod/testkit/redistest"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// The fault matrix: each case breaks one part of a running stack under a
// steady mixed load (8 clients; completions and chat, streamed and not;
// stored Responses-API turns) and holds the stack to its invariants:
//   - every request the gateway accepted (a 200) has exactly one routing
//     decision and one completion in the streams, unless the gateway
//     itself died under it;
//   - every response acknowledged as stored can be read back;
//   - the client, retrying as OpenAI's SDKs do, sees only the errors the
//     fault made unavoidable (streams cut by a dead pod or gateway).
//
// `make test` runs the quick cases (marked quick), in its TLS pass of the
// e2e suite only (make e2e-tls; the stacks are the same but for TLS, and
// one pass keeps the suite short); `make chaos` runs them all
// (HERMOD_CHAOS=full), with or without TLS, and writes the table of
// figures to the file HERMOD_CHAOS_REPORT names.

// chaosFull: every case, not only the quick ones.
var chaosFull = os.Getenv("HERMOD_CHAOS") == "full"

const (
	chaosClients = 8
	// chaosWarmup runs the load before the fault, chaosSettle after the
	// broken part is back, before the load stops.
	chaosWarmup = 1500 * time.Millisecond
	chaosSettle = 2 * time.Second
	// chaosPartition is how long a network fault lasts.
	chaosPartition = 10 * time.Second
	// chaosCutOff is how long a picker routes cut off from NATS before it
	// is killed.
	chaosCutOff = 2 * time.Second
	// chaosAuditWait bounds the wait for the streams to hold every
	// accepted request's events.
	chaosAuditWait = 30 * time.Second
)

// chaosCase is one fault.
type chaosCase struct {
	name  string
	quick bool
	fault func(t *testing.T, r *chaosRun) faultOutcome
}

// faultOutcome is what a fault did.
type faultOutcome struct {
	// recovery is the time from the fault to the broken part serving
	// again (restarted and ready, healed, a new leader).
	recovery time.Duration
	// unavoidable says whether a failed call is one the fault made
	// unavoidable; nil: none is.
	unavoidable func(c *call) bool
	// gatewayDied: requests in flight at the gateway when it died at
	// killed, or answered just before, may lack their events.
	gatewayDied bool
	killed      time.Time
	// check, when set, runs once the load has stopped and the streams
	// were audited.
	check func(t *testing.T, r *chaosRun)
}

// chaosRow is one line of the report.
type chaosRow struct {
	fault                                  string
	requests, retried, clientErrors        int
	recovery                               time.Duration
	lostDecisions, lostCompletions, dupes  int
	lostWithGateway                        int
	acknowledged, lostResponses, allowance int
}

// chaosRun is a stack under test with the handles its faults need.
type chaosRun struct {
	s     *devstack
	audit *chaosAudit
	// gatewayNATS, pickerNATS, pickerEtcd and storeRedis stand between
	// those services and their backends (nil where the stack has none).
	gatewayNATS, pickerNATS, pickerEtcd, storeRedis *faultproxy.Proxy
	redis                                           *redistest.Server
	mongo                                           *mongotest.Server
	rows                                            *[]chaosRow
}

// TestChaos runs the fault matrix on three stacks: one with a single NATS
// server and etcd member behind fault proxies and a tiered responses store
// (a persistent redis-server and a MongoDB server), one with a 3-node NATS
// cluster (R3 streams) and a 3-member etcd cluster, and an autoscaled
// fleet with one picker.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix runs whole stacks; skipped with -short")
	}
	if !chaosFull && !e2eTLS {
		t.Skip("the quick fault matrix runs in the TLS pass (make e2e-tls), the full one in make chaos (HERMOD_CHAOS=full)")
	}
	var rows []chaosRow
	t.Run("single", func(t *testing.T) {
		r := startSingleChaosStack(t, &rows)
		r.runCases(t, []chaosCase{
			{name: "kill -9 a pod mid-stream", quick: true, fault: killPod},
			{name: "kill -9 one picker of two", quick: true, fault: killPicker("picker-1")},
			{name: "kill -9 a picker cut off from NATS", quick: true, fault: killPickerCutOff("picker-1")},
			{name: "kill -9 both pickers", fault: killPickers},
			{name: "hang one picker of two (SIGSTOP)", fault: hangPicker("picker-1")},
			{name: "kill -9 the gateway", fault: killGateway},
			{name: "kill -9 the indexer", fault: killProcess("indexer")},
			{name: "kill -9 the collector (leader)", fault: killProcess("collector")},
			{name: "kill -9 the responses service", fault: killProcess("responses")},
			{name: "kill -9 redis-server", fault: killRedis},
			{name: "kill the MongoDB server", fault: killMongo},
			{name: "gateway-NATS partition 10s (stall)", quick: true, fault: partition("gateway", faultproxy.Stall)},
			{name: "gateway-NATS connections reset", fault: partition("gateway", faultproxy.Reset)},
			{name: "picker-etcd partition 10s (drop)", fault: partition("picker", faultproxy.Drop)},
			{name: "responses-Redis partition 10s (stall)", fault: partition("redis", faultproxy.Stall)},
		})
	})
	t.Run("clustered", func(t *testing.T) {
		r := startClusteredChaosStack(t, &rows)
		r.runCases(t, []chaosCase{
			{name: "stop one NATS node of three", fault: stopBackend("nats", false)},
			{name: "stop the NATS stream leader", quick: true, fault: stopBackend("nats", true)},
			{name: "kill one etcd member of three", fault: stopBackend("etcd", false)},
			{name: "kill the etcd leader", fault: stopBackend("etcd", true)},
		})
	})
	t.Run("autoscaled", func(t *testing.T) {
		if !chaosFull {
			t.Skip("in make chaos only (HERMOD_CHAOS=full)")
		}
		r := &chaosRun{rows: &rows}
		r.s = startStack(t, "--variants", "base:5:2:4:2", "--pickers", "1", "--speed", "20")
		r.audit = r.s.audit(t)
		r.runCases(t, []chaosCase{
			{name: "kill -9 the autoscaler (leader)", fault: killProcess("autoscaler")},
			{name: "kill -9 the only picker", fault: killProcess("picker-0")},
		})
	})
	report := chaosTable(rows)
	t.Logf("fault matrix:\n%s", report)
	if path := os.Getenv("HERMOD_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func startSingleChaosStack(t *testing.T, rows *[]chaosRow) *chaosRun {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the whole stack; skipped with -short")
	}
	natsPort, etcdPort := freePorts(t, 1), freePorts(t, 1)
	r := &chaosRun{rows: rows}
	var err error
	if r.gatewayNATS, err = faultproxy.Start("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", natsPort)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.gatewayNATS.Close() })
	if r.pickerNATS, err = faultproxy.Start("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", natsPort)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.pickerNATS.Close() })
	if r.pickerEtcd, err = faultproxy.Start("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", etcdPort)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.pickerEtcd.Close() })
	// A redis-server that keeps every write (AOF, fsync always), as a
	// production tier 1 does, so that kill -9 loses nothing acknowledged.
	r.redis = redistest.StartArgs(t, "--appendonly", "yes", "--appendfsync", "always", "--dir", t.TempDir())
	if r.storeRedis, err = faultproxy.Start("127.0.0.1:0", r.redis.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.storeRedis.Close() })
	r.mongo = mongotest.Run(t)
	store := writeFile(t, t.TempDir(), "store.json", fmt.Sprintf(`{"tieredConfig":{"redis":{"address":"redis://%s"},"mongo":{"uri":%q,"database":"hermod_chaos","collection":"responses"}}}`,
		r.storeRedis.Addr(), r.mongo.URI()))
	natsScheme, etcdScheme := "nats", "http"
	if e2eTLS {
		natsScheme, etcdScheme = "tls", "https"
	}
	r.s = startStack(t, "--pods", "4", "--slow-pods", "0", "--pickers", "2", "--speed", "20",
		"--nats-port", fmt.Sprint(natsPort), "--etcd-port", fmt.Sprint(etcdPort), "--control-listen", "127.0.0.1:0",
		"--gateway-args=--nats-url,"+natsScheme+"://"+r.gatewayNATS.Addr(),
		"--picker-args=--etcd-endpoints,"+etcdScheme+"://"+r.pickerEtcd.Addr()+",--nats-url,"+natsScheme+"://"+r.pickerNATS.Addr(),
		"--responses-args=--store-config,@"+store)
	r.audit = r.s.audit(t)
	return r
}

func startClusteredChaosStack(t *testing.T, rows *[]chaosRow) *chaosRun {
	t.Helper()
	r := &chaosRun{rows: rows}
	r.s = startStack(t, "--pods", "3", "--slow-pods", "0", "--pickers", "2", "--speed", "20",
		"--nats-cluster", "3", "--etcd-cluster", "3", "--control-listen", "127.0.0.1:0")
	r.audit = r.s.audit(t)
	return r
}

// runCases runs the cases one after the other on the stack: the quick
// ones only, unless the run is full.
func (r *chaosRun) runCases(t *testing.T, cases []chaosCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.quick && !chaosFull {
				t.Skip("in make chaos only (HERMOD_CHAOS=full)")
			}
			r.runCase(t, c)
		})
	}
}

func (r *chaosRun) runCase(t *testing.T, c chaosCase) {
	load := r.s.startChaosLoad(chaosClients)
	time.Sleep(chaosWarmup)
	out := c.fault(t, r)
	time.Sleep(chaosSettle)
	load.stop()
	calls := load.since(time.Time{})
	row := chaosRow{fault: c.name, requests: len(calls), recovery: out.recovery}
	var unexpected []*call
	for _, cl := range calls {
		if len(cl.attempts) > 1 {
			row.retried++
		}
		if !cl.failed() {
			continue
		}
		row.clientErrors++
		if out.unavoidable != nil && out.unavoidable(cl) {
			row.allowance++
			continue
		}
		unexpected = append(unexpected, cl)
	}
	r.checkEvents(t, calls, out, &row)
	r.checkStored(t, calls, &row)
	if out.check != nil {
		out.check(t, r)
	}
	*r.rows = append(*r.rows, row)
	t.Logf("%d requests, %d retried, %d client errors (%d unavoidable), recovery %s, lost decisions %d, completions %d (%d with a dead gateway), duplicates %d, responses %d/%d lost",
		row.requests, row.retried, row.clientErrors, row.allowance, row.recovery.Round(time.Millisecond), row.lostDecisions, row.lostCompletions, row.lostWithGateway, row.dupes, row.lostResponses, row.acknowledged)
	if len(unexpected) > 0 {
		for i, cl := range unexpected {
			if i == 5 {
				t.Errorf("... and %d more", len(unexpected)-5)
				break
			}
			t.Errorf("a client error the fault did not make unavoidable: %s", cl)
		}
	}
	if row.requests < 20 {
		t.Errorf("only %d requests under the fault: the load stalled", row.requests)
	}
}

// checkEvents waits until every accepted attempt has one decision and one
// completion in the streams, then counts what is missing or doubled.
func (r *chaosRun) checkEvents(t *testing.T, calls []*call, out faultOutcome, row *chaosRow) {
	t.Helper()
	type want struct {
		id       string
		accepted bool
		call     *call
	}
	var wants []want
	for _, cl := range calls {
		for _, a := range cl.attempts {
			if a.requestID != "" {
				wants = append(wants, want{a.requestID, a.accepted, cl})
			}
		}
	}
	// exempt: an attempt the dying gateway was serving, or had answered
	// within a second of its death: its completion may have been in the
	// gateway's publish buffer and been lost with it.
	exempt := func(w want) bool {
		return out.gatewayDied && w.call.end.After(out.killed.Add(-time.Second))
	}
	complete := func() bool {
		for _, w := range wants {
			if d, c := r.audit.counts(w.id); w.accepted && !exempt(w) && (d != 1 || c != 1) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(chaosAuditWait)
	for !complete() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, w := range wants {
		d, c := r.audit.counts(w.id)
		if d > 1 || c > 1 {
			row.dupes++
			t.Errorf("request %s: %d decisions and %d completions in the streams", w.id, d, c)
			continue
		}
		if !w.accepted {
			continue
		}
		if exempt(w) {
			if d == 0 || c == 0 {
				row.lostWithGateway++
			}
			continue
		}
		if d == 0 {
			row.lostDecisions++
		}
		if c == 0 {
			row.lostCompletions++
		}
		if d == 0 || c == 0 {
			t.Errorf("accepted request %s (%s): %d decisions, %d completions", w.id, w.call, d, c)
		}
	}
}

// checkStored reads back every response the client got acknowledged.
func (r *chaosRun) checkStored(t *testing.T, calls []*call, row *chaosRow) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, cl := range calls {
		if cl.responseID == "" {
			continue
		}
		row.acknowledged++
		var status int
		for try := 0; try < 20; try++ { // the store may still be coming back
			resp, err := client.Get(r.s.url("/v1/responses/" + url.PathEscape(cl.responseID)))
			if err == nil {
				status = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection is reused
				_ = resp.Body.Close()
				if status == http.StatusOK || status == http.StatusNotFound {
					break
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		if status != http.StatusOK {
			row.lostResponses++
			t.Errorf("acknowledged response %s: GET answered %d", cl.responseID, status)
		}
	}
}

// state reads the devstack's state file as it is now.
func (r *chaosRun) state(t *testing.T) *stackstate.State {
	t.Helper()
	st, err := stackstate.Read(r.s.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// kill kill -9s the named devstack children at once and waits until the
// devstack has restarted each and it passed its readiness probe; it
// returns the time from the kill to the last one ready.
func (r *chaosRun) kill(t *testing.T, names ...string) time.Duration {
	t.Helper()
	k := r.signal(t, syscall.SIGKILL, names...)
	return r.awaitRestarted(t, k)
}

// killed is what signal did: the children as they were, and when.
type killed struct {
	before map[string]stackstate.Child
	at     time.Time
}

// signal sends sig to the named devstack children at once.
func (r *chaosRun) signal(t *testing.T, sig syscall.Signal, names ...string) killed {
	t.Helper()
	st := r.state(t)
	before := map[string]stackstate.Child{}
	for _, name := range names {
		c, ok := st.Child(name)
		if !ok || !c.Ready() {
			t.Fatalf("no ready child %q in the state file: %+v", name, c)
		}
		before[name] = c
	}
	at := time.Now()
	for _, c := range before {
		if err := syscall.Kill(c.PID, sig); err != nil {
			t.Fatalf("%s to %s (%d): %v", sig, c.Name, c.PID, err)
		}
	}
	return killed{before: before, at: at}
}

// awaitRestarted waits until the devstack has restarted each child k
// killed and it passed its readiness probe; it returns the time from the
// kill to the last one ready.
func (r *chaosRun) awaitRestarted(t *testing.T, k killed) time.Duration {
	t.Helper()
	for name, old := range k.before {
		waitFor(t, 60*time.Second, name+" restarted and ready", func() bool {
			st, err := stackstate.Read(r.s.stateFile)
			if err != nil {
				return false
			}
			c, ok := st.Child(name)
			return ok && c.Restarts > old.Restarts && c.Ready()
		})
	}
	return time.Since(k.at)
}

func killProcess(name string) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		return faultOutcome{recovery: r.kill(t, name)}
	}
}

// killPicker kills one picker of two; once the load is over its rebuilt
// projection must equal the live one's.
func killPicker(name string) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		return faultOutcome{recovery: r.kill(t, name), check: projectionsAgree}
	}
}

// hangPicker stops one picker of two with SIGSTOP: alive, listening, and
// answering nothing. The devstack's liveness probe kills it and it
// restarts; the recovery is from the stop to the restarted picker ready.
// A Pick it holds times out and the client's retry is served.
func hangPicker(name string) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		return faultOutcome{recovery: r.awaitRestarted(t, r.signal(t, syscall.SIGSTOP, name)), check: projectionsAgree}
	}
}

// killPickerCutOff stalls the pickers' NATS connections, kill -9s one
// picker when it has routed requests for a while that it could not have
// published, and heals the stall. The gateway publishes the decisions the
// pickers hand it, so none of those is lost with the picker.
func killPickerCutOff(name string) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		p := r.pickerNATS
		if p.Active() == 0 {
			t.Fatalf("no picker connection goes through the fault proxy to %s", p.Upstream())
		}
		p.Set(faultproxy.Stall)
		time.Sleep(chaosCutOff)
		k := r.signal(t, syscall.SIGKILL, name)
		p.Set(faultproxy.Pass)
		return faultOutcome{recovery: r.awaitRestarted(t, k), check: projectionsAgree}
	}
}

// killPickers kills both pickers at once: the pool has no picker until
// the devstack restarts them.
func killPickers(t *testing.T, r *chaosRun) faultOutcome {
	return faultOutcome{recovery: r.kill(t, "picker-0", "picker-1"), check: projectionsAgree}
}

// projectionsAgree waits until the two pickers' projections are equal:
// the same config revision, endpoints, in-flight counts (none) and
// prefix blocks per endpoint.
func projectionsAgree(t *testing.T, r *chaosRun) {
	t.Helper()
	var a, b projection
	agree := func() bool {
		a, b = r.s.projection(t, 0), r.s.projection(t, 1)
		if a.ConfigRevision != b.ConfigRevision || a.InFlight != 0 || b.InFlight != 0 || len(a.Endpoints) != len(b.Endpoints) {
			return false
		}
		for name, e := range a.Endpoints {
			if o, ok := b.Endpoints[name]; !ok || o != e {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(15 * time.Second)
	for !agree() {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted picker's projection differs from its peer's:\n%+v\n%+v", a, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killPod kills a pod that serves streams: the streams it was serving
// are cut (after their 200, so not retried); nothing else may fail.
func killPod(t *testing.T, r *chaosRun) faultOutcome {
	pod := r.state(t).Pods[1]
	return faultOutcome{recovery: r.kill(t, pod.Name), unavoidable: func(c *call) bool {
		f := c.final()
		return f.servedBy == pod.Address && f.status == http.StatusOK
	}}
}

// killGateway kills the only gateway: the requests it was serving die
// with it; the rest are retried until it is back.
func killGateway(t *testing.T, r *chaosRun) faultOutcome {
	d := r.kill(t, "gateway")
	killed := time.Now().Add(-d)
	return faultOutcome{recovery: d, gatewayDied: true, killed: killed, unavoidable: func(c *call) bool {
		return c.began.Before(killed) && !c.end.Before(killed) && c.final().status == http.StatusOK
	}}
}

// killRedis kill -9s the responses store's redis-server (it keeps its AOF)
// and starts it again after 5 s.
func killRedis(t *testing.T, r *chaosRun) faultOutcome {
	r.redis.Stop()
	time.Sleep(5 * time.Second)
	began := time.Now()
	r.redis.Restart()
	return faultOutcome{recovery: time.Since(began) + 5*time.Second}
}

// killMongo stops the MongoDB server for 5 s.
func killMongo(t *testing.T, r *chaosRun) faultOutcome {
	r.mongo.Stop()
	time.Sleep(5 * time.Second)
	began := time.Now()
	r.mongo.Start()
	return faultOutcome{recovery: time.Since(began) + 5*time.Second}
}

// partition breaks the connections between a service and its backend
// through the proxy between them for chaosPartition (a reset is one blow:
// the connections are reset, new ones pass).
func partition(between string, mode faultproxy.Mode) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		p := map[string]*faultproxy.Proxy{"gateway": r.gatewayNATS, "picker": r.pickerEtcd, "redis": r.storeRedis}[between]
		if p.Active() == 0 {
			t.Fatalf("no %s connection goes through the fault proxy to %s", between, p.Upstream())
		}
		if mode == faultproxy.Reset {
			p.Set(faultproxy.Reset)
			time.Sleep(50 * time.Millisecond)
			p.Set(faultproxy.Pass)
			return faultOutcome{}
		}
		p.For(context.Background(), mode, chaosPartition)
		return faultOutcome{recovery: chaosPartition}
	}
}

// stopBackend stops one embedded NATS server or kills one etcd member
// (the leader, or one that is not) through the devstack's control
// endpoint for 10 s, then starts it again; the recovery is the time to a
// leader other than the one stopped.
func stopBackend(kind string, leader bool) func(*testing.T, *chaosRun) faultOutcome {
	return func(t *testing.T, r *chaosRun) faultOutcome {
		b := r.backends(t)
		victim := 0
		current := b.EtcdLeader
		if kind == "nats" {
			current = b.StreamLeaders["HERMOD_DECISIONS"]
		}
		if current < 0 {
			t.Fatalf("no %s leader: %+v", kind, b)
		}
		if leader {
			victim = current
		} else {
			victim = (current + 1) % 3
		}
		action := "kill"
		if kind == "nats" {
			action = "stop"
		}
		stopped := time.Now()
		r.control(t, fmt.Sprintf("/backends/%s/%d/%s", kind, victim, action))
		var recovery time.Duration
		waitFor(t, 30*time.Second, "a "+kind+" leader", func() bool {
			b := r.backends(t)
			l := b.EtcdLeader
			if kind == "nats" {
				l = b.StreamLeaders["HERMOD_DECISIONS"]
			}
			if l >= 0 && l != victim {
				recovery = time.Since(stopped)
				return true
			}
			return false
		})
		time.Sleep(chaosPartition - time.Since(stopped))
		r.control(t, fmt.Sprintf("/backends/%s/%d/start", kind, victim))
		return faultOutcome{recovery: recovery}
	}
}

// backendsState is GET /backends of the devstack's control endpoint.
type backendsState struct {
	StreamLeaders map[string]int `json:"stream_leaders"`
	EtcdLeader    int            `json:"etcd_leader"`
}

func (r *chaosRun) backends(t *testing.T) backendsState {
	t.Helper()
	resp, err := http.Get("http://" + r.s.state.Control + "/backends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b backendsState
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *chaosRun) control(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Post("http://"+r.s.state.Control+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control %s: %d", path, resp.StatusCode)
	}
}

// chaosTable is the report: one row per fault.
func chaosTable(rows []chaosRow) string {
	var b strings.Builder
	b.WriteString("| fault | requests | retried | client errors (unavoidable) | recovery | lost decisions / completions | duplicates | responses lost / acknowledged |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		lost := fmt.Sprintf("%d / %d", r.lostDecisions, r.lostCompletions)
		if r.lostWithGateway > 0 {
			lost += fmt.Sprintf(" (%d with the killed gateway)", r.lostWithGateway)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d (%d) | %s | %s | %d | %d / %d |\n", r.fault, r.requests, r.retried, r.clientErrors, r.allowance,
			r.recovery.Round(10*time.Millisecond), lost, r.dupes, r.lostResponses, r.acknowledged)
	}
	return b.String()
}
