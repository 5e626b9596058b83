package service

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/services/indexer/internal/projection"
)

const model = "m"

func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// fleet projects `pods` pods; pod i*10 (i < holders) holds the first
// 50*(i+1) blocks of the prompt, every pod one block of its own.
func fleet(tb testing.TB, pods, holders int, prompt []uint32) (*projection.Projector, []string) {
	tb.Helper()
	x, err := index.New(index.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := projection.New(x, nil)
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, pods)
	stream := uint64(0)
	apply := func(pod string, ev events.Event) {
		payload, err := events.AppendBatch(nil, &events.Batch{Events: []events.Event{ev}}, events.EncodingArray)
		if err != nil {
			tb.Fatal(err)
		}
		stream++
		p.Apply(&eventsv1.KVEventBatch{Pod: pod, Model: model, Seq: stream, Payload: payload}, stream)
	}
	for i := range names {
		names[i] = fmt.Sprintf("pod-%03d", i)
		apply(names[i], events.Event{Kind: events.KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: seq(1_000_000+16*i, 16), BlockSize: 16})
	}
	for i := range holders {
		n := min(50*(i+1), len(prompt)/16)
		hashes := make([]uint64, n)
		for j := range hashes {
			hashes[j] = uint64(100 + j)
		}
		apply(names[i*10], events.Event{Kind: events.KindBlockStored, BlockHashes: hashes, TokenIDs: prompt[:n*16], BlockSize: 16})
	}
	return p, names
}

func serve(tb testing.TB, s *Server) indexerv1.IndexerServiceClient {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer()
	indexerv1.RegisterIndexerServiceServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	tb.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

func TestScoreAndLookup(t *testing.T) {
	prompt := seq(0, 512*16)
	proj, names := fleet(t, 30, 3, prompt)
	cli := serve(t, New("pool", proj))
	ctx := context.Background()
	resp, err := cli.Score(ctx, &indexerv1.ScoreRequest{Pool: "pool", Model: model, TokenIds: prompt[:200*16+5], Candidates: []string{names[20], names[0], "unknown", names[1]}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range resp.GetScores() {
		got = append(got, fmt.Sprintf("%s:%d:%.0f", s.GetEndpoint(), s.GetBlocks(), s.GetScore()))
	}
	if want := "pod-020:150:150 pod-000:50:50 unknown:0:0 pod-001:0:0"; strings.Join(got, " ") != want || resp.GetPromptBlocks() != 200 || resp.GetStreamSequence() != 33 {
		t.Fatalf("scores %v (prompt blocks %d, stream %d), want %s", got, resp.GetPromptBlocks(), resp.GetStreamSequence(), want)
	}
	// the same by block keys
	keys := proj.Index().Keyer().Prompt(nil, model, prompt[:200*16])
	byKeys := make([]uint64, len(keys))
	for i, k := range keys {
		byKeys[i] = uint64(k)
	}
	resp2, err := cli.Score(ctx, &indexerv1.ScoreRequest{BlockKeys: byKeys, Candidates: []string{names[20]}})
	if err != nil || resp2.GetScores()[0].GetBlocks() != 150 {
		t.Fatalf("by keys: %v, %v", resp2, err)
	}
	lk, err := cli.Lookup(ctx, &indexerv1.LookupRequest{BlockKeys: byKeys[:1]})
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for _, h := range lk.GetBlocks()[0].GetHolders() {
		holders = append(holders, h.GetEndpoint()+"/"+strings.Join(h.GetTiers(), ","))
	}
	slices.Sort(holders)
	if strings.Join(holders, " ") != "pod-000/GPU pod-010/GPU pod-020/GPU" {
		t.Fatalf("holders %v", holders)
	}
}

func TestScoreRejectsBadRequests(t *testing.T) {
	proj, _ := fleet(t, 2, 0, nil)
	cli := serve(t, New("pool", proj))
	for _, c := range []struct {
		req  *indexerv1.ScoreRequest
		code codes.Code
		msg  string
	}{
		{&indexerv1.ScoreRequest{Pool: "other"}, codes.NotFound, "pool"},
		{&indexerv1.ScoreRequest{TokenIds: []uint32{1}, BlockKeys: []uint64{1}}, codes.InvalidArgument, "not both"},
		{&indexerv1.ScoreRequest{TokenIds: []uint32{1}}, codes.InvalidArgument, "model"},
		{&indexerv1.ScoreRequest{Model: model, TokenIds: make([]uint32, MaxTokens+1)}, codes.InvalidArgument, "token_ids"},
	} {
		_, err := cli.Score(context.Background(), c.req)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Score(%.60v) = %v, want %v mentioning %q", c.req, err, c.code, c.msg)
		}
	}
}

// Score over gRPC on loopback: a 512-block prompt as token ids, 100
// candidate pods, 10 of them holding prefixes.
func BenchmarkScoreGRPC512Blocks100Pods(b *testing.B) {
	prompt := seq(0, 512*16)
	proj, names := fleet(b, 100, 10, prompt)
	cli := serve(b, New("pool", proj))
	req := &indexerv1.ScoreRequest{Model: model, TokenIds: prompt, Candidates: names}
	ctx := context.Background()
	var took []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := cli.Score(ctx, req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
}
