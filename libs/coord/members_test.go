package coord

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/testkit/coordtest"
)

// membersRecorder collects the lists a MembersWatcher delivers.
type membersRecorder struct {
	mu    sync.Mutex
	lists [][]Member
}

func (r *membersRecorder) record(ms []Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, ms)
}

func (r *membersRecorder) all() [][]Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists)
}

// waitIDs waits until the last list has exactly ids and returns it.
func (r *membersRecorder) waitIDs(t *testing.T, ids ...string) []Member {
	t.Helper()
	var got []Member
	eventually(t, 10*time.Second, "no member list "+strings.Join(ids, ","), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.lists); n > 0 && slices.Equal(MemberIDs(r.lists[n-1]), ids) {
			got = r.lists[n-1]
			return true
		}
		return false
	})
	if ids == nil && got == nil {
		return []Member{}
	}
	return got
}

func TestMemberKeyLayout(t *testing.T) {
	if got, want := MemberKey("collector", "pod-1"), "/hermod/members/collector/pod-1"; got != want {
		t.Fatalf("MemberKey = %q, want %q", got, want)
	}
	if got, want := ElectionPrefix("autoscaler"), "/hermod/election/autoscaler/"; got != want {
		t.Fatalf("ElectionPrefix = %q, want %q", got, want)
	}
}

func TestDecodeMember(t *testing.T) {
	joined := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	good, err := EncodeMember(Member{ID: "pod-1", Address: "10.0.0.7:9000", JoinedAt: joined})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMember("svc", MemberKey("svc", "pod-1"), good)
	if err != nil || m.ID != "pod-1" || m.Address != "10.0.0.7:9000" || !m.JoinedAt.Equal(joined) {
		t.Fatalf("DecodeMember = %+v, %v", m, err)
	}
	m, err = DecodeMember("svc", MemberKey("svc", "pod-2"), []byte(`{"id":"pod-2","joined_at":"2026-01-02T03:04:05Z","from_the_future":1}`))
	if err != nil || m.ID != "pod-2" {
		t.Fatalf("DecodeMember with an unknown field = %+v, %v", m, err)
	}
	for _, tc := range []struct{ name, key, value string }{
		{"not json", MemberKey("svc", "pod-1"), "{"},
		{"id differs", MemberKey("svc", "pod-2"), string(good)},
		{"other service", MemberKey("other", "pod-1"), string(good)},
		{"nested key", MemberKey("svc", "pod-1/x"), string(good)},
		{"empty id", MemberKey("svc", ""), string(good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMember("svc", tc.key, []byte(tc.value))
			var ke KeyError
			if !errors.Is(err, ErrMalformed) || !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("DecodeMember = %v, want a KeyError for %s", err, tc.key)
			}
		})
	}
}

