package bench

import (
	"context"
	"errors"
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
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hermod/hermod/tools/loadgen/extprocfront"
	"github.com/hermod/hermod/tools/loadgen/runner"
)

// Who routes a run's requests (Router.Kind).
const (
	// RouterGateway is Hermod's gateway, the default.
	RouterGateway = ""
	// RouterHermod is Hermod's picker behind the ext_proc front, as an
	// Envoy would drive it.
	RouterHermod = "hermod"
	// RouterLLMD is the llm-d router's endpoint picker (its cmd/epp)
	// behind the same front, discovering the fleet from an endpoints file.
	RouterLLMD = "llm-d"
)

// Router is who routes a run: Hermod's gateway, or a picker (Hermod's or
// the llm-d router's) behind the ext_proc front, so that between two
// routers only the router differs.
type Router struct {
	Kind string `json:"kind,omitempty"`
	// EPP is the llm-d router's binary (RouterLLMD).
	EPP string `json:"epp,omitempty"`
	// Source names what the EPP was built from (a commit), for reports.
	Source string `json:"source,omitempty"`
}

func (r Router) validate() error {
	switch r.Kind {
	case RouterGateway, RouterHermod:
		return nil
	case RouterLLMD:
		if r.EPP == "" {
			return errors.New("router llm-d: the EPP binary is required")
		}
		return nil
	}
	return fmt.Errorf("router: unknown kind %q (want %q, %q or none)", r.Kind, RouterHermod, RouterLLMD)
}

// RouterStats is what a picker behind the front cost and how fast it
// decided, over a run's workload.
type RouterStats struct {
	// Process is the picker's process (hermod-picker, epp).
	Process string `json:"process"`
	// CPUSeconds is the CPU time it used during the workload, and
	// CPUPerRequest that over the requests sent.
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUPerRequest float64 `json:"cpu_per_request_seconds"`
	// IdleCores is the CPU it used with no request in flight (cores,
	// measured over idleWindow before the workload): what it spends on
	// its own (scraping, folding events) whatever the load. BusyPerRequest
	// is CPUPerRequest less that idle rate over the workload's duration:
	// what a request adds.
	IdleCores      float64 `json:"idle_cores"`
	BusyPerRequest float64 `json:"busy_cpu_per_request_seconds"`
	// PeakRSS is the most memory it held, from its start.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Decision* are the front's times from a request's arrival to the
	// picker's answer naming its endpoint (seconds).
	DecisionP50 float64 `json:"decision_p50"`
	DecisionP90 float64 `json:"decision_p90"`
	DecisionP99 float64 `json:"decision_p99"`
	// Immediate is the requests the picker answered itself (refused);
	// UpstreamErrors those no endpoint it named took.
	Immediate      int64 `json:"immediate"`
	UpstreamErrors int64 `json:"upstream_errors"`
}

// routed is a running front and the picker behind it.
type routed struct {
	url     string
	process string
	pid     int
	front   *extprocfront.Front
	srv     *http.Server
	served  chan error
	conn    *grpc.ClientConn
	epp     *exec.Cmd
	eppDone chan error
	cpu0    time.Duration
	began   time.Time
	idle    float64 // cores
}

// idleWindow is how long a router's idle CPU is measured before a run.
const idleWindow = 3 * time.Second

// Timeouts of a peer's life.
const (
	eppStartTimeout = 60 * time.Second
	eppStopTimeout  = 20 * time.Second
)

