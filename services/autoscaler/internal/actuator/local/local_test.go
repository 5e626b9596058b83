package local

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
	"github.com/hermod/hermod/testkit/coordtest"
)

func TestLocalActuatorWritesFencedTargets(t *testing.T) {
	cli, _ := coordtest.Start(t)
	pool := coordtest.PoolName(t)
	ctx := context.Background()
	a := New(cli, pool)
	tg := actuator.Target{Variant: "v"}
	if st, err := a.State(ctx, tg); err != nil || st.Desired != 0 || st.Ready != -1 {
		t.Fatalf("State of an unset target = %+v, %v", st, err)
	}
	if err := a.Scale(ctx, tg, 3); err != nil {
		t.Fatal(err)
	}
	if st, err := a.State(ctx, tg); err != nil || st.Desired != 3 {
		t.Fatalf("State = %+v, %v, want 3", st, err)
	}
	if data, _ := store.Get(ctx, cli, store.ReplicasKey(pool, "v")); string(data) != "3" {
		t.Fatalf("key holds %q", data)
	}
	// fenced on a key: writes go through while it exists, not after
	fenceKey := "/test/" + pool + "/leader"
	resp, err := cli.Put(ctx, fenceKey, "me")
	if err != nil {
		t.Fatal(err)
	}
	a.Fence(clientv3.Compare(clientv3.CreateRevision(fenceKey), "=", resp.Header.Revision))
	if err := a.Scale(ctx, tg, 4); err != nil {
		t.Fatalf("fenced write while the fence holds: %v", err)
	}
	if _, err := cli.Delete(ctx, fenceKey); err != nil {
		t.Fatal(err)
	}
	if err := a.Scale(ctx, tg, 5); !errors.Is(err, ErrFenced) {
		t.Fatalf("write after the fence fell = %v, want ErrFenced", err)
	}
	if st, _ := a.State(ctx, tg); st.Desired != 4 {
		t.Fatalf("the fenced write changed the target to %d", st.Desired)
	}
	if err := a.Scale(ctx, tg, -1); err == nil {
		t.Fatal("negative replicas accepted")
	}
	if _, err := cli.Put(ctx, store.ReplicasKey(pool, "bad"), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.State(ctx, actuator.Target{Variant: "bad"}); err == nil {
		t.Fatal("a malformed target read as a count")
	}
	if a.Name() != "local" {
		t.Fatal(a.Name())
	}
}
