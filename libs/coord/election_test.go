package coord

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/testkit/coordtest"
)

// campaignResult is what a Campaign run in a goroutine returned.
type campaignResult struct {
	l   *Leadership
	err error
}

// campaignAsync runs Campaign in a goroutine; the result arrives on the
// channel. The test must receive it.
func campaignAsync(ctx context.Context, t *testing.T, cli *clientv3.Client, service, id string, ttl time.Duration, opts ...Option) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	opts = append([]Option{WithLogger(testLogger(t)), WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)
	go func() {
		l, err := Campaign(ctx, cli, service, id, ttl, opts...)
		ch <- campaignResult{l, err}
	}()
	return ch
}

// elected waits for one of the campaigns to win and returns its index.
func elected(t *testing.T, timeout time.Duration, chs ...<-chan campaignResult) (int, *Leadership) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		for i, ch := range chs {
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatalf("campaign %d: %v", i, r.err)
				}
				return i, r.l
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no candidate elected after %s", timeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// noneElected checks that none of the campaigns wins for d.
func noneElected(t *testing.T, d time.Duration, chs ...<-chan campaignResult) {
	t.Helper()
	deadline := time.After(d)
	for {
		for i, ch := range chs {
			select {
			case r := <-ch:
				if r.l != nil {
					_ = r.l.Close(context.Background())
				}
				t.Fatalf("campaign %d returned while another leads: %v", i, r.err)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func waitDone(t *testing.T, l *Leadership, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Done():
		return time.Since(start)
	case <-time.After(timeout):
		t.Fatalf("leadership of %s still held after %s", l.ID(), timeout)
		return 0
	}
}

func checkLeader(t *testing.T, cli *clientv3.Client, service, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got, err := Leader(ctx, cli, service)
	if err != nil || got != want {
		t.Fatalf("Leader = %q, %v; want %q", got, err, want)
	}
}

func TestElectionOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	if _, err := Leader(ctx, cli, service); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader before any campaign = %v, want ErrNoLeader", err)
	}
	ids := []string{"cand-0", "cand-1", "cand-2"}
	chs := make([]<-chan campaignResult, len(ids))
	for i, id := range ids {
		chs[i] = campaignAsync(ctx, t, s2.Client(t), service, id, longTTL)
	}
	var prevRev int64
	for round := range ids {
		i, l := elected(t, 5*time.Second, chs...)
		chs = append(chs[:i:i], chs[i+1:]...)
		if l.Service() != service || l.Key() == "" || l.LeaseID() == 0 || l.Err() != nil {
			t.Fatalf("round %d: leadership %s key %q lease %x err %v", round, l.ID(), l.Key(), l.LeaseID(), l.Err())
		}
		if l.Revision() <= prevRev {
			t.Fatalf("round %d: revision %d not after %d", round, l.Revision(), prevRev)
		}
		prevRev = l.Revision()
		checkLeader(t, cli, service, l.ID())
		// The others keep waiting while it leads.
		noneElected(t, 300*time.Millisecond, chs...)
		select {
		case <-l.Done():
			t.Fatalf("round %d: Done closed while leading: %v", round, l.Err())
		default:
		}
		// Resign hands over at once.
		start := time.Now()
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Done open after Resign")
		}
		if !errors.Is(l.Err(), ErrClosed) {
			t.Fatalf("Err after Close = %v, want ErrClosed", l.Err())
		}
		if err := l.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, _, ok := getKey(t, cli, l.Key()); ok {
			t.Fatal("leader key present after Close")
		}
		if len(chs) > 0 {
			j, next := elected(t, 5*time.Second, chs...)
			t.Logf("round %d: %s elected %s after %s resigned", round, next.ID(), time.Since(start).Round(time.Millisecond), l.ID())
			// Put it back for the next round.
			ch := make(chan campaignResult, 1)
			ch <- campaignResult{l: next}
			chs[j] = ch
		}
	}
	if _, err := Leader(ctx, cli, service); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after every candidate resigned = %v, want ErrNoLeader", err)
	}
}