// startRouter starts the front for spec's router on the stack's fleet:
// Hermod's picker of the stack, or an EPP started here on the stack's
// pods (its config the stack's, with the file discovery added).
func startRouter(ctx context.Context, dir string, spec *Spec, st *stack, log io.Writer) (_ *routed, err error) {
	r := &routed{}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.stop())
		}
	}()
	var addr string
	switch spec.Router.Kind {
	case RouterHermod:
		p := st.state.Pickers[0]
		addr, r.process, r.pid = p.GRPC, "hermod-picker", st.state.PIDs[p.Name]
		if r.pid == 0 {
			return nil, fmt.Errorf("router: no pid for %s in the stack's state", p.Name)
		}
	case RouterLLMD:
		if addr, err = r.startEPP(ctx, dir, spec, st, log); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("router: %q is not driven through the front", spec.Router.Kind)
	}
	if r.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	timeout := spec.Timeout
	if spec.Fleet.Speed > 0 {
		timeout = time.Duration(float64(timeout) / spec.Fleet.Speed)
	}
	r.front = extprocfront.New(r.conn, extprocfront.Options{Timeout: max(timeout, time.Minute)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	r.url = "http://" + l.Addr().String()
	r.srv = &http.Server{Handler: r.front, ReadHeaderTimeout: 10 * time.Second}
	r.served = make(chan error, 1)
	go func() { r.served <- r.srv.Serve(l) }()
	return r, nil
}

// begin measures the router's idle CPU over idleWindow, then marks the
// start of the workload: CPU is counted from here.
func (r *routed) begin(ctx context.Context) error {
	before, err := ProcessCPU(r.pid)
	if err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleWindow):
	}
	cpu, err := ProcessCPU(r.pid)
	if err != nil {
		return err
	}
	r.idle = (cpu - before).Seconds() / time.Since(start).Seconds()
	r.cpu0, r.began = cpu, time.Now()
	return nil
}

// stats is what the picker cost and how fast it decided since begin,
// over requests sent.
func (r *routed) stats(requests int) (*RouterStats, error) {
	cpu, err := ProcessCPU(r.pid)
	if err != nil {
		return nil, err
	}
	rss, err := PeakRSS(r.pid)
	if err != nil {
		return nil, err
	}
	seen := r.front.Seen()
	out := &RouterStats{Process: r.process, CPUSeconds: (cpu - r.cpu0).Seconds(), PeakRSS: rss, Immediate: seen.Immediate, UpstreamErrors: seen.UpstreamErrors}
	out.IdleCores = r.idle
	if requests > 0 {
		out.CPUPerRequest = out.CPUSeconds / float64(requests)
		out.BusyPerRequest = max(0, out.CPUSeconds-r.idle*time.Since(r.began).Seconds()) / float64(requests)
	}
	d := make([]float64, len(seen.Decisions))
	for i, v := range seen.Decisions {
		d[i] = v.Seconds()
	}
	slices.Sort(d)
	out.DecisionP50, out.DecisionP90, out.DecisionP99 = runner.Quantile(d, 0.5), runner.Quantile(d, 0.9), runner.Quantile(d, 0.99)
	return out, nil
}

// stop stops the front and the EPP it started.
func (r *routed) stop() error {
	var errs []error
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, r.srv.Shutdown(ctx))
		cancel()
		if err := <-r.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		r.front.Close()
	}
	if r.conn != nil {
		errs = append(errs, r.conn.Close())
	}
	if r.epp != nil && r.epp.Process != nil {
		_ = r.epp.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-r.eppDone:
			_ = err // a peer's exit status on SIGTERM is its own
		case <-time.After(eppStopTimeout):
			_ = r.epp.Process.Kill()
			err := <-r.eppDone
			errs = append(errs, fmt.Errorf("router: the EPP did not stop within %v of SIGTERM (then killed: %w)", eppStopTimeout, err))
		}
	}
	return errors.Join(errs...)
}

