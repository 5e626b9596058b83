package coord

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/coordtest"
)

// etcd unreachable for longer than the TTLs, then back (one outage of a
// server of the test's own, shared by every feature):
//   - the leader steps down within the TTL of etcd going away, and the
//     waiting candidate is elected once etcd is back;
//   - a campaign whose context ends while etcd is down returns promptly;
//   - the config watcher delivers nothing while etcd is down (its reader
//     keeps the config it has), then the version written after the restart,
//     and no duplicate of the one it had;
//   - a member whose lease expired joins again, and the members watcher
//     lists it.
func TestEtcdOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	own, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	cli := own.Client(t)
	ctx := testContext(t)
	name := coordtest.PoolName(t)
	const ttl = time.Second
	opts := []Option{
		WithLogger(testLogger(t)), WithRequestTimeout(time.Second),
		WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond),
	}

	// Before: a config, a leader and a waiting candidate, a member.
	v1, err := PutConfig(ctx, cli, name, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	configs := &configRecorder{}
	cw, err := WatchConfig(ctx, cli, name, configs.record, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	configs.wait(t, "v1", func(v ConfigVersion) bool { return v.Revision == v1.Revision })

	leader, err := Campaign(ctx, own.Client(t), name, "first", ttl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = leader.Close(ctx) }()
	next := campaignAsync(ctx, t, own.Client(t), name, "second", ttl, opts...)

	member, err := Join(ctx, own.Client(t), name, "pod-a", ttl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = member.Close(ctx) }()
	members := &membersRecorder{}
	mw, err := WatchMembers(ctx, cli, name, members.record, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	joined := members.waitIDs(t, "pod-a")[0]
	noneElected(t, 100*time.Millisecond, next)

	// etcd goes away.
	stopping := time.Now()
	own.Stop()
	stopped := time.Now()
	d := waitDone(t, leader, 3*ttl)
	t.Logf("leader stepped down %s after etcd began to stop, which took %s (TTL %s)",
		time.Since(stopping).Round(time.Millisecond), stopped.Sub(stopping).Round(time.Millisecond), ttl)
	// The last acknowledged keepalive was at most a quarter TTL before etcd
	// became unreachable, and the leader steps down a tenth of the TTL
	// before the lease could expire.
	if d > ttl {
		t.Fatalf("leader stepped down %s after etcd stopped, later than the TTL %s", d, ttl)
	}
	if !errors.Is(leader.Err(), ErrLeadershipLost) {
		t.Fatalf("Err = %v, want ErrLeadershipLost", leader.Err())
	}

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	_, err = Campaign(cctx, cli, name, "impatient", ttl, opts...)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign with etcd down = %v, want DeadlineExceeded", err)
	}
	// The withdrawal's revoke may take the request timeout (1s).
	if d := time.Since(start); d > 300*time.Millisecond+2*time.Second {
		t.Fatalf("Campaign returned %s after it started; its context had 300ms", d)
	}

	if wait := 2*ttl - time.Since(stopped); wait > 0 {
		time.Sleep(wait)
	}
	if got := configs.all(); len(got) != 1 {
		t.Fatalf("config deliveries while etcd was down: %+v", got[1:])
	}

	// etcd comes back.
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	v2, err := PutConfig(pctx, cli, name, []byte("v2"))
	if err != nil {
		t.Fatal(err)
	}
	configs.wait(t, "v2", func(v ConfigVersion) bool { return v.Revision == v2.Revision })
	if got := configs.all(); len(got) != 2 {
		t.Fatalf("config deliveries %+v, want v1 then v2", got)
	}

	_, second := elected(t, 10*time.Second, next)
	defer func() { _ = second.Close(ctx) }()
	t.Logf("second elected %s after etcd restarted", time.Since(restarted).Round(time.Millisecond))
	checkLeader(t, cli, name, "second")
	if err := leader.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkLeader(t, cli, name, "second")

	eventually(t, 10*time.Second, "member not joined again", func() bool {
		_, lease, ok := getKey(t, cli, member.Key())
		return ok && lease == member.LeaseID() && member.Member().JoinedAt.After(joined.JoinedAt)
	})
	members.waitIDs(t, "pod-a")
}
