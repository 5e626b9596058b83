package schedconfig

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/plugins/activerequest"
	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const activeOnly = "plugins: [{type: active-request-scorer}]\n"

func newLoader(t *testing.T, v Version) (*Loader, *[]*eventsv1.ConfigStatus) {
	t.Helper()
	var mu sync.Mutex
	var statuses []*eventsv1.ConfigStatus
	l, err := New(v, Options{Pool: "p", Replica: "r1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnStatus: func(st *eventsv1.ConfigStatus) { mu.Lock(); statuses = append(statuses, st); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, &statuses
}

func TestDefaultConfigWhenEmpty(t *testing.T) {
	l, statuses := newLoader(t, Version{Source: SourceDefault})
	lease := l.Acquire()
	defer lease.Release()
	d := lease.Scheduler().Describe()
	var types []string
	for _, p := range d.Plugins {
		types = append(types, p.Type)
	}
	if got := strings.Join(types, ","); !strings.Contains(got, "queue-scorer") || !strings.Contains(got, "prefix-cache-scorer") {
		t.Errorf("default plugins: %s", got)
	}
	if len(*statuses) != 1 || !(*statuses)[0].GetAccepted() || (*statuses)[0].GetSource() != SourceDefault {
		t.Errorf("statuses %v", *statuses)
	}
}

func TestInvalidVersionIsRejectedAndTheOldOneStays(t *testing.T) {
	l, statuses := newLoader(t, Version{Source: SourceEtcd, Revision: 3, Data: []byte(activeOnly)})
	before := l.Acquire()
	old := before.Scheduler()
	before.Release()

	err := l.Apply(Version{Source: SourceEtcd, Revision: 4, Data: []byte("plugins: [{type: queue-scorer, parameters: {bogus: 1}}]\nunknownKey: 1\n")})
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	lease := l.Acquire()
	if lease.Scheduler() != old || l.Current().Revision != 3 {
		t.Error("the previous scheduler is not in force after a rejection")
	}
	lease.Release()
	last := (*statuses)[len(*statuses)-1]
	if last.GetAccepted() || last.GetRevision() != 4 || !strings.Contains(last.GetError(), "unknownKey") || last.GetReplica() != "r1" {
		t.Errorf("rejection status: %v", last)
	}
	if err := l.Apply(Version{Source: SourceEtcd, Revision: 5, Data: []byte(activeOnly)}); !errors.Is(err, ErrUnchanged) {
		t.Errorf("same content: %v", err)
	}
}

// A reload carries the in-flight counts over, and cycles that still hold
// the old scheduler finish on it before it is closed.
func TestReloadKeepsStateAndRetiresTheOldScheduler(t *testing.T) {
	l, statuses := newLoader(t, Version{Source: SourceFile, Data: []byte(activeOnly)})
	eps := schedulingtest.Endpoints(3)
	held := l.Acquire()
	res, err := held.Scheduler().Schedule(context.Background(), schedulingtest.Completion("r", "m", "x"), eps)
	if err != nil {
		t.Fatal(err)
	}
	id := res.DecisionID
	res.Release()

	applied := make(chan error, 1)
	go func() {
		applied <- l.Apply(Version{Source: SourceFile, Data: []byte(activeOnly + "schedulingProfiles: [{name: default, plugins: [{pluginRef: active-request-scorer, weight: 3}]}]\n")})
	}()
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	// The held lease still works on the old scheduler.
	if _, err := held.Scheduler().Schedule(context.Background(), schedulingtest.Completion("r2", "m", "x"), eps); err != nil {
		t.Fatal(err)
	}
	held.Release()

	lease := l.Acquire()
	defer lease.Release()
	if lease.Scheduler() == held.Scheduler() {
		t.Fatal("the new config is not in force")
	}
	// Both decisions are in flight under the new config.
	var tr *activerequest.Tracker
	for _, p := range lease.Scheduler().Plugins() {
		if s, ok := p.(*activerequest.Scorer); ok {
			tr = s.Tracker()
		}
	}
	if tr == nil || tr.Len() != 2 {
		t.Fatalf("in flight under the new config: %v", tr)
	}
	lease.Scheduler().ResponseComplete(context.Background(), &scheduling.Response{DecisionID: id})
	if tr.Len() != 1 {
		t.Errorf("after completing the first decision under the new config: %d in flight, want 1", tr.Len())
	}
	if len(*statuses) != 2 || !(*statuses)[1].GetAccepted() {
		t.Errorf("statuses %v", *statuses)
	}
}

func TestAcquireUnderConcurrentReloads(t *testing.T) {
	l, _ := newLoader(t, Version{Source: SourceFile, Data: []byte(activeOnly)})
	eps := schedulingtest.Endpoints(4)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lease := l.Acquire()
				res, err := lease.Scheduler().Schedule(context.Background(), schedulingtest.Completion("r", "m", "x"), eps)
				if err != nil {
					t.Error(err)
				} else {
					res.Release()
				}
				lease.Release()
			}
		}()
	}
	for i := range 50 {
		w := []string{"1", "2"}[i%2]
		if err := l.Apply(Version{Source: SourceFile, Data: []byte(activeOnly + "schedulingProfiles: [{name: default, plugins: [{pluginRef: active-request-scorer, weight: " + w + "}]}]\n")}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
