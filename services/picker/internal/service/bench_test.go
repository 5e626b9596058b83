package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/picker/internal/projection"
)

// BenchmarkPickRPC measures a Pick over a loopback gRPC connection with the
// test config (a filter and two scorers) and a ~1.8 KB prompt: the request
// path cost of the picker as a gateway sees it. Each decision is completed
// in process (the Complete RPC is off the request path).
func BenchmarkPickRPC(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			eps := make([]*registryv1.Endpoint, n)
			for i := range eps {
				eps[i] = ep(fmt.Sprintf("pod-%03d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250))
			}
			f := newFixture(b, eps...)
			for i, e := range eps {
				f.set.UpdateMetrics(&eventsv1.PodMetrics{Endpoint: e.GetName(), Time: timestamppb.New(time.Now()), WaitingRequests: int64(i % 7)})
			}
			f.set.Flush()
			body := []byte(`{"model": "llama", "prompt": "` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) + `"}`)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				out, err := f.client.Pick(ctx, &pickerv1.PickRequest{RequestId: "r", Api: pickerv1.Api_API_COMPLETIONS, Body: body})
				if err != nil {
					b.Fatal(err)
				}
				f.folder.Completion(ctx, &eventsv1.RequestCompleted{DecisionId: out.GetDecisionId(), Pool: "pool"}, projection.SourceRPC)
			}
		})
	}
}
