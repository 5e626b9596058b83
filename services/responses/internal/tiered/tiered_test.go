package tiered

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/responses/internal/store"
	"github.com/hermod/hermod/services/responses/internal/store/storetest"
	"github.com/hermod/hermod/testkit/mongotest"
	"github.com/hermod/hermod/testkit/redistest"
)

// config builds a tieredConfig through the plugin's parser (so defaults
// are the configuration's), from YAML-ish JSON.
func config(t testing.TB, raw string) *responsestore.TieredConfig {
	t.Helper()
	c, err := responsestore.ParseStoreConfig([]byte(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TieredConfig == nil {
		t.Fatalf("not tiered: %s", raw)
	}
	return c.TieredConfig
}

func open(t *testing.T, cfg *responsestore.TieredConfig, o Options) *Store {
	t.Helper()
	if o.Consumer == "" {
		o.Consumer = "test"
	}
	s, err := New(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rec(id, prev string, data string) *store.Record {
	return &store.Record{ID: id, PreviousID: prev, CreatedAt: time.UnixMilli(1_700_000_000_000), Data: []byte(data)}
}

func TestRedisOnlyPutGetDeleteAndLimits(t *testing.T) {
	srv := redistest.Start(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"300ms","maxEntryBytes":64}}}`, srv.URL()))
	s := open(t, cfg, Options{})
	ctx := context.Background()
	if err := s.Put(ctx, rec("resp_1", "", "hello")); err != nil {
		t.Fatal(err)
	}
	got, tier, err := s.Get(ctx, "resp_1")
	if err != nil || tier != store.TierRedis || string(got.Data) != "hello" || !got.CreatedAt.Equal(time.UnixMilli(1_700_000_000_000)) {
		t.Fatalf("get: %+v %s %v", got, tier, err)
	}
	// maxEntryBytes: refused whole, nothing stored
	if err := s.Put(ctx, rec("resp_big", "", strings.Repeat("x", 100))); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("large entry: %v", err)
	}
	if _, _, err := s.Get(ctx, "resp_big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("large entry stored: %v", err)
	}
	// no stream without tier 2
	if n, _ := s.rdb.Do(ctx, s.rdb.B().Exists().Key(cfg.Stream.Key).Build()).AsInt64(); n != 0 {
		t.Fatal("a stream was written without mongo")
	}
	// ttl
	if pttl, _ := s.rdb.Do(ctx, s.rdb.B().Pttl().Key(s.key("resp_1")).Build()).AsInt64(); pttl <= 0 || pttl > 300 {
		t.Fatalf("pttl %d, want (0, 300]", pttl)
	}
	if err := s.Delete(ctx, "resp_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	_ = s.Put(ctx, rec("resp_2", "", "x"))
	time.Sleep(400 * time.Millisecond)
	if _, _, err := s.Get(ctx, "resp_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after ttl: %v", err)
	}
}

func TestRedisUsernamePasswordAndDB(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, admin.B().AclSetuser().Username("hermod").Rule("on", ">s3cret", "~*", "+@all").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMOD_TEST_REDIS_PASSWORD", "s3cret")
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"username":"hermod","passwordEnv":"HERMOD_TEST_REDIS_PASSWORD","db":3}}}`, srv.URL()))
	s := open(t, cfg, Options{})
	if err := s.Put(ctx, rec("resp_db", "", "in db 3")); err != nil {
		t.Fatal(err)
	}
	who, _ := s.rdb.Do(ctx, s.rdb.B().AclWhoami().Build()).ToString()
	if who != "hermod" {
		t.Fatalf("connected as %q", who)
	}
	if n, _ := admin.Do(ctx, admin.B().Exists().Key(s.key("resp_db")).Build()).AsInt64(); n != 0 {
		t.Fatal("the record is in db 0")
	}
	db3 := redistest.Connect(t, srv.URL()+"/3")
	if n, _ := db3.Do(ctx, db3.B().Exists().Key(s.key("resp_db")).Build()).AsInt64(); n != 1 {
		t.Fatal("the record is not in db 3")
	}
	t.Setenv("HERMOD_TEST_REDIS_WRONG", "wrong")
	bad := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"username":"hermod","passwordEnv":"HERMOD_TEST_REDIS_WRONG"}}}`, srv.URL()))
	if _, err := New(ctx, bad, Options{Consumer: "x"}); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestSentinelMode(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "responses")
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"addresses":[%q],"masterName":"responses"}}}`, sentinel.Addr()))
	if cfg.Redis.Mode() != responsestore.Sentinel {
		t.Fatalf("mode %s", cfg.Redis.Mode())
	}
	s := open(t, cfg, Options{})
	ctx := context.Background()
	if err := s.Put(ctx, rec("resp_s", "", "via sentinel")); err != nil {
		t.Fatal(err)
	}
	direct := master.Client(t)
	if v, _ := direct.Do(ctx, direct.B().Exists().Key(s.key("resp_s")).Build()).AsInt64(); v != 1 {
		t.Fatal("the record is not on the master the sentinel names")
	}
	if got, _, err := s.Get(ctx, "resp_s"); err != nil || string(got.Data) != "via sentinel" {
		t.Fatalf("get: %v", err)
	}
}

