package coord

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/testkit/coordtest"
)

// clusterTestsEnv turns on the heavy cluster tests (members stopped and
// restarted): HERMOD_CLUSTER_TESTS=1, as `make test-cluster` sets it.
const clusterTestsEnv = "HERMOD_CLUSTER_TESTS"

// clusterEnv is a 3-member cluster and the features under test, each on a
// client of its own that knows every member's endpoint.
type clusterEnv struct {
	c       *coordtest.Cluster
	admin   *clientv3.Client
	pool    string
	reg     *Registration
	eps     *recorder
	configs *configRecorder
	leader  *Leadership
	next    <-chan campaignResult
}

// The cluster's TTLs: longer than an election (0.5 to 1 s with etcdembed's
// 500 ms election timeout) and than a member's stop, as in production.
const clusterTTL = 5 * time.Second

func newClusterEnv(t *testing.T) *clusterEnv {
	t.Helper()
	c := coordtest.StartCluster(t, 3)
	ctx := testContext(t)
	e := &clusterEnv{c: c, pool: coordtest.PoolName(t), eps: &recorder{}, configs: &configRecorder{}}
	client := func() *clientv3.Client {
		cli, err := NewClient(ctx, c.Endpoints())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	opts := []Option{WithLogger(testLogger(t)), WithRequestTimeout(2 * time.Second), WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond)}
	e.admin = client()
	var err error
	if e.reg, err = Register(ctx, client(), testEndpoint(e.pool, "pod-a"), clusterTTL, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.reg.Close(context.Background()) })
	watchers := client()
	ew, err := WatchEndpoints(ctx, watchers, e.pool, e.eps.record, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ew.Close)
	cw, err := WatchConfig(ctx, watchers, e.pool, e.configs.record, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Close)
	if e.leader, err = Campaign(ctx, client(), e.pool, "first", clusterTTL, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.leader.Close(context.Background()) })
	campaignCtx, cancel := context.WithCancel(context.Background())
	e.next = campaignAsync(campaignCtx, t, client(), e.pool, "second", clusterTTL, opts...)
	t.Cleanup(func() {
		cancel()
		if r := <-e.next; r.l != nil {
			_ = r.l.Close(context.Background())
		}
	})
	return e
}

// write puts config version v and updates the endpoint's model to v,
// retrying until both succeed, and returns how long that took and the
// config's revision.
func (e *clusterEnv) write(t *testing.T, v int) (time.Duration, int64) {
	t.Helper()
	start := time.Now()
	var rev int64
	eventually(t, 20*time.Second, "config write never succeeded", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		cv, err := PutConfig(ctx, e.admin, e.pool, []byte("v"+strconv.Itoa(v)))
		rev = cv.Revision
		return err == nil
	})
	ep := testEndpoint(e.pool, "pod-a")
	ep.Model = "model-" + strconv.Itoa(v)
	eventually(t, 20*time.Second, "endpoint update never succeeded", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		return e.reg.Update(ctx, ep) == nil
	})
	return time.Since(start), rev
}

// delivered waits until the watchers have version v and returns how long
// that took.
func (e *clusterEnv) delivered(t *testing.T, v int, rev int64) time.Duration {
	t.Helper()
	start := time.Now()
	e.configs.wait(t, "v"+strconv.Itoa(v), func(cv ConfigVersion) bool { return cv.Revision == rev })
	want := "model-" + strconv.Itoa(v)
	eventually(t, 10*time.Second, "endpoint update "+want+" not delivered", func() bool {
		s, ok := e.eps.last()
		return ok && s.Endpoints["pod-a"] != nil && s.Endpoints["pod-a"].GetModel() == want
	})
	return time.Since(start)
}

// The registry, the election and the config watch go on while a follower
// is stopped and restarted, and then while the leader is killed (no
// hand-over) and restarted: the leader keeps its leadership and the
// endpoint its lease, writes succeed, and the watchers deliver every
// config version once, in order.
func TestClusterMemberAndLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: starts a 3-member etcd cluster (skipped with -short)")
	}
	if os.Getenv(clusterTestsEnv) == "" {
		t.Skip("heavy cluster test (members stopped and restarted): set " + clusterTestsEnv + "=1 or run make test-cluster")
	}
	e := newClusterEnv(t)
	lease := e.reg.LeaseID()
	v := 0
	for _, fault := range []string{"follower", "leader"} {
		lead, err := e.c.WaitLeader()
		if err != nil {
			t.Fatal(err)
		}
		victim := lead
		start := time.Now()
		if fault == "follower" {
			victim = (lead + 1) % 3
			e.c.Stop(victim)
		} else {
			e.c.Kill(victim)
		}
		stopped := time.Since(start)
		v++
		took, rev := e.write(t, v)
		latency := e.delivered(t, v, rev)
		newLead, err := e.c.WaitLeader(victim)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := e.c.Restart(victim); err != nil {
			t.Fatal(err)
		}
		v++
		_, rev = e.write(t, v)
		e.delivered(t, v, rev)
		t.Logf("%s (member %d) down %s (its stop took %s): write took %s, delivered %s later; leader now %d; "+
			"leadership held: %v, endpoint lease kept: %v",
			fault, victim, time.Since(start).Round(time.Millisecond), stopped.Round(time.Millisecond),
			took.Round(10*time.Microsecond), latency.Round(10*time.Microsecond), newLead, e.leader.Err() == nil, e.reg.LeaseID() == lease)
	}
	if err := e.leader.Err(); err != nil {
		t.Errorf("leadership lost: %v", err)
	}
	if e.reg.LeaseID() != lease {
		t.Errorf("endpoint registered again (lease %x, was %x): its lease was lost", e.reg.LeaseID(), lease)
	}
	noneElected(t, 100*time.Millisecond, e.next)
	checkLeader(t, e.admin, e.pool, "first")
	checkConfigSequence(t, e.configs.all())
	written := 0
	for _, cv := range e.configs.all() {
		if !cv.Deleted { // the first delivery says there is none yet
			written++
		}
	}
	if written != v {
		t.Errorf("%d config versions delivered, want %d (each once)", written, v)
	}
}
