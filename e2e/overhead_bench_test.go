package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
)

// BenchmarkGatewayOverhead measures what the gateway and the picker add to
// a request, beside what a plain reverse proxy adds, in one run: the same
// small non-streamed completion is sent straight to a vllm-sim pod,
// through nginx (Debian's, when installed: make bench-overhead installs
// it) proxying to the pod over kept-alive connections, and through the
// gateway (which picks over gRPC, proxies, and reports the completion),
// one at a time, in rotating order; what each adds is the difference of
// its distribution's quantiles and the direct one's. The Pick RPC alone
// is timed the same way against the picker, with the body parsed as the
// gateway sends it: between the requests (their decision and completion
// events being processed meanwhile) and then in a phase of its own. The pod runs at --speed 1000 so that its own latency
// (and jitter) stays small.
//
// Reported: direct_p50_us, gateway_p50_us, added_p50_us, added_p99_us,
// nginx_added_p50_us, nginx_added_p99_us, pick_p50_us, pick_p99_us,
// pick_alone_p50_us, pick_alone_p99_us, and the CPU each way spends per
// request, gateway_cpu_us/req (gateway and picker) and nginx_cpu_us/req
// (per-request figures; ns/op is per run).
func BenchmarkGatewayOverhead(b *testing.B) {
	s := startStack(b, "--pods", "1", "--slow-pods", "0", "--pickers", "1", "--speed", "1000")
	pod := "http://" + s.state.Pods[0].Address + "/v1/completions"
	gw := s.url("/v1/completions")
	proxied, nginxPID := "", 0
	if addr, pid, ok := startNginx(b, s.state.Pods[0].Address); ok {
		proxied, nginxPID = "http://"+addr+"/v1/completions", pid
	}
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
	conn, err := grpc.NewClient(s.state.Pickers[0].GRPC, s.grpcCreds(b, "gateway")) // Pick as the gateway does
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	picker := pickerv1.NewPickerServiceClient(conn)
	parsed, err := openai.Parse(openai.APICompletions, []byte(body))
	if err != nil {
		b.Fatal(err)
	}
	// The decision event comes back in the answer, as the gateway asks (the
	// bench publishes none: its completions are all the picker learns).
	pickReq := &pickerv1.PickRequest{RequestId: "bench", Api: pickerv1.Api_API_COMPLETIONS, Request: parsed.Proto(), CallerPublishesDecision: true}
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
	ways := []string{pod, gw}
	if proxied != "" {
		ways = append(ways, proxied)
	}
	for range 300 { // warm up connections, pools and caches
		for _, u := range ways {
			post(u)
		}
		pick()
	}
	n := max(b.N, 2000)
	took := make(map[string][]time.Duration, len(ways))
	picks := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		for j := range ways {
			u := ways[(i+j)%len(ways)]
			took[u] = append(took[u], post(u))
		}
		picks = append(picks, pick())
	}
	// The Pick RPC alone: the same picks in a phase of their own, without
	// the requests' events (decisions, completions) in process around them.
	alone := make([]time.Duration, 0, n)
	for range n {
		alone = append(alone, pick())
	}
	// CPU per request: the gateway's and the picker's (user + system,
	// from /proc) over requests through the gateway alone, and nginx's
	// (master and worker) over requests through it alone.
	gatewayCPU := func() float64 {
		return cpuSeconds(b, s.state.PIDs["gateway"]) + cpuSeconds(b, s.state.PIDs["picker-0"])
	}
	perRequest := func(url string, cpu func() float64) float64 {
		before := cpu()
		for range n {
			post(url)
		}
		return (cpu() - before) / float64(n) * 1e6
	}
	gatewayCPUus := perRequest(gw, gatewayCPU)
	nginxCPUus := 0.0
	if proxied != "" {
		nginxCPUus = perRequest(proxied, func() float64 { return treeCPUSeconds(b, nginxPID) })
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	direct, through := took[pod], took[gw]
	b.ReportMetric(q(direct, 0.5), "direct_p50_us")
	b.ReportMetric(q(through, 0.5), "gateway_p50_us")
	b.ReportMetric(q(through, 0.5)-q(direct, 0.5), "added_p50_us")
	b.ReportMetric(q(through, 0.99)-q(direct, 0.99), "added_p99_us")
	if proxied != "" {
		b.ReportMetric(q(took[proxied], 0.5)-q(direct, 0.5), "nginx_added_p50_us")
		b.ReportMetric(q(took[proxied], 0.99)-q(direct, 0.99), "nginx_added_p99_us")
	}
	b.ReportMetric(q(picks, 0.5), "pick_p50_us")
	b.ReportMetric(q(picks, 0.99), "pick_p99_us")
	b.ReportMetric(q(alone, 0.5), "pick_alone_p50_us")
	b.ReportMetric(q(alone, 0.99), "pick_alone_p99_us")
	b.ReportMetric(gatewayCPUus, "gateway_cpu_us/req")
	if proxied != "" {
		b.ReportMetric(nginxCPUus, "nginx_cpu_us/req")
	}
}

// treeCPUSeconds is the CPU time of a process and its children (nginx's
// master and workers).
func treeCPUSeconds(b *testing.B, pid int) float64 {
	total := cpuSeconds(b, pid)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(c); err == nil {
				total += cpuSeconds(b, child)
			}
		}
	}
	return total
}

// startNginx runs nginx as a plain reverse proxy to upstream (kept-alive
// connections, no buffering, no access log) on a free loopback port, until
// the benchmark ends; ok is false when nginx is not installed.
func startNginx(b *testing.B, upstream string) (addr string, pid int, ok bool) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		b.Log("nginx is not installed (make bench-overhead installs it): no nginx figures")
		return "", 0, false
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr = lis.Addr().String()
	_ = lis.Close()
	dir := b.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream pod { server %[2]s; keepalive 16; }
	server {
		listen %[3]s;
		location / {
			proxy_pass http://pod;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}
}
`, dir, upstream, addr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return addr, cmd.Process.Pid, true
		}
		if time.Now().After(deadline) {
			b.Fatalf("nginx did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