func TestClusterMode(t *testing.T) {
	a := redistest.StartArgs(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	ctx := context.Background()
	c := redistest.Connect(t, a.URL())
	if err := c.Do(ctx, c.B().Arbitrary("CLUSTER", "ADDSLOTSRANGE", "0", "16383").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
		if strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mongo := mongotest.Run(t)
	// two addresses select Cluster mode (the second is the same node)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"addresses":[%q,%q]},"mongo":{"uri":%q}}}`, a.Addr(), a.Addr(), mongo.URI()))
	if cfg.Redis.Mode() != responsestore.Cluster {
		t.Fatalf("mode %s", cfg.Redis.Mode())
	}
	s := open(t, cfg, Options{})
	for i := range 20 {
		if err := s.Put(ctx, rec(fmt.Sprintf("resp_c%d", i), "", "clustered")); err != nil {
			t.Fatal(err)
		}
	}
	waitSynced(t, s, 20)
	if _, _, err := s.Get(ctx, "resp_c7"); err != nil {
		t.Fatal(err)
	}
}

// waitSynced waits until MongoDB holds n documents and the backlog is
// empty.
func waitSynced(t *testing.T, s *Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := s.mongo.count(context.Background())
		b, berr := s.Backlog(context.Background())
		if err == nil && berr == nil && got == n && b.Entries == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mongodb has %d documents (%v), want %d; backlog %+v (%v)", got, err, n, b, berr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTieredReadsMongoAfterRedisExpiryAndRewarms(t *testing.T) {
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"500ms"},"mongo":{"uri":%q,"database":"hermodtest","collection":"turns","ttl":"1h"},"stream":{"key":"test:sync","consumerGroup":"syncers","blockTimeout":"50ms"}}}`, rs.URL(), ms.URI()))
	m := NewMetrics()
	s := open(t, cfg, Options{Metrics: m})
	ctx := context.Background()
	for i := range 10 {
		prev := ""
		if i > 0 {
			prev = fmt.Sprintf("resp_%d", i-1)
		}
		if err := s.Put(ctx, rec(fmt.Sprintf("resp_%d", i), prev, fmt.Sprintf("turn %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitSynced(t, s, 10)
	// the configured database, collection, stream key and group
	var d document
	if err := s.mongo.client.Database("hermodtest").Collection("turns").FindOne(ctx, bson.D{{Key: "_id", Value: "resp_3"}}).Decode(&d); err != nil || string(d.Data) != "turn 3" || d.PreviousID != "resp_2" {
		t.Fatalf("mongo document %+v: %v", d, err)
	}
	if left := time.Until(d.ExpiresAt); left < 59*time.Minute || left > time.Hour {
		t.Fatalf("mongo expiry in %s, want the mongo ttl of 1h", left)
	}
	groups, _ := s.rdb.Do(ctx, s.rdb.B().XinfoGroups().Key("test:sync").Build()).ToArray()
	if len(groups) != 1 {
		t.Fatalf("groups on test:sync: %d", len(groups))
	}
	time.Sleep(600 * time.Millisecond) // the redis ttl
	chain, err := store.GetChain(ctx, s, "resp_9", 100)
	if err != nil || len(chain) != 10 || string(chain[0].Data) != "turn 0" {
		t.Fatalf("chain from mongo: %d %v", len(chain), err)
	}
	if hits := testutil.ToFloat64(m.requests.WithLabelValues("get", "mongo", "hit")); hits != 10 {
		t.Fatalf("mongo hits %v", hits)
	}
	// warmed again
	if _, tier, err := s.Get(ctx, "resp_4"); err != nil || tier != store.TierRedis {
		t.Fatalf("after rewarm: %s %v", tier, err)
	}
	// delete reaches both tiers and is not undone by a read
	if err := s.Delete(ctx, "resp_4"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "resp_4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.mongo.coll.FindOne(ctx, bson.D{{Key: "_id", Value: "resp_4"}}).Decode(&d)
		if err == nil && d.Deleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mongo never had the deletion: %+v %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// the tombstone left Redis once MongoDB had the deletion; the read
	// still finds nothing
	if _, _, err := s.Get(ctx, "resp_4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted, from mongo: %v", err)
	}
	// a sync of an old put of the same id does not bring it back
	if err := s.mongo.apply(ctx, []op{{id: "resp_4", v: &value{Record: *rec("resp_4", "", "late")}}}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "resp_4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resurrected: %v", err)
	}
	// deleting what only MongoDB has
	time.Sleep(600 * time.Millisecond)
	if err := s.Delete(ctx, "resp_8"); err != nil {
		t.Fatalf("delete from mongo only: %v", err)
	}
	if _, _, err := s.Get(ctx, "resp_8"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted from mongo: %v", err)
	}
}

func TestMongoExpiryCheckedOnRead(t *testing.T) {
	// MongoDB's expiry runs from the sync, which lands somewhere between the
	// put and waitSynced's return; the windows are wide enough for a loaded
	// machine and the checks are placed against both ends.
	const redisTTL, mongoTTL = 200 * time.Millisecond, 3 * time.Second
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":%q},"mongo":{"uri":%q,"ttl":%q},"stream":{"blockTimeout":"50ms"}}}`,
		rs.URL(), redisTTL, ms.URI(), mongoTTL))
	s := open(t, cfg, Options{})
	ctx := context.Background()
	putStart := time.Now()
	if err := s.Put(ctx, rec("resp_e", "", "short-lived")); err != nil {
		t.Fatal(err)
	}
	putDone := time.Now()
	waitSynced(t, s, 1)
	synced := time.Now()
	time.Sleep(time.Until(putDone.Add(redisTTL + 100*time.Millisecond)))
	_, tier, err := s.Get(ctx, "resp_e")
	if time.Since(putStart) >= mongoTTL {
		t.Skipf("the machine took %s to reach the first read; the mongo expiry passed", time.Since(putStart))
	}
	if err != nil || tier != store.TierMongo {
		t.Fatalf("before mongo expiry: %s %v", tier, err)
	}
	time.Sleep(time.Until(synced.Add(mongoTTL + 100*time.Millisecond)))
	// the rewarm was bounded by the mongo expiry, and mongo's copy (still
	// there: FerretDB has no TTL indexes) is past it
	if _, _, err := s.Get(ctx, "resp_e"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after mongo expiry: %v", err)
	}
}

