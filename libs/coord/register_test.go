package coord

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/testkit/coordtest"
)

// longTTL is the lease TTL of tests that do not wait for an expiry: long
// enough that a slow CI machine never loses a lease by accident.
const longTTL = 30 * time.Second

func TestRegisterListed(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	ep := testEndpoint(pool, "vllm-0")
	ep.RegisteredAt = nil
	reg, err := Register(ctx, cli, ep, longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close(ctx) }()
	if ep.RegisteredAt != nil {
		t.Fatal("Register modified the caller's endpoint")
	}

	eps, rev, err := ListEndpoints(ctx, cli, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || rev == 0 {
		t.Fatalf("ListEndpoints = %v at revision %d, want one endpoint", eps, rev)
	}
	got := eps[0]
	if got.GetRegisteredAt() == nil || time.Since(got.GetRegisteredAt().AsTime()) > time.Minute {
		t.Fatalf("registered_at = %v, want about now", got.GetRegisteredAt())
	}
	want := proto.CloneOf(ep)
	want.RegisteredAt = got.GetRegisteredAt()
	if !proto.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	if !proto.Equal(reg.Endpoint(), got) {
		t.Fatalf("reg.Endpoint() = %v, want %v", reg.Endpoint(), got)
	}

	// The value is JSON that etcdctl users can read, bound to the lease.
	value, lease, ok := getKey(t, cli, EndpointKey(pool, "vllm-0"))
	if !ok || lease != reg.LeaseID() || reg.Key() != EndpointKey(pool, "vllm-0") {
		t.Fatalf("key %s: present %v, lease %x, want lease %x", reg.Key(), ok, lease, reg.LeaseID())
	}
	var fields map[string]any
	if err := json.Unmarshal(value, &fields); err != nil {
		t.Fatalf("value is not JSON: %v: %s", err, value)
	}
	if fields["kv_events_endpoint"] != "tcp://10.0.0.5:5557" {
		t.Fatalf("value %s lacks kv_events_endpoint", value)
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != int64(longTTL/time.Second) {
		t.Fatalf("granted TTL = %d, want %d", ttl.GrantedTTL, int64(longTTL/time.Second))
	}
}

func TestCloseRemovesAtOnce(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	reg, err := Register(ctx, cli, testEndpoint(pool, "vllm-0"), longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := getKey(t, cli, reg.Key()); !ok {
		t.Fatal("key absent after Register")
	}
	lease := reg.LeaseID()
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// No waiting: Close revoked the lease.
	if _, _, ok := getKey(t, cli, reg.Key()); ok {
		t.Fatal("key present right after Close")
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Fatalf("lease TTL after Close = %d, want -1 (revoked)", ttl.TTL)
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := reg.Update(ctx, testEndpoint(pool, "vllm-0")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close = %v, want ErrClosed", err)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	ep := testEndpoint(pool, "vllm-0")
	reg, err := Register(ctx, cli, ep, longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close(ctx) }()
	lease := reg.LeaseID()

	updated := proto.CloneOf(ep)
	updated.ServedModels = append(updated.ServedModels, "new-lora")
	updated.RegisteredAt = nil // keeps the registration's
	if err := reg.Update(ctx, updated); err != nil {
		t.Fatal(err)
	}
	value, gotLease, ok := getKey(t, cli, reg.Key())
	if !ok || gotLease != lease {
		t.Fatalf("after Update: present %v, lease %x, want lease %x", ok, gotLease, lease)
	}
	got, err := DecodeEndpoint(reg.Key(), value)
	if err != nil {
		t.Fatal(err)
	}
	updated.RegisteredAt = ep.GetRegisteredAt()
	if !proto.Equal(got, updated) {
		t.Fatalf("after Update: %v, want %v", got, updated)
	}

	renamed := proto.CloneOf(ep)
	renamed.Name = "vllm-1"
	if err := reg.Update(ctx, renamed); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Update with another name = %v, want ErrInvalidName", err)
	}
	if err := reg.Update(ctx, nil); err == nil {
		t.Fatal("Update(nil) succeeded")
	}
}

func TestRegisterRejectsInvalid(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	for _, tc := range []struct {
		name     string
		ep       *registryv1.Endpoint
		ttl      time.Duration
		nameErr  bool
		nilCheck bool
	}{
		{name: "nil endpoint", ep: nil, ttl: longTTL},
		{name: "empty pool", ep: testEndpoint("", "vllm-0"), ttl: longTTL, nameErr: true},
		{name: "slash in pool", ep: testEndpoint(pool+"/x", "vllm-0"), ttl: longTTL, nameErr: true},
		{name: "empty name", ep: testEndpoint(pool, ""), ttl: longTTL, nameErr: true},
		{name: "slash in name", ep: testEndpoint(pool, "a/b"), ttl: longTTL, nameErr: true},
		{name: "ttl under a second", ep: testEndpoint(pool, "vllm-0"), ttl: 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := Register(ctx, cli, tc.ep, tc.ttl)
			if err == nil {
				_ = reg.Close(ctx)
				t.Fatal("Register succeeded")
			}
			if tc.nameErr != errors.Is(err, ErrInvalidName) {
				t.Fatalf("err = %v; ErrInvalidName %v, want %v", err, errors.Is(err, ErrInvalidName), tc.nameErr)
			}
		})
	}
	if _, err := Register(ctx, nil, testEndpoint(pool, "vllm-0"), longTTL); err == nil {
		t.Fatal("Register with a nil client succeeded")
	}
	resp, err := cli.Get(ctx, "/hermod/pools/"+pool, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("rejected registrations wrote %d keys", resp.Count)
	}
	if _, _, err := ListEndpoints(ctx, cli, "a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("ListEndpoints(a/b) = %v, want ErrInvalidName", err)
	}
	if _, err := WatchEndpoints(ctx, cli, "", func(Snapshot) {}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("WatchEndpoints(\"\") = %v, want ErrInvalidName", err)
	}
}

// A registration whose keepalives stop (its client is closed: the process
// died) disappears once the lease expires.
func TestLeaseExpiresWhenKeepaliveStops(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	dying, err := srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dying.Close() }()
	// The shared server's minimum TTL is 1s.
	const ttl = time.Second
	reg, err := Register(ctx, dying, testEndpoint(pool, "vllm-0"), ttl, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	// Keepalives hold the key well past the TTL.
	time.Sleep(3 * ttl / 2)
	if _, _, ok := getKey(t, cli, reg.Key()); !ok {
		t.Fatal("key expired although keepalives run")
	}

	if err := dying.Close(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, ttl+3*time.Second, "key still present after its lease should have expired", func() bool {
		_, _, ok := getKey(t, cli, reg.Key())
		return !ok
	})
	t.Logf("key gone %s after its client closed", time.Since(stopped).Round(time.Millisecond))
	// The goroutine stopped with the client; Close cannot revoke any more
	// and says so at once.
	start := time.Now()
	if err := reg.Close(ctx); err == nil {
		t.Fatal("Close with a closed client reported no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close with a closed client took %s", d)
	}
}

// A lease revoked behind the registration's back is replaced: the key comes
// back under a new lease.
func TestReregisterAfterExternalRevoke(t *testing.T) {
	t.Parallel()
	cli := integration(t)
	ctx := testContext(t)
	pool := coordtest.PoolName(t)

	own := srv.Client(t)
	const ttl = time.Second
	reg, err := Register(ctx, own, testEndpoint(pool, "vllm-0"), ttl,
		WithLogger(testLogger(t)), WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	first := reg.LeaseID()
	firstValue := reg.Endpoint()

	if _, err := cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The revoke deleted the key; the registration may already have
	// written it again, under a new lease, but never under the old one.
	if _, l, ok := getKey(t, cli, reg.Key()); ok && l == first {
		t.Fatal("key present under its lease after the lease was revoked")
	}
	var lease clientv3.LeaseID
	var value []byte
	eventually(t, 5*time.Second, "key not registered again", func() bool {
		var ok bool
		value, lease, ok = getKey(t, cli, reg.Key())
		return ok
	})
	if lease == first || lease != reg.LeaseID() {
		t.Fatalf("key under lease %x; first lease %x, registration's %x", lease, first, reg.LeaseID())
	}
	got, err := DecodeEndpoint(reg.Key(), value)
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetRegisteredAt().AsTime().After(firstValue.GetRegisteredAt().AsTime()) {
		t.Fatalf("registered_at %v not after the first %v", got.GetRegisteredAt().AsTime(), firstValue.GetRegisteredAt().AsTime())
	}
	got.RegisteredAt, firstValue.RegisteredAt = nil, nil
	if !proto.Equal(got, firstValue) {
		t.Fatalf("registered again as %v, want %v", got, firstValue)
	}
	// The new lease is kept alive.
	time.Sleep(2 * ttl)
	if _, l, ok := getKey(t, cli, reg.Key()); !ok || l != lease {
		t.Fatalf("after two TTLs: present %v under lease %x, want lease %x", ok, l, lease)
	}
}

// etcd down for longer than the TTL: the registration comes back once etcd
// does, and an Update made meanwhile is what it writes.
func TestReregisterAfterEtcdRestart(t *testing.T) {
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
	pool := coordtest.PoolName(t)

	const ttl = time.Second
	ep := testEndpoint(pool, "vllm-0")
	reg, err := Register(ctx, cli, ep, ttl,
		WithLogger(testLogger(t)), WithRetryBackoff(50*time.Millisecond, 200*time.Millisecond),
		WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	rec := &recorder{}
	w, err := WatchEndpoints(ctx, cli, pool, rec.record, WithLogger(testLogger(t)),
		WithRetryBackoff(50*time.Millisecond, 200*time.Millisecond), WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec.waitSnapshot(t, "with vllm-0", func(s Snapshot) bool { return s.Endpoints["vllm-0"] != nil })
	first := reg.LeaseID()
	ttlResp, err := cli.TimeToLive(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Duration(ttlResp.GrantedTTL) * time.Second // etcd's minimum TTL may exceed ttl

	own.Stop()
	// The update cannot be written now; the re-registration writes it.
	updated := proto.CloneOf(ep)
	updated.Port = 9000
	uctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := reg.Update(uctx, updated); err == nil {
		t.Error("Update with etcd down succeeded")
	}
	cancel()
	// etcd keeps leases across a restart; the client gives a lease up once
	// no keepalive has been answered for its TTL (checked every 500 ms). An
	// outage well past that makes the loss certain.
	time.Sleep(granted + 2*time.Second)
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	var lease clientv3.LeaseID
	eventually(t, 10*time.Second, "not registered again after the restart", func() bool {
		value, l, ok := getKey(t, cli, reg.Key())
		if !ok || l == first {
			return false
		}
		got, err := DecodeEndpoint(reg.Key(), value)
		lease = l
		return err == nil && got.GetPort() == 9000
	})
	// The old lease expires after the restart; the key stays, under the new one.
	time.Sleep(2 * ttl)
	if _, l, ok := getKey(t, cli, reg.Key()); !ok || l != lease {
		t.Fatalf("after the old lease expired: present %v under lease %x, want %x", ok, l, lease)
	}
	rec.waitSnapshot(t, "with vllm-0 on port 9000", func(s Snapshot) bool {
		return s.Endpoints["vllm-0"].GetPort() == 9000
	})
}

// etcd down for less than the TTL while an Update fails: the lease survives
// the restart, so nothing registers again, and the update is written under
// the same lease once etcd answers.
func TestFailedUpdateWrittenWhenEtcdReturns(t *testing.T) {
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
	pool := coordtest.PoolName(t)

	ep := testEndpoint(pool, "vllm-0")
	reg, err := Register(ctx, cli, ep, 30*time.Second,
		WithLogger(testLogger(t)), WithRetryBackoff(50*time.Millisecond, 200*time.Millisecond),
		WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	first := reg.LeaseID()

	own.Stop()
	updated := proto.CloneOf(ep)
	updated.Port = 9000
	uctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := reg.Update(uctx, updated); err == nil {
		t.Error("Update with etcd down succeeded")
	}
	cancel()
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the failed update not written once etcd answered", func() bool {
		value, _, ok := getKey(t, cli, reg.Key())
		if !ok {
			return false
		}
		got, err := DecodeEndpoint(reg.Key(), value)
		return err == nil && got.GetPort() == 9000
	})
	if _, l, _ := getKey(t, cli, reg.Key()); l != first {
		t.Errorf("written under lease %x, want the surviving lease %x", l, first)
	}
}
