package coord

import (
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/coordtest"
)

func TestWatchPrefixDeliversListAndChanges(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	prefix := "/test/" + coordtest.PoolName(t) + "/"
	if _, err := cli.Put(ctx, prefix+"a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"c", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/test/outside", "x"); err != nil {
		t.Fatal(err)
	}
	got := make(chan map[string][]byte, 16)
	w, err := WatchPrefix(ctx, cli, prefix, func(kvs map[string][]byte, _ int64) { got <- kvs })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next := func() map[string][]byte {
		t.Helper()
		select {
		case kvs := <-got:
			return kvs
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
			return nil
		}
	}
	if kvs := next(); len(kvs) != 2 || string(kvs[prefix+"a"]) != "1" || kvs["/test/outside"] != nil {
		t.Fatalf("first list = %q", kvs)
	}
	if _, err := cli.Put(ctx, prefix+"b", "2"); err != nil {
		t.Fatal(err)
	}
	if kvs := next(); len(kvs) != 3 || string(kvs[prefix+"b"]) != "2" {
		t.Fatalf("after put = %q", kvs)
	}
	if _, err := cli.Delete(ctx, prefix+"a"); err != nil {
		t.Fatal(err)
	}
	if kvs := next(); len(kvs) != 2 || kvs[prefix+"a"] != nil {
		t.Fatalf("after delete = %q", kvs)
	}
	if _, err := WatchPrefix(ctx, cli, "", nil); err == nil {
		t.Fatal("empty prefix accepted")
	}
}