func TestMongoTimeoutBoundsReads(t *testing.T) {
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q,"timeout":"150ms"}}}`, rs.URL(), ms.URI()))
	s := open(t, cfg, Options{})
	ms.Stop()
	start := time.Now()
	_, _, err := s.Get(context.Background(), "resp_unknown")
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mongo down: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("read took %s with a 150ms timeout", d)
	}
}

func TestWorkerKilledMidBatchIsClaimedAndStoredOnce(t *testing.T) {
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q},"stream":{"batchSize":25,"claimAge":"300ms","blockTimeout":"50ms"}}}`, rs.URL(), ms.URI()))
	m := NewMetrics()
	s := open(t, cfg, Options{NoSync: true, Metrics: m})
	ctx := context.Background()
	for i := range 100 {
		if err := s.Put(ctx, rec(fmt.Sprintf("resp_%03d", i), "", "x")); err != nil {
			t.Fatal(err)
		}
	}
	// worker A writes its first batch to MongoDB and dies before the ack
	actx, kill := context.WithCancel(ctx)
	a := s.NewWorker("a")
	var batch []string
	a.afterWrite = func(ids []string) { batch = ids; kill() }
	a.retryOwn = false
	a.Run(actx)
	if len(batch) != 25 {
		t.Fatalf("A's batch had %d entries, want batchSize 25", len(batch))
	}
	b, _ := s.Backlog(ctx)
	if b.Entries != 100 {
		t.Fatalf("backlog %d after A died, want 100 (25 pending to A)", b.Entries)
	}
	// worker B takes the rest and, after claimAge, A's batch
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	bw := s.NewWorker("b")
	var sizes []int
	var mu sync.Mutex
	bw.afterWrite = func(ids []string) { mu.Lock(); sizes = append(sizes, len(ids)); mu.Unlock() }
	done := make(chan struct{})
	go func() { defer close(done); bw.Run(bctx) }()
	waitSynced(t, s, 100)
	stop()
	<-done
	if c := testutil.ToFloat64(m.claimed); c != 25 {
		t.Fatalf("claimed %v, want A's 25", c)
	}
	for _, n := range sizes {
		if n > 25 {
			t.Fatalf("a batch of %d with batchSize 25", n)
		}
	}
	// pending is empty: every entry acknowledged
	sum, _ := s.rdb.Do(ctx, s.rdb.B().Xpending().Key(cfg.Stream.Key).Group(cfg.Stream.ConsumerGroup).Build()).ToArray()
	if n, _ := sum[0].AsInt64(); n != 0 {
		t.Fatalf("%d entries still pending", n)
	}
}