// A lease revoked behind the leader's back, or its key deleted: Done closes
// and the next candidate is elected.
func TestLeadershipLostBehindItsBack(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)

	for _, tc := range []struct {
		name string
		take func(l *Leadership) error
	}{
		{"lease revoked", func(l *Leadership) error { _, err := cli.Revoke(ctx, l.LeaseID()); return err }},
		{"key deleted", func(l *Leadership) error { _, err := cli.Delete(ctx, l.Key()); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			service := coordtest.PoolName(t)
			l, err := Campaign(ctx, s2.Client(t), service, "first", time.Second, WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close(ctx) }()
			next := campaignAsync(ctx, t, s2.Client(t), service, "second", time.Second)
			noneElected(t, 100*time.Millisecond, next)

			if err := tc.take(l); err != nil {
				t.Fatal(err)
			}
			d := waitDone(t, l, 3*time.Second)
			t.Logf("Done closed %s after the leadership was taken", d.Round(time.Millisecond))
			if !errors.Is(l.Err(), ErrLeadershipLost) {
				t.Fatalf("Err = %v, want ErrLeadershipLost", l.Err())
			}
			_, second := elected(t, 5*time.Second, next)
			defer func() { _ = second.Close(ctx) }()
			checkLeader(t, cli, service, "second")
			// Closing the lost leadership does not disturb the new leader.
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			checkLeader(t, cli, service, "second")
			select {
			case <-second.Done():
				t.Fatalf("the new leadership ended: %v", second.Err())
			default:
			}
		})
	}
}

// The leader's process dies (its client closes without resigning): the next
// candidate is elected once the lease expires, within about the TTL.
func TestLeaderProcessKilled(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	dying, err := s2.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dying.Close() }()
	const ttl = time.Second
	l, err := Campaign(ctx, dying, service, "dying", ttl, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	next := campaignAsync(ctx, t, s2.Client(t), service, "heir", ttl)
	noneElected(t, 1500*time.Millisecond, next) // keepalives hold it past the TTL

	if err := dying.Close(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, heir := elected(t, ttl+3*time.Second, next)
	defer func() { _ = heir.Close(ctx) }()
	t.Logf("heir elected %s after the leader's client closed (TTL %s)", time.Since(killed).Round(time.Millisecond), ttl)
	checkLeader(t, cli, service, "heir")
	waitDone(t, l, time.Second)
	start := time.Now()
	if err := l.Close(ctx); err == nil {
		t.Fatal("Close with a closed client reported no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close with a closed client took %s", d)
	}
}

// A campaign whose context ends withdraws its candidacy.
func TestCampaignCanceled(t *testing.T) {
	t.Parallel()
	s2, cli := integration2(t)
	ctx := testContext(t)
	service := coordtest.PoolName(t)

	l, err := Campaign(ctx, cli, service, "leader", longTTL, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close(ctx) }()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := Campaign(cctx, s2.Client(t), service, "waiting", longTTL, WithLogger(testLogger(t))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign = %v, want DeadlineExceeded", err)
	}
	resp, err := cli.Get(ctx, ElectionPrefix(service), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 {
		t.Fatalf("%d keys under the election prefix, want only the leader's", resp.Count)
	}
	checkLeader(t, cli, service, "leader")
}

func TestCampaignRejectsInvalid(t *testing.T) {
	t.Parallel()
	_, cli := integration2(t)
	ctx := testContext(t)
	for _, tc := range []struct {
		service, id string
		ttl         time.Duration
	}{
		{"", "a", longTTL},
		{"a/b", "a", longTTL},
		{"svc", "", longTTL},
		{"svc", "a", 10 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%q/%q/%s", tc.service, tc.id, tc.ttl), func(t *testing.T) {
			if l, err := Campaign(ctx, cli, tc.service, tc.id, tc.ttl); err == nil {
				_ = l.Close(ctx)
				t.Fatal("Campaign succeeded")
			}
		})
	}
	if _, err := Campaign(ctx, nil, "svc", "a", longTTL); err == nil {
		t.Fatal("Campaign with a nil client succeeded")
	}
	if _, err := Leader(ctx, cli, "a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Leader(a/b) = %v, want ErrInvalidName", err)
	}
}
