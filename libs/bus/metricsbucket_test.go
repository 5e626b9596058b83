package bus

import (
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

func TestLatestMetricsReadsOnePoolsNewestValues(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, MetricsBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(pool, ep string, waiting int64) {
		t.Helper()
		if err := PutLatestMetrics(ctx, kv, &eventsv1.PodMetrics{Pool: pool, Endpoint: ep, Time: timestamppb.Now(), WaitingRequests: waiting}); err != nil {
			t.Fatal(err)
		}
	}
	if ms, _, err := LatestMetrics(ctx, js, "empty"); err != nil || len(ms) != 0 {
		t.Fatalf("empty pool: %v %v", ms, err)
	}
	put("a", "10.0.0.1:8000", 1)
	put("a", "pod.two", 2)
	put("a", "pod.two", 7) // the newest replaces it
	put("a.b", "pod", 9)   // a pool whose name extends "a" is another pool
	put("b", "pod", 3)
	if _, err := kv.Put(ctx, mustKey(t, "a", "garbage"), []byte{0xff, 0x01}); err != nil {
		t.Fatal(err)
	}
	ms, skipped, err := LatestMetrics(ctx, js, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, m := range ms {
		got[m.GetEndpoint()] = m.GetWaitingRequests()
	}
	if len(got) != 2 || got["10.0.0.1:8000"] != 1 || got["pod.two"] != 7 || skipped != 1 {
		t.Errorf("pool a: %v, skipped %d", got, skipped)
	}
	if err := PutLatestMetrics(ctx, kv, &eventsv1.PodMetrics{Pool: "", Endpoint: "x"}); err == nil {
		t.Error("metrics without a pool stored")
	}
}

func mustKey(t *testing.T, pool, ep string) string {
	t.Helper()
	k, err := MetricsKey(pool, ep)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