func TestJoinWatchLeave(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	rec := &membersRecorder{}
	w, err := WatchMembers(ctx, cli, service, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := rec.waitIDs(t); len(got) != 0 {
		t.Fatalf("initial members %v", got)
	}

	b, err := Join(ctx, cli, service, "pod-b", longTTL, WithLogger(testLogger(t)), WithAddress("10.0.0.2:9000"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close(ctx) }()
	a, err := Join(ctx, cli, service, "pod-a", longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(ctx) }()
	got := rec.waitIDs(t, "pod-a", "pod-b")
	if got[1].Address != "10.0.0.2:9000" || got[0].Address != "" {
		t.Fatalf("addresses: %+v", got)
	}
	if !got[1].JoinedAt.Equal(b.Member().JoinedAt) || time.Since(got[1].JoinedAt) > time.Minute {
		t.Fatalf("joined_at %v, membership says %v", got[1].JoinedAt, b.Member().JoinedAt)
	}

	// The value is small JSON, bound to the lease.
	value, lease, ok := getKey(t, cli, MemberKey(service, "pod-b"))
	if !ok || lease != b.LeaseID() || b.Key() != MemberKey(service, "pod-b") {
		t.Fatalf("member key: present %v, lease %x, want %x", ok, lease, b.LeaseID())
	}
	var fields map[string]any
	if err := json.Unmarshal(value, &fields); err != nil || fields["id"] != "pod-b" || fields["address"] != "10.0.0.2:9000" || fields["joined_at"] == nil {
		t.Fatalf("member value %s (%v)", value, err)
	}

	listed, rev, err := ListMembers(ctx, cli, service)
	if err != nil || rev == 0 || !slices.Equal(MemberIDs(listed), []string{"pod-a", "pod-b"}) {
		t.Fatalf("ListMembers = %v at %d, %v", listed, rev, err)
	}

	// Close leaves at once.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := getKey(t, cli, a.Key()); ok {
		t.Fatal("member key present right after Close")
	}
	rec.waitIDs(t, "pod-b")

	// A malformed entry is skipped, and does not hide the others.
	if _, err := cli.Put(ctx, MemberKey(service, "garbage"), "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, MemberKey(service, "pod-c"), `{"id":"pod-c","joined_at":"2026-01-02T03:04:05Z"}`); err != nil {
		t.Fatal(err)
	}
	rec.waitIDs(t, "pod-b", "pod-c")
	for _, l := range rec.all() {
		if slices.Contains(MemberIDs(l), "garbage") {
			t.Fatalf("malformed member delivered: %v", l)
		}
	}
	// Lists are sorted and never repeated.
	lists := rec.all()
	for i, l := range lists {
		if !slices.IsSortedFunc(l, func(x, y Member) int { return strings.Compare(x.ID, y.ID) }) {
			t.Fatalf("list %d not sorted: %v", i, MemberIDs(l))
		}
		if i > 0 && slices.Equal(MemberIDs(l), MemberIDs(lists[i-1])) {
			t.Fatalf("list %d repeats the one before: %v", i, MemberIDs(l))
		}
	}
}

// A member whose lease is revoked behind its back joins again under a new
// lease; the watcher sees it leave and come back.
func TestMemberRejoinsAfterLeaseLoss(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	rec := &membersRecorder{}
	w, err := WatchMembers(ctx, cli, service, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	own := s2.Client(t)
	m, err := Join(ctx, own, service, "pod-a", time.Second,
		WithLogger(testLogger(t)), WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	first := rec.waitIDs(t, "pod-a")[0]
	lease := m.LeaseID()

	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "member not joined again", func() bool {
		_, l, ok := getKey(t, cli, m.Key())
		return ok && l != lease && l == m.LeaseID()
	})
	// The key carries the new lease before the watcher has necessarily
	// delivered it: wait for the list that shows the second membership.
	var again Member
	eventually(t, 10*time.Second, "the watcher never saw the member join again", func() bool {
		l := rec.all()
		if len(l) == 0 || !slices.Equal(MemberIDs(l[len(l)-1]), []string{"pod-a"}) {
			return false
		}
		again = l[len(l)-1][0]
		return again.JoinedAt.Equal(m.Member().JoinedAt)
	})
	if !again.JoinedAt.After(first.JoinedAt) {
		t.Fatalf("joined again at %v, first at %v", again.JoinedAt, first.JoinedAt)
	}
	sawGone := false
	for _, l := range rec.all() {
		sawGone = sawGone || len(l) == 0
	}
	if !sawGone {
		t.Fatalf("the watcher never saw the member leave: %v", rec.all())
	}
	// The new lease is kept alive.
	time.Sleep(1500 * time.Millisecond)
	if _, l, ok := getKey(t, cli, m.Key()); !ok || l != m.LeaseID() {
		t.Fatalf("after 1.5 TTLs: present %v under lease %x, want %x", ok, l, m.LeaseID())
	}
}

// A member whose process dies (its client closed) leaves once its lease
// expires.
func TestMemberLeavesWhenProcessDies(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	rec := &membersRecorder{}
	w, err := WatchMembers(ctx, cli, service, rec.record, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dying, err := s2.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dying.Close() }()
	m, err := Join(ctx, dying, service, "pod-a", time.Second, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	stay, err := Join(ctx, cli, service, "pod-b", longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stay.Close(ctx) }()
	rec.waitIDs(t, "pod-a", "pod-b")
	if err := dying.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitIDs(t, "pod-b")
	if err := m.Close(ctx); err == nil {
		t.Fatal("Close with a closed client reported no error")
	}
}

func TestJoinRejectsInvalid(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	for _, tc := range []struct {
		name, service, id string
		ttl               time.Duration
		nameErr           bool
	}{
		{"empty service", "", "pod-a", longTTL, true},
		{"slash in service", "a/b", "pod-a", longTTL, true},
		{"empty id", service, "", longTTL, true},
		{"slash in id", service, "a/b", longTTL, true},
		{"short ttl", service, "pod-a", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Join(ctx, cli, tc.service, tc.id, tc.ttl)
			if err == nil {
				_ = m.Close(ctx)
				t.Fatal("Join succeeded")
			}
			if errors.Is(err, ErrInvalidName) != tc.nameErr {
				t.Fatalf("err = %v; ErrInvalidName %v, want %v", err, errors.Is(err, ErrInvalidName), tc.nameErr)
			}
		})
	}
	if _, err := Join(ctx, nil, service, "pod-a", longTTL); err == nil {
		t.Fatal("Join with a nil client succeeded")
	}
	if _, err := WatchMembers(ctx, cli, service, nil); err == nil {
		t.Fatal("WatchMembers with a nil callback succeeded")
	}
	if _, _, err := ListMembers(ctx, cli, ""); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("ListMembers(\"\") = %v", err)
	}
	resp, err := cli.Get(ctx, MembersPrefix(service), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("rejected joins wrote %d keys (%v)", resp.Count, err)
	}
}

func FuzzDecodeMember(f *testing.F) {
	good, err := EncodeMember(Member{ID: "pod-1", Address: "10.0.0.7:9000", JoinedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(MemberKey("svc", "pod-1"), good)
	f.Add(MemberKey("svc", "pod-1"), []byte(`{"id":"pod-1"}`))
	f.Add(MemberKey("svc", "a/b"), []byte(`{}`))
	f.Add("", []byte(nil))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		m, err := DecodeMember("svc", key, value)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeMember = %v, not ErrMalformed", err)
			}
			return
		}
		// A decoded member encodes and decodes to itself.
		b, err := EncodeMember(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeMember("svc", key, b)
		if err != nil || again.ID != m.ID || again.Address != m.Address || !again.JoinedAt.Equal(m.JoinedAt) {
			t.Fatalf("re-decode = %+v, %v; want %+v", again, err, m)
		}
	})
}