func TestMongoDownBacklogDrainsNothingLost(t *testing.T) {
	if testing.Short() {
		t.Skip("10k writes")
	}
	rs, ms := redistest.Start(t), mongotest.Run(t)
	// The stream carries the values, so a Redis ttl shorter than the
	// outage loses nothing; it only shortens the wait for expiry below.
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"1s"},"mongo":{"uri":%q,"timeout":"300ms"},"stream":{"batchSize":500,"blockTimeout":"100ms","claimAge":"2s"}}}`, rs.URL(), ms.URI()))
	m := NewMetrics()
	// three replicas' workers share the group
	s := open(t, cfg, Options{Consumer: "r1", Metrics: m})
	open(t, cfg, Options{Consumer: "r2", Metrics: NewMetrics()})
	open(t, cfg, Options{Consumer: "r3", Metrics: NewMetrics()})
	ctx := context.Background()
	const total = 10000
	put := func(from, to int) {
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := from + w; i < to; i += 16 {
					if err := s.Put(ctx, rec(fmt.Sprintf("resp_%05d", i), "", fmt.Sprintf("body %d", i))); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	put(0, 3000)
	ms.Stop()
	put(3000, 8000)
	time.Sleep(time.Second)
	if b, _ := s.Backlog(ctx); b.Entries < 5000 {
		t.Fatalf("backlog %d with mongodb down, want at least the 5000 written since", b.Entries)
	}
	ms.Start()
	put(8000, total)
	waitSynced(t, s, total)
	if e := testutil.ToFloat64(m.syncErrors); e == 0 {
		t.Fatal("no sync errors counted while mongodb was down")
	}
	// every response readable after its Redis key expired
	time.Sleep(1100 * time.Millisecond)
	for i := 0; i < total; i += 37 {
		id := fmt.Sprintf("resp_%05d", i)
		got, tier, err := s.Get(ctx, id)
		if err != nil || tier != store.TierMongo || string(got.Data) != fmt.Sprintf("body %d", i) {
			t.Fatalf("%s: %v %s", id, err, tier)
		}
	}
	if d := testutil.ToFloat64(m.dropped); d != 0 {
		t.Fatalf("%v entries dropped", d)
	}
}

func TestStreamMaxLenTrimsAndCountsUnsynced(t *testing.T) {
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q},"stream":{"maxLen":100,"claimAge":"200ms","blockTimeout":"50ms"}}}`, rs.URL(), ms.URI()))
	m := NewMetrics()
	s := open(t, cfg, Options{NoSync: true, Metrics: m})
	ctx := context.Background()
	// a worker takes 100 entries and dies before writing them
	w := s.NewWorker("dead")
	if err := w.ensureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		_ = s.Put(ctx, rec(fmt.Sprintf("resp_%03d", i), "", "x"))
	}
	cmd := s.rdb.B().Xreadgroup().Group(cfg.Stream.ConsumerGroup, "dead").Count(100).Streams().Key(cfg.Stream.Key).Id(">").Build()
	if err := s.rdb.Do(ctx, cmd).Error(); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 2000; i++ {
		_ = s.Put(ctx, rec(fmt.Sprintf("resp_%04d", i), "", "x"))
	}
	if n, _ := s.rdb.Do(ctx, s.rdb.B().Xlen().Key(cfg.Stream.Key).Build()).AsInt64(); n > 300 {
		t.Fatalf("stream length %d with maxLen 100", n)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := s.NewWorker("live").claim(ctx); err != nil {
		t.Fatal(err)
	}
	if d := testutil.ToFloat64(m.dropped); d != 100 {
		t.Fatalf("dropped %v, want the 100 trimmed while pending", d)
	}
}

var _ = scheduling.Duration(0)

func TestJobs(t *testing.T) {
	srv := redistest.Start(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"1h"}}}`, srv.URL()))
	c := &testClock{now: time.Unix(1_700_000_000, 0)}
	storetest.Jobs(t, open(t, cfg, Options{Now: c.Now}), c.Add)
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSwapRedisOnly(t *testing.T) {
	srv := redistest.Start(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"1h","maxEntryBytes":1024}}}`, srv.URL()))
	storetest.Swap(t, open(t, cfg, Options{}), 1024)
}

