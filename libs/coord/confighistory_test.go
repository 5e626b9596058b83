package coord

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/testkit/coordtest"
)

// ConfigBefore walks a config's versions back through etcd's history, to
// the creation of the key, and says when the history is compacted.
func TestConfigBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	cli, _ := coordtest.Start(t) // its own server: the test compacts
	ctx := testContext(t)
	pool := coordtest.PoolName(t)
	var vs []ConfigVersion
	for _, data := range []string{"v1", "v2", "v3"} {
		v, err := PutConfig(ctx, cli, pool, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
		// Another key's write in between: revisions are not consecutive.
		if _, err := cli.Put(ctx, EndpointKey(pool, "x"), data); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i > 0; i-- {
		got, err := ConfigBefore(ctx, cli, pool, vs[i].Revision)
		if err != nil || string(got.Data) != string(vs[i-1].Data) || got.Revision != vs[i-1].Revision || got.Version != vs[i-1].Version {
			t.Fatalf("before %d: %+v %v, want %+v", vs[i].Revision, got, err, vs[i-1])
		}
	}
	if _, err := ConfigBefore(ctx, cli, pool, vs[0].Revision); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("before the first version: %v, want ErrNoConfig", err)
	}
	if _, err := cli.Compact(ctx, vs[2].Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigBefore(ctx, cli, pool, vs[2].Revision); !errors.Is(err, ErrCompacted) {
		t.Fatalf("before a compacted revision: %v, want ErrCompacted", err)
	}
}