// startEPP starts the llm-d router's EPP on the stack's pods and waits
// until it serves; it returns its ext_proc address.
func (r *routed) startEPP(ctx context.Context, dir string, spec *Spec, st *stack, log io.Writer) (string, error) {
	endpoints := filepath.Join(dir, "epp-endpoints.yaml")
	if err := os.WriteFile(endpoints, eppEndpoints(st), 0o644); err != nil {
		return "", fmt.Errorf("router: %w", err)
	}
	cfg, err := PeerConfig(spec.Stack.Config, endpoints)
	if err != nil {
		return "", fmt.Errorf("router: %w", err)
	}
	cfgFile := filepath.Join(dir, "epp-config.yaml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		return "", fmt.Errorf("router: %w", err)
	}
	ports, err := freePortRuns([]int{3})
	if err != nil {
		return "", fmt.Errorf("router: %w", err)
	}
	grpcPort, healthPort, metricsPort := ports[0], ports[0]+1, ports[0]+2
	cmd := exec.Command(spec.Router.EPP, "--pool-name", "bench", "--pool-namespace", "bench", "--config-file", cfgFile,
		"--grpc-port", strconv.Itoa(grpcPort), "--grpc-health-port", strconv.Itoa(healthPort), "--metrics-port", strconv.Itoa(metricsPort),
		"--secure-serving=false", "--metrics-endpoint-auth=false", "--tracing=false", "--enable-pprof=false", "--v=1")
	logFile, err := os.Create(filepath.Join(dir, "epp.log"))
	if err != nil {
		return "", fmt.Errorf("router: %w", err)
	}
	var out io.Writer = logFile
	if log != nil {
		out = io.MultiWriter(logFile, log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if n := spec.Stack.GoMaxProcs; n > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(n))
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return "", fmt.Errorf("router: start the EPP %s: %w", spec.Router.EPP, err)
	}
	r.epp, r.eppDone, r.process, r.pid = cmd, make(chan error, 1), filepath.Base(spec.Router.EPP), cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		r.eppDone <- err
	}()
	if err := r.waitServing(ctx, fmt.Sprintf("127.0.0.1:%d", healthPort), filepath.Join(dir, "epp.log")); err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", grpcPort), nil
}

// waitServing waits for the EPP's gRPC health to say SERVING.
func (r *routed) waitServing(ctx context.Context, health, logPath string) error {
	conn, err := grpc.NewClient(health, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	defer func() { _ = conn.Close() }()
	client := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(eppStartTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		res, err := client.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case werr := <-r.eppDone:
			r.eppDone <- werr
			tail, _ := os.ReadFile(logPath)
			return fmt.Errorf("router: the EPP exited while starting (%w):\n%s", werr, lastLines(string(tail), 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tail, _ := os.ReadFile(logPath)
			return fmt.Errorf("router: the EPP did not serve within %v (last health check: %w):\n%s", eppStartTimeout, err, lastLines(string(tail), 30))
		}
	}
}

// eppEndpoints is the file-discovery endpoints file of the stack's pods.
func eppEndpoints(st *stack) []byte {
	type endpoint struct {
		Name    string `yaml:"name"`
		Address string `yaml:"address"`
		Port    string `yaml:"port"`
	}
	var eps []endpoint
	for _, p := range st.state.Pods {
		host, port, err := net.SplitHostPort(p.Address)
		if err != nil {
			continue // the devstack writes host:port
		}
		eps = append(eps, endpoint{Name: p.Name, Address: host, Port: port})
	}
	b, _ := yaml.Marshal(map[string]any{"endpoints": eps})
	return b
}

// PeerConfig is an EndpointPickerConfig as the llm-d router's EPP runs it
// without Kubernetes: the same plugins and profiles, and a file-discovery
// plugin reading endpoints (dataLayer.discovery). A config that names its
// own discovery is refused: the bench owns the fleet.
func PeerConfig(config, endpoints string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		return nil, fmt.Errorf("peer config: %w", err)
	}
	if doc == nil {
		return nil, errors.New("peer config: empty")
	}
	plugins, _ := doc["plugins"].([]any)
	doc["plugins"] = append(plugins, map[string]any{"name": "bench-endpoints", "type": "file-discovery",
		"parameters": map[string]any{"path": endpoints, "watchFile": false}})
	dl, _ := doc["dataLayer"].(map[string]any)
	if dl == nil {
		dl = map[string]any{}
	}
	if _, ok := dl["discovery"]; ok {
		return nil, errors.New("peer config: dataLayer.discovery is set; the bench discovers the fleet itself")
	}
	dl["discovery"] = map[string]any{"pluginRef": "bench-endpoints"}
	doc["dataLayer"] = dl
	return yaml.Marshal(doc)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
