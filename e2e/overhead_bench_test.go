package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// BenchmarkGatewayOverhead measures what the gateway and the picker add to
// a request, in one run: the same small non-streamed completion is sent
// alternately straight to a vllm-sim pod and through the gateway (which
// picks over gRPC, proxies, and reports the completion), one at a time;
// the added latency is the difference of the two distributions' quantiles.
// The Pick RPC alone is timed the same way against the picker. The pod runs
// at --speed 1000 so that its own latency (and jitter) stays small.
//
// Reported: direct_p50_us, gateway_p50_us, added_p50_us, added_p99_us,
// pick_p50_us, pick_p99_us (per-request figures; ns/op is per pair).
func BenchmarkGatewayOverhead(b *testing.B) {
	s := startStack(b, "--pods", "1", "--slow-pods", "0", "--pickers", "1", "--speed", "1000")
	pod := "http://" + s.state.Pods[0].Address + "/v1/completions"
	gw := s.url("/v1/completions")
	body := fmt.Sprintf(`{"model":%q,"prompt":"Say hi","max_tokens":1}`, s.state.Model)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(url string) time.Duration {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	conn, err := grpc.NewClient(s.state.Pickers[0].GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	picker := pickerv1.NewPickerServiceClient(conn)
	pickReq := &pickerv1.PickRequest{RequestId: "bench", Api: pickerv1.Api_API_COMPLETIONS, Body: []byte(body)}
	pick := func() time.Duration {
		start := time.Now()
		out, err := picker.Pick(context.Background(), pickReq)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		// Off the clock: complete it, as the gateway does after the response.
		_, _ = picker.Complete(context.Background(), &pickerv1.CompleteRequest{Completion: completionOf(s.state.Pool, out.GetDecisionId())})
		return d
	}
	for range 300 { // warm up connections, pools and caches
		post(pod)
		post(gw)
		pick()
	}
	n := max(b.N, 2000)
	direct := make([]time.Duration, 0, n)
	through := make([]time.Duration, 0, n)
	picks := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		if i%2 == 0 {
			direct = append(direct, post(pod))
			through = append(through, post(gw))
		} else {
			through = append(through, post(gw))
			direct = append(direct, post(pod))
		}
		picks = append(picks, pick())
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(q(direct, 0.5), "direct_p50_us")
	b.ReportMetric(q(through, 0.5), "gateway_p50_us")
	b.ReportMetric(q(through, 0.5)-q(direct, 0.5), "added_p50_us")
	b.ReportMetric(q(through, 0.99)-q(direct, 0.99), "added_p99_us")
	b.ReportMetric(q(picks, 0.5), "pick_p50_us")
	b.ReportMetric(q(picks, 0.99), "pick_p99_us")
}
