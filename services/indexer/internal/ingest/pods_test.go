package ingest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// A restarted indexer in centralized mode catches up every registered pod
// from its replay socket, without waiting for the pod to publish again:
// the pods it had followed from where the stream stands, a pod it never
// heard from with all its engine buffers.
func TestCentralRestartCatchesUpEveryPodFromReplay(t *testing.T) {
	bind := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	pubA, replayA := connectPod(t, bind, "pod-a", true)
	pubB, replayB := connectPod(t, bind, "pod-b", true)
	pubC, replayC := connectPod(t, bind, "pod-c", true)
	targets := []Target{{Pod: "pod-a", Model: model, Replay: replayA}, {Pod: "pod-b", Model: model, Replay: replayB}, {Pod: "pod-c", Model: model, Replay: replayC}}
	payloads := workload(50, 11)

	// before the restart: pods a and b publish 30 batches each, live
	before := openSink()
	mg1, err := NewManager(Config{Pool: "p", Replica: "r", Sink: before})
	if err != nil {
		t.Fatal(err)
	}
	c1 := mg1.NewCentral(bind, "")
	c1.SetPods(targets, nil)
	mg1.SetTargets(targets)
	stop1 := startCentral(t, c1)
	time.Sleep(300 * time.Millisecond) // the pods' connections settle
	for _, p := range payloads[:30] {
		for _, pub := range []*kvzmq.Publisher{pubA, pubB} {
			if _, err := pub.Publish(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 10*time.Second, "pods a and b ingested", func() (bool, string) {
		a, b := seqsOf(before, "pod-a"), seqsOf(before, "pod-b")
		return len(a) == 30 && len(b) == 30, fmt.Sprintf("a %v b %v", a, b)
	})
	stop1()
	mg1.Close()

	// while the indexer is down: every pod publishes, nobody hears it
	for _, p := range payloads[30:] {
		for _, pub := range []*kvzmq.Publisher{pubA, pubB} {
			if _, err := pub.Publish(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range payloads[:7] {
		if _, err := pubC.Publish(p); err != nil {
			t.Fatal(err)
		}
	}

	// the restarted indexer resumes a and b after their last batch on the
	// stream and starts c afresh; no pod publishes again
	stream := map[string]uint64{}
	for _, b := range before.batches() {
		stream[b.GetPod()] = b.GetSeq()
	}
	after := openSink()
	reg := prometheus.NewRegistry()
	start := time.Now()
	mg2, err := NewManager(Config{Pool: "p", Replica: "r", Sink: after, Registerer: reg, Position: func(pod string) (uint64, bool) {
		s, ok := stream[pod]
		return s, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer mg2.Close()
	c2 := mg2.NewCentral(bind, "")
	c2.SetPods(targets, nil)
	mg2.SetTargets(targets)
	startCentral(t, c2)
	eventually(t, 10*time.Second, "every pod caught up", func() (bool, string) {
		a, b, c := seqsOf(after, "pod-a"), seqsOf(after, "pod-b"), seqsOf(after, "pod-c")
		return slices.Equal(a, seqRange(30, 49, false)) && slices.Equal(b, seqRange(30, 49, false)) && slices.Equal(c, seqRange(0, 6, true)),
			fmt.Sprintf("a %v b %v c %v", a, b, c)
	})
	t.Logf("caught up 3 pods %v after the restart", time.Since(start))
	if n, _ := metricValue(t, reg, "hermod_indexer_followed_pods"); n != 3 {
		t.Fatalf("hermod_indexer_followed_pods = %v in centralized mode, want 3", n)
	}
	if n, _ := metricValue(t, reg, "hermod_indexer_replay_polls_total", "result", "new"); n != 3 {
		t.Fatalf("replay polls that delivered: %v, want 3", n)
	}
}

// Pods this replica owns whose live events stop are reported, each with
// its reason, on the metrics and in one warning (rate-limited); an idle
// pod whose replay socket answers is not; a pod heard through another
// replica is not; a reported pod that publishes again is cleared.
func TestSilentPodsAreReported(t *testing.T) {
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	sink := openSink()
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: sink, Registerer: reg, Logger: logs.logger(),
		IdleCheck: 20 * time.Millisecond, SilentAfter: 400 * time.Millisecond, ReplayTimeout: 200 * time.Millisecond, SilentLogInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.buf.String())
		}
	})
	bind, c, _ := runCentral(t, mg)

	// idle: published a little, then nothing; its replay socket answers
	idle, idleReplay := connectPod(t, bind, "idle", true)
	// cut: publishes on, but its live connection goes nowhere (a hung
	// connection); its replay socket answers
	cutPort, cutReplayPort := freePort(t), freePort(t)
	cut, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", cutPort), ReplayEndpoint: fmt.Sprintf("tcp://*:%d", cutReplayPort), Topic: "kv@cut@m"})
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	// gone: its replay socket does not answer; quiet: it offers no replay;
	// elsewhere: no replay, but another replica puts its batches on the
	// stream
	gone := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	targets := []Target{
		{Pod: "idle", Model: model, Replay: idleReplay},
		{Pod: "cut", Model: model, Replay: fmt.Sprintf("tcp://127.0.0.1:%d", cutReplayPort)},
		{Pod: "gone", Model: model, Replay: gone},
		{Pod: "quiet", Model: model},
		{Pod: "elsewhere", Model: model},
	}
	c.SetPods(targets, nil)
	mg.SetTargets(targets)
	time.Sleep(200 * time.Millisecond)
	payloads := workload(200, 5)
	for _, p := range payloads[:3] {
		if _, err := idle.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // cut publishes, elsewhere is heard through the stream
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			if _, err := cut.Publish(payloads[i%len(payloads)]); err != nil {
				t.Error(err)
				return
			}
			mg.Observe(&eventsv1.KVEventBatch{Pod: "elsewhere", Seq: uint64(i), Replica: "other"})
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	want := map[string]float64{silentUnreachable: 1, silentLiveLost: 1, silentUnverified: 1}
	silent := map[string]string{"gone": silentUnreachable, "cut": silentLiveLost, "quiet": silentUnverified}
	eventually(t, 5*time.Second, "silent pods reported by reason", func() (bool, string) {
		got := map[string]float64{}
		for _, why := range silentReasons {
			got[why], _ = metricValue(t, reg, "hermod_indexer_silent_pods", "reason", why)
		}
		warned := map[string]int{}
		for pod, why := range silent {
			warned[pod] = len(logs.lines(t, "WARN", map[string]string{"pod": pod, "reason": why}))
		}
		return fmt.Sprint(got) == fmt.Sprint(want) && warned["gone"] > 0 && warned["cut"] > 0 && warned["quiet"] > 0, fmt.Sprint(got, warned)
	})
	time.Sleep(300 * time.Millisecond) // checks go on: the warnings do not
	for pod, why := range silent {
		if age, ok := metricValue(t, reg, "hermod_indexer_pod_last_event_age_seconds", "pod", pod); !ok || age < 0.4 {
			t.Errorf("last event age of %s: %v (%v), want at least 0.4s", pod, age, ok)
		}
		if n := len(logs.lines(t, "WARN", map[string]string{"pod": pod, "reason": why})); n != 1 {
			t.Errorf("%d warnings about silent pod %s (%s), want 1", n, pod, why)
		}
	}
	for _, pod := range []string{"idle", "elsewhere"} {
		if n := len(logs.lines(t, "WARN", map[string]string{"pod": pod})); n != 0 {
			t.Errorf("%d warnings about %s, which is not silent", n, pod)
		}
	}
	if n, _ := metricValue(t, reg, "hermod_indexer_followed_pods"); n != 5 {
		t.Errorf("hermod_indexer_followed_pods = %v, want 5", n)
	}
	// the cut pod's batches still reach the stream, through replay
	eventually(t, 5*time.Second, "the cut pod's batches replayed", func() (bool, string) {
		got := seqsOf(sink, "cut")
		return len(got) > 5 && slices.Equal(got, seqRange(0, uint64(len(got)-1), true)), fmt.Sprint(got)
	})

	// quiet publishes (its connection was late): it is live again
	quiet, _ := connectPod(t, bind, "quiet", false)
	eventually(t, 5*time.Second, "quiet heard again", func() (bool, string) {
		if _, err := quiet.Publish(payloads[0]); err != nil {
			t.Fatal(err)
		}
		n, _ := metricValue(t, reg, "hermod_indexer_silent_pods", "reason", silentUnverified)
		return n == 0 && len(logs.lines(t, "INFO", map[string]string{"pod": "quiet", "msg": "the pod's KV events arrive again"})) == 1, fmt.Sprint(n)
	})
}

// A gap in a pod's live batches is filled from its replay socket before
// the batch after it goes on; only the gap repairs it here (the quiet
// pod's asks are an hour apart).
func TestCentralGapTriggersReplay(t *testing.T) {
	reg := prometheus.NewRegistry()
	sink := newGatedSink()
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: sink, Registerer: reg, PodQueue: 4, IdleCheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	bind, c, _ := runCentral(t, mg)
	pub, replay := connectPod(t, bind, "pod-a", true)
	c.SetPods([]Target{{Pod: "pod-a", Model: model, Replay: replay}}, nil)
	time.Sleep(300 * time.Millisecond)
	payloads := workload(101, 3)
	for _, p := range payloads[:100] {
		if _, err := pub.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	// the worker is stuck in the sink: the pod's queue holds 4 batches,
	// the rest are dropped
	eventually(t, 5*time.Second, "batches dropped past the pod's queue", func() (bool, string) {
		n, _ := metricValue(t, reg, "hermod_indexer_ingest_errors_total", "stage", "queue_full")
		return n > 50, fmt.Sprint(n)
	})
	sink.mu.Lock()
	close(sink.gate)
	sink.mu.Unlock()
	// the 4 or 5 batches the worker held (one in the sink, the queue full)
	eventually(t, 5*time.Second, "the queued batches handed on", func() (bool, string) {
		got := seqsOf(sink, "pod-a")
		time.Sleep(100 * time.Millisecond)
		return len(got) >= 4 && len(seqsOf(sink, "pod-a")) == len(got), fmt.Sprint(got)
	})
	if _, err := pub.Publish(payloads[100]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gap replayed", func() (bool, string) {
		got := seqsOf(sink, "pod-a")
		return slices.Equal(got, seqRange(0, 100, true)), fmt.Sprint(got)
	})
	for _, kind := range []string{"gap", "replay"} {
		if n, _ := metricValue(t, reg, "hermod_indexer_repairs_total", "kind", kind); n != 1 {
			t.Errorf("repairs of kind %s: %v, want 1", kind, n)
		}
	}
	if n, ok := metricValue(t, reg, "hermod_indexer_replay_polls_total"); ok {
		t.Errorf("%v asks of the replay socket; only the gap should have replayed", n)
	}
}

// Shutdown does not wait on pods that are gone: neither on their sockets
// nor on replays in flight to them.
func TestShutdownIsPromptWithPodsGone(t *testing.T) {
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: openSink(), IdleCheck: 20 * time.Millisecond, ReplayTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, stopCentral := runCentral(t, mg)
	var ts []Target
	for i := range 8 {
		tg := Target{Pod: fmt.Sprintf("pod-%d", i), Model: model, Replay: fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))}
		if i%2 == 0 { // discovery: the pod's own socket is gone too
			tg.Events = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
		}
		ts = append(ts, tg)
	}
	mg.SetTargets(ts)
	time.Sleep(300 * time.Millisecond) // every pod's first replay is waiting
	start := time.Now()
	stopCentral()
	mg.Close()
	took := time.Since(start)
	t.Logf("shutdown with 8 pods gone took %v", took)
	if took > 300*time.Millisecond {
		t.Fatalf("shutdown took %v with the pods gone", took)
	}
}

// A quiet pod's replay socket is asked less and less often, not every
// IdleCheck forever.
func TestQuietPodPollsBackOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: openSink(), Registerer: reg, IdleCheck: 20 * time.Millisecond, PollMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	bind := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	_, replay := connectPod(t, bind, "pod-a", true)
	mg.SetTargets([]Target{{Pod: "pod-a", Model: model, Replay: replay}})
	time.Sleep(1500 * time.Millisecond)
	n, _ := metricValue(t, reg, "hermod_indexer_replay_polls_total", "result", "nothing")
	// 20ms doubling (+-20%) to 1s: about 7 asks in 1.5s; 75 without backoff
	if n < 3 || n > 12 {
		t.Fatalf("%v asks of a quiet pod's replay socket in 1.5s", n)
	}
	t.Logf("%v asks in 1.5s", n)
}

// Pods that are deregistered (or move to another replica) are forgotten,
// with their metrics.
func TestDeregisteredPodsAreDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	mg, err := NewManager(Config{Pool: "p", Replica: "r", Sink: openSink(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	bind, c, _ := runCentral(t, mg)
	mg.SetTargets([]Target{{Pod: "a", Model: model}, {Pod: "b", Model: model}})
	if _, ok := metricValue(t, reg, "hermod_indexer_pod_last_event_age_seconds", "pod", "b"); !ok {
		t.Fatal("no last event age of pod b")
	}
	mg.SetTargets([]Target{{Pod: "a", Model: model}})
	if n, _ := metricValue(t, reg, "hermod_indexer_followed_pods"); n != 1 {
		t.Fatalf("followed pods %v after b left", n)
	}
	if _, ok := metricValue(t, reg, "hermod_indexer_pod_last_event_age_seconds", "pod", "b"); ok {
		t.Fatal("pod b's series outlived it")
	}

	// a registered pod owned by another replica that connects here anyway
	// is ingested until it is deregistered
	c.SetPods([]Target{{Pod: "a", Model: model}, {Pod: "v", Model: model}}, nil)
	pub, _ := connectPod(t, bind, "v", false)
	eventually(t, 5*time.Second, "the visitor's batches ingested", func() (bool, string) {
		if _, err := pub.Publish(workload(1, 1)[0]); err != nil {
			t.Fatal(err)
		}
		mg.mu.RLock()
		defer mg.mu.RUnlock()
		return mg.pods["v"] != nil, ""
	})
	if n, _ := metricValue(t, reg, "hermod_indexer_followed_pods"); n != 1 {
		t.Fatalf("followed pods %v: a visitor counted", n)
	}
	c.SetPods([]Target{{Pod: "a", Model: model}}, nil)
	mg.mu.RLock()
	names := make([]string, 0, len(mg.pods))
	for name := range mg.pods {
		names = append(names, name)
	}
	mg.mu.RUnlock()
	if strings.Join(names, ",") != "a" {
		t.Fatalf("ingesting %v after v was deregistered", names)
	}
}
