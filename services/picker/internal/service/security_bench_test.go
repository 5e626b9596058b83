package service

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
	"github.com/hermod/hermod/testkit/certs"
)

// transports are the three ways a gateway reaches a picker, each a
// bootstrap.GRPCSecurity of the picker (server) and of the gateway
// (client).
type transport struct {
	name           string
	server, client bootstrap.GRPCSecurity
}

func benchTransports(b *testing.B) []transport {
	b.Helper()
	dir := b.TempDir()
	ca, err := certs.NewCA("bench CA")
	if err != nil {
		b.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCA(caFile); err != nil {
		b.Fatal(err)
	}
	write := func(identity string) certs.Files {
		kp, err := ca.Server(identity)
		if err != nil {
			b.Fatal(err)
		}
		f, err := kp.Write(dir, identity)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	pk, gw := write("picker"), write("gateway")
	return []transport{
		{name: "plaintext"},
		{name: "tls", server: bootstrap.GRPCSecurity{CertFile: pk.Cert, KeyFile: pk.Key}, client: bootstrap.GRPCSecurity{CAFile: caFile}},
		{name: "mtls-authz",
			server: bootstrap.GRPCSecurity{CAFile: caFile, CertFile: pk.Cert, KeyFile: pk.Key, ClientAuth: "require"},
			client: bootstrap.GRPCSecurity{CAFile: caFile, CertFile: gw.Cert, KeyFile: gw.Key}},
	}
}

// serveSecured serves srv with tr's server security through bootstrap (as
// hermod-picker does) and returns a client connected with tr's client
// security (as hermod-gateway does).
func serveSecured(b *testing.B, srv *Server, tr transport) pickerv1.PickerServiceClient {
	b.Helper()
	start := func(name string, g bootstrap.GRPCSecurity) *bootstrap.Service {
		s, err := bootstrap.Start(context.Background(), bootstrap.Options{Name: name, NoPool: true, Config: bootstrap.Config{GRPC: g}, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		return s
	}
	opts, err := start("hermod-picker", tr.server).GRPCServerOptions()
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	pickerv1.RegisterPickerServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	b.Cleanup(func() { gs.Stop(); <-done })
	conn, err := grpc.NewClient(lis.Addr().String(), start("hermod-gateway", tr.client).GRPCDialOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return pickerv1.NewPickerServiceClient(conn)
}

// BenchmarkPickRPCSecurity is what TLS and mutual TLS with authorisation
// add to a Pick over loopback gRPC, connections reused, in one run: each
// iteration makes one Pick over each transport (plaintext, tls,
// mtls-authz; the order rotates), so the three share the machine's noise.
// ns/op is the three Picks; the metrics are each transport's p50 and p99
// per Pick, and the p50 each secured one adds to plaintext.
func BenchmarkPickRPCSecurity(b *testing.B) {
	const n = 10
	eps := make([]*registryv1.Endpoint, n)
	for i := range eps {
		eps[i] = ep(fmt.Sprintf("pod-%03d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250))
	}
	f := newFixtureWith(b, func(o *Options) { o.Decisions = discard{} }, eps...)
	if err := f.loader.Apply(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte(reference000)}); err != nil {
		b.Fatal(err)
	}
	for i, e := range eps {
		f.set.UpdateMetrics(&eventsv1.PodMetrics{Endpoint: e.GetName(), Time: timestamppb.New(time.Now()), WaitingRequests: int64(i % 7)})
	}
	f.set.Flush()
	trs := benchTransports(b)
	clients := make([]pickerv1.PickerServiceClient, len(trs))
	for i, tr := range trs {
		clients[i] = serveSecured(b, f.srv, tr)
	}
	body := []byte(`{"model": "llama", "prompt": "` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) + `"}`)
	ctx := context.Background()
	pick := func(c pickerv1.PickerServiceClient) time.Duration {
		t0 := time.Now()
		out, err := c.Pick(ctx, &pickerv1.PickRequest{RequestId: "r", Api: pickerv1.Api_API_COMPLETIONS, Body: body})
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		f.folder.Completion(ctx, &eventsv1.RequestCompleted{DecisionId: out.GetDecisionId(), Pool: "pool"}, projection.SourceRPC)
		return d
	}
	for _, c := range clients { // connect and warm up outside the timing
		for range 100 {
			pick(c)
		}
	}
	lat := make([][]time.Duration, len(trs))
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		for k := range clients {
			j := (i + k) % len(clients)
			lat[j] = append(lat[j], pick(clients[j]))
		}
		i++
	}
	b.StopTimer()
	p50 := make([]float64, len(trs))
	for j, tr := range trs {
		slices.Sort(lat[j])
		p50[j] = micros(lat[j][len(lat[j])/2])
		b.ReportMetric(p50[j], "p50-µs/"+tr.name)
		b.ReportMetric(micros(lat[j][len(lat[j])*99/100]), "p99-µs/"+tr.name)
	}
	for j := 1; j < len(trs); j++ {
		b.ReportMetric(p50[j]-p50[0], "added-p50-µs/"+trs[j].name)
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