// A swapped record reaches MongoDB as its newest version, whatever order
// the stream's entries are applied in, and a swap of a record whose
// Redis/Valkey copy is gone is checked against MongoDB's.
func TestSwapTiered(t *testing.T) {
	rs, ms := redistest.Start(t), mongotest.Run(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"1h"},"mongo":{"uri":%q}}}`, rs.URL(), ms.URI()))
	s := open(t, cfg, Options{})
	storetest.Swap(t, s, 0)
	ctx := context.Background()
	r := rec("conv_t", "", "v0")
	r.Revision = store.NewRevision()
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		next := *r
		next.Data, next.Revision = []byte(fmt.Sprintf("v%d", i)), store.NewRevision()
		if err := s.Swap(ctx, &next, r.Revision); err != nil {
			t.Fatal(err)
		}
		r = &next
	}
	waitSynced(t, s, 3) // conv_swap (a tombstone now), conv_race, conv_t
	if err := s.rdb.Do(ctx, s.rdb.B().Del().Key(s.key("conv_t")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, tier, err := s.Get(ctx, "conv_t")
	if err != nil || tier != store.TierMongo || string(got.Data) != "v5" || got.Revision != r.Revision {
		t.Fatalf("from mongodb: %+v %s %v", got, tier, err)
	}
	race, err := s.mongo.get(ctx, "conv_race", time.Now())
	if err != nil || len(race.Data) < 40 {
		t.Fatalf("conv_race in mongodb: %+v %v", race, err)
	}
	// Redis/Valkey has lost its copy again: the swap checks MongoDB's.
	if err := s.rdb.Do(ctx, s.rdb.B().Del().Key(s.key("conv_t")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	stale := *r
	stale.Data, stale.Revision = []byte("stale"), store.NewRevision()
	if err := s.Swap(ctx, &stale, r.Revision+1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale swap against mongodb's copy: %v", err)
	}
	fresh := *r
	fresh.Data, fresh.Revision = []byte("v6"), store.NewRevision()
	if err := s.Swap(ctx, &fresh, r.Revision); err != nil {
		t.Fatalf("swap against mongodb's copy: %v", err)
	}
	if got, tier, _ := s.Get(ctx, "conv_t"); string(got.Data) != "v6" || tier != store.TierRedis {
		t.Fatalf("after the swap: %q from %s", got.Data, tier)
	}
	// Out of order: an older version applied after a newer one leaves
	// the newer.
	older, newer := &value{Record: *rec("conv_o", "", "older")}, &value{Record: *rec("conv_o", "", "newer")}
	now := time.Now()
	if err := s.mongo.apply(ctx, []op{{id: "conv_o", swap: true, v: newer, seq: 20}, {id: "conv_o", swap: true, v: older, seq: 10}}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.mongo.apply(ctx, []op{{id: "conv_o", swap: true, v: older, seq: 11}}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, err := s.mongo.get(ctx, "conv_o", now); err != nil || string(got.Data) != "newer" {
		t.Fatalf("out of order: %+v %v", got, err)
	}
	if err := s.mongo.apply(ctx, []op{{id: "conv_o", swap: true, v: &value{Record: *rec("conv_o", "", "newest")}, seq: 21}}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.mongo.get(ctx, "conv_o", now); string(got.Data) != "newest" {
		t.Fatalf("a newer swap did not replace: %q", got.Data)
	}
}

func TestEvents(t *testing.T) {
	srv := redistest.Start(t)
	cfg := config(t, fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q,"ttl":"1h"}}}`, srv.URL()))
	s := open(t, cfg, Options{})
	storetest.Events(t, s)
	// the log expires with its job
	ctx := context.Background()
	if err := s.Submit(ctx, rec("resp_ttl", "", "q"), &store.Job{Request: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	j, err := s.Claim(ctx, "run", time.Minute)
	if err != nil || j == nil {
		t.Fatal(j, err)
	}
	if _, err := s.AppendEvents(ctx, j.ID, "run", 0, [][]byte{[]byte("e")}); err != nil {
		t.Fatal(err)
	}
	job, _ := s.rdb.Do(ctx, s.rdb.B().Pttl().Key(s.jobKey(j.ID)).Build()).AsInt64()
	log, _ := s.rdb.Do(ctx, s.rdb.B().Pttl().Key(s.logKey(j.ID)).Build()).AsInt64()
	if log <= 0 || log > job {
		t.Fatalf("log pttl %d, job pttl %d", log, job)
	}
}
