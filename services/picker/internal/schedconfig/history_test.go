package schedconfig

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/testkit/coordtest"
)

const invalidConfig = "plugins: [{type: queue-scorer, parameters: {bogus: 1}}]\nunknownKey: 1\n"

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A picker started while etcd holds an invalid newest config (v2 after a
// valid v1) serves v1, as its peers that kept v1 do, not the built-in
// default; it says so at ERROR and in its metrics. It follows the watch the
// way the picker's app does.
func TestStartWithAnInvalidNewestConfigServesTheLastValidOne(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs an embedded etcd server (skipped with -short)")
	}
	cli, _ := coordtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := coordtest.PoolName(t)
	v1, err := coord.PutConfig(ctx, cli, pool, []byte(activeOnly))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := coord.PutConfig(ctx, cli, pool, []byte(invalidConfig))
	if err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	l, err := New(Version{Source: SourceDefault}, Options{Pool: pool, Replica: "r2", Metrics: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	history := EtcdHistory(cli, pool)
	seen := make(chan int64, 8)
	w, err := coord.WatchConfig(ctx, cli, pool, func(v coord.ConfigVersion) {
		_ = l.ApplyLatest(ctx, Version{Source: SourceEtcd, Revision: v.Revision, Data: v.Data}, history)
		seen <- v.Revision
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case rev := <-seen:
		if rev != v2.Revision {
			t.Fatalf("first version delivered %d, want %d", rev, v2.Revision)
		}
	case <-ctx.Done():
		t.Fatal("no config delivered")
	}

	if cur := l.Current(); cur.Source != SourceEtcd || cur.Revision != v1.Revision || string(cur.Data) != activeOnly {
		t.Fatalf("in force: %s revision %d, want etcd revision %d (the last valid one), not the default", cur.Source, cur.Revision, v1.Revision)
	}
	if got := testutil.ToFloat64(l.metrics.revision); got != float64(v1.Revision) {
		t.Errorf("hermod_picker_config_revision %v, want %d", got, v1.Revision)
	}
	if testutil.ToFloat64(l.metrics.newestInvalid) != 1 || testutil.ToFloat64(l.metrics.newestRevision) != float64(v2.Revision) {
		t.Errorf("newest invalid %v, newest revision %v", testutil.ToFloat64(l.metrics.newestInvalid), testutil.ToFloat64(l.metrics.newestRevision))
	}
	if out := logs.String(); !strings.Contains(out, `"level":"ERROR","msg":"the newest endpoint picker config is invalid: serving the last valid one from the history"`) {
		t.Errorf("no ERROR line about the invalid newest config:\n%s", out)
	}

	// A valid v3 ends it.
	v3, err := coord.PutConfig(ctx, cli, pool, []byte("plugins: [{type: queue-scorer}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(0); rev != v3.Revision; {
		select {
		case rev = <-seen:
		case <-ctx.Done():
			t.Fatal("v3 not delivered")
		}
	}
	if cur := l.Current(); cur.Revision != v3.Revision || testutil.ToFloat64(l.metrics.newestInvalid) != 0 {
		t.Errorf("after a valid v3: revision %d, newest invalid %v", cur.Revision, testutil.ToFloat64(l.metrics.newestInvalid))
	}
}

// A running picker that holds v1 keeps it when v2 is invalid and does not
// rebuild v1 from the history; versions it missed (coalesced) are found.
func TestApplyLatestWalksBackOnlyToTheVersionInForce(t *testing.T) {
	l, _ := newLoader(t, Version{Source: SourceEtcd, Revision: 3, Data: []byte(activeOnly)})
	history := map[int64]Version{
		9: {Source: SourceEtcd, Revision: 7, Data: []byte(invalidConfig)},
		7: {Source: SourceEtcd, Revision: 5, Data: []byte("plugins: [{type: queue-scorer}]\n")},
		5: {Source: SourceEtcd, Revision: 3, Data: []byte(activeOnly)},
	}
	var asked []int64
	older := func(_ context.Context, rev int64) (Version, error) {
		asked = append(asked, rev)
		return history[rev], nil
	}
	if err := l.ApplyLatest(context.Background(), Version{Source: SourceEtcd, Revision: 9, Data: []byte("bad: [")}, older); err == nil {
		t.Fatal("invalid v9 accepted")
	}
	if cur := l.Current(); cur.Revision != 5 {
		t.Fatalf("in force revision %d, want 5 (the newest valid, missed while coalesced)", cur.Revision)
	}
	asked = nil
	if err := l.ApplyLatest(context.Background(), Version{Source: SourceEtcd, Revision: 11, Data: []byte("bad: [")}, func(_ context.Context, rev int64) (Version, error) {
		asked = append(asked, rev)
		return Version{Source: SourceEtcd, Revision: 5, Data: history[7].Data}, nil
	}); err == nil {
		t.Fatal("invalid v11 accepted")
	}
	if cur := l.Current(); cur.Revision != 5 || len(asked) != 1 {
		t.Errorf("in force %d after %v asked, want 5 after one read", cur.Revision, asked)
	}
}
