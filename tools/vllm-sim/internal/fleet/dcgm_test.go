package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/tools/vllm-sim/internal/cli"
)

// The fleet's DCGM page says each pod's GPU utilisation, as Hermod's own
// dcgm-data-source and dcgm-extractor read it; the gpu_utilization fault
// sets it.
func TestDCGMPage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	opts, err := cli.Parse([]string{"serve", "m", "--host", "127.0.0.1", "--port", "0", "--pods", "2", "--dcgm-port", fmt.Sprint(port)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-f.Pods()[1].Ready()

	src := schedulingtest.New[*datalayer.DCGMSource](t, schedulingtest.NewHandle(), datalayer.DCGMSourceType, "gpus",
		fmt.Sprintf(`{"port": %d, "useNodeAddress": true}`, port))
	defer func() { _ = src.Close() }()
	gpu := func(pod string) float64 {
		ep := scheduling.NewEndpoint(pod, "192.0.2.1", 8000, nil)
		ep.NodeAddress = "127.0.0.1"
		var data any
		waitFor(t, "the DCGM page", func() bool {
			data, err = src.Fetch(context.Background(), ep)
			return err == nil
		})
		util, ok := datalayer.GPUUtilization(data.(map[string]*dto.MetricFamily), pod)
		if !ok {
			t.Fatalf("no sample of %s", pod)
		}
		return util
	}
	if u := gpu("vllm-sim-0"); u != 0 {
		t.Errorf("an idle pod: %v", u)
	}
	put := func(pod int, body string) {
		req, _ := http.NewRequest(http.MethodPut, "http://"+f.Pods()[pod].Addr()+"/sim/faults", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT /sim/faults %s: %s", body, resp.Status)
		}
	}
	put(1, `{"gpu_utilization": 97}`)
	if u0, u1 := gpu("vllm-sim-0"), gpu("vllm-sim-1"); u0 != 0 || u1 != 0.97 {
		t.Errorf("with pod 1's utilisation set to 97%%: %v, %v", u0, u1)
	}
	put(1, `{}`)
	if u := gpu("vllm-sim-1"); u != 0 {
		t.Errorf("fault cleared: %v", u)
	}
}
