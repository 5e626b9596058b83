// Package stack runs Hermod's embedded default on one machine: an embedded
// NATS server (JetStream) and etcd server (or clusters of them on
// loopback, clusters.go), a fleet of vllm-sim pods, the
// collector, the picker replicas and the gateway as child processes with
// prefixed logs, and the pool's EndpointPickerConfig in etcd.
package stack

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/plugins/standard" // validate configs with every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/testkit/etcdembed"
	"github.com/hermod/hermod/testkit/natsembed"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// DefaultConfig is the pool's EndpointPickerConfig unless --config names
// another: reference/000's load-aware scorer set.
//
//go:embed default.yaml
var DefaultConfig []byte

// Options configure the stack.
type Options struct {
	Pool      string
	Model     string
	Pods      int     // vllm-sim pods, one process each
	SlowPods  int     // how many of them run at SlowSpeed
	SlowSpeed float64 // pod speed factor of the slow pods
	// PodSpeeds, when set, is every pod's speed factor (one per pod): it
	// replaces SlowPods and SlowSpeed.
	PodSpeeds []float64
	Speed     float64 // simulated time factor of every pod
	Pickers   int     // picker replicas
	// Gateways is how many gateway replicas run (the first on Listen).
	Gateways int
	// PairGateways gives gateway i picker i (modulo the pickers) alone,
	// instead of every picker: one picker per gateway, as a proxy with
	// its own balancer.
	PairGateways bool
	// Valkey runs a redis-server for the pool's global in-flight counts
	// and hands it to the pickers (--inflight-valkey-address).
	Valkey bool
	// PickerArgs, GatewayArgs, IndexerArgs and CollectorArgs are more
	// arguments of every hermod-picker (e.g. --local-view), every
	// hermod-gateway (e.g. --flow-control FILE), hermod-indexer and
	// hermod-collector (e.g. --endpoints-file FILE).
	PickerArgs, GatewayArgs, IndexerArgs, CollectorArgs []string
	// Variants, when set, replace the fixed fleet of Pods: each variant's
	// pods follow the autoscaler's replica target (the local actuator),
	// hermod-autoscaler runs, and the gateways hold requests while the
	// pool is empty (scale from zero).
	Variants []Variant
	// AutoscalerArgs are more hermod-autoscaler arguments.
	AutoscalerArgs []string
	// NoRestart are children, by name (picker-1, vllm-sim-0) or role
	// (pod, indexer), that stay down once they exit after having been
	// ready; every other child is restarted (supervise.go).
	NoRestart []string
	// ResponsesArgs are more hermod-responses arguments.
	ResponsesArgs []string
	// ControlListen, when set, serves the control endpoint there (a
	// loopback host:port, control.go): tests stop and start the embedded
	// NATS servers and etcd members through it. The state file has its
	// address.
	ControlListen string

	Listen        string // the gateway's OpenAI API
	SimBasePort   int    // pod i listens on SimBasePort+i
	KVBasePort    int    // pod i publishes KV events on KVBasePort+2i (replay +1)
	NATSURL       string // external NATS; empty embeds one on NATSPort
	NATSPort      int
	EtcdEndpoints []string // external etcd; empty embeds one on EtcdPort
	EtcdPort      int
	// NATSCluster and EtcdCluster are the sizes of the embedded NATS and
	// etcd (0 or 1: one server, as before; 3: a cluster on loopback, see
	// clusters.go). NATS server i listens on NATSPort+i and etcd member i
	// on EtcdPort+i (peer port EtcdPort+1000+i).
	NATSCluster, EtcdCluster int
	ConfigFile               string // EndpointPickerConfig; empty = DefaultConfig
	BinDir                   string // where the binaries are
	DataDir                  string // NATS and etcd data; empty = a temporary directory
	StateFile                string // where to write the running stack's addresses (JSON); empty = none
	Verbosity                int
	SimArgs                  []string // more vllm-sim arguments
	// DCGMPort, when set, gives each pod a node of its own on loopback
	// (127.0.1.<i+1>) with a DCGM exporter page at this port, as a DCGM
	// exporter DaemonSet on each node of a cluster.
	DCGMPort int
	// OTLPEndpoint, when set, is handed to every Hermod service
	// (--otlp-endpoint): each exports its spans there (host:port of an
	// OTLP/gRPC collector). The children inherit devstack's environment
	// (but for HERMOD_*), so OTEL_BSP_SCHEDULE_DELAY and the like reach
	// their exporters.
	OTLPEndpoint string

	// Etcd and NATS are the TLS and credentials of an external etcd and
	// NATS; the children get them too (secrets by their variables).
	Etcd bootstrap.EtcdSecurity
	NATS bootstrap.NATSSecurity
	// TLS runs the embedded etcd and NATS and every gRPC hop with
	// certificates and credentials generated into <data dir>/tls: etcd with
	// client certificates and RBAC (a hermod user on /hermod/), NATS with
	// client certificates and a hermod user, gRPC with mutual TLS under the
	// default authorisation policy.
	TLS bool
	// APITLS (with TLS) serves the OpenAI API over HTTPS: every gateway
	// with its certificate, the background runs trusting the stack's CA,
	// the state file's GatewayScheme https.
	APITLS bool

	// Out receives the children's prefixed logs and the banner.
	Out    io.Writer
	Logger *slog.Logger
}

// Binaries the stack runs.
var binaries = []string{"vllm-sim", "hermod-collector", "hermod-indexer", "hermod-picker", "hermod-gateway", "hermod-responses", "hermod-autoscaler"}

// Run runs the stack until ctx ends or a child cannot start. A child that
// exits is restarted (supervise.go), and the state file is rewritten with
// its new process id.
func Run(ctx context.Context, o Options) (err error) {
	if err := o.check(); err != nil {
		return err
	}
	log := o.Logger
	s := &stack{o: o, log: log, out: &lineWriter{out: o.Out}, state: stackstate.State{Pool: o.Pool, Model: o.Model, PIDs: map[string]int{}}}
	s.sup = newSupervisor(log, s.out, defaultRestartPolicy, s.publish)
	defer func() {
		if cerr := s.shutdown(); err == nil {
			err = cerr
		}
	}()
	if err := s.servers(ctx); err != nil {
		return err
	}
	if err := s.startControl(ctx); err != nil {
		return err
	}
	if err := s.pushConfig(ctx); err != nil {
		return err
	}
	if err := s.children(ctx); err != nil {
		return err
	}
	if err := s.startFleet(ctx); err != nil {
		return err
	}
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	if err := s.writeState(); err != nil {
		return err
	}
	s.banner()
	return s.wait(ctx)
}

func (o *Options) check() error {
	if err := coord.ValidatePoolName(o.Pool); err != nil {
		return fmt.Errorf("--pool: %w", err)
	}
	switch {
	case o.Pods < 0:
		return fmt.Errorf("--pods: 0 or more (got %d)", o.Pods)
	case o.SlowPods < 0 || (o.SlowPods > o.Pods && o.Pods > 0):
		return fmt.Errorf("--slow-pods: between 0 and --pods (got %d)", o.SlowPods)
	case o.SlowSpeed <= 0:
		return fmt.Errorf("--slow-speed: must be positive (got %v)", o.SlowSpeed)
	case len(o.PodSpeeds) > 0 && len(o.PodSpeeds) != o.Pods:
		return fmt.Errorf("--pod-speeds: %d speeds for %d pods", len(o.PodSpeeds), o.Pods)
	case o.Pickers < 1:
		return fmt.Errorf("--pickers: at least 1 (got %d)", o.Pickers)
	}
	if err := o.checkClusters(); err != nil {
		return err
	}
	for i := range o.Pods {
		if err := portFree("127.0.0.1", o.SimBasePort+i, "--sim-base-port"); err != nil {
			return err
		}
		// the pods' KV events bind every interface
		for _, port := range []int{o.KVBasePort + 2*i, o.KVBasePort + 2*i + 1} {
			if err := portFree("", port, "--kv-base-port"); err != nil {
				return err
			}
		}
	}
	if err := addrFree(o.Listen); err != nil {
		return err
	}
	for _, b := range binaries {
		p := filepath.Join(o.BinDir, b)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s not found (%w): build the binaries first (`make build`; `make run` does it)", p, err)
		}
	}
	return nil
}

type stack struct {
	o     Options
	log   *slog.Logger
	out   *lineWriter
	state stackstate.State

	tmpDir string
	tls    *tlsMaterial // --tls
	nats   *natsembed.Server
	etcd   *etcdembed.Server
	// natsCluster and etcdCluster replace nats and etcd with
	// --nats-cluster and --etcd-cluster above 1.
	natsCluster *natsembed.Cluster
	etcdCluster *etcdembed.Cluster
	sup         *supervisor // the child processes
	fleet       *fleet
	// stateMu guards the state file's writes; live is set once the stack
	// is ready (the file's existence says so) and cleared at shutdown.
	stateMu sync.Mutex
	live    bool
	fleetW  *coord.PrefixWatcher
	cli     *clientv3.Client
}

// servers starts (or reaches) NATS and etcd and creates the streams.
func (s *stack) servers(ctx context.Context) error {
	dir := s.o.DataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "hermod-devstack-"); err != nil {
			return err
		}
		s.tmpDir = dir
	}
	dir, err := filepath.Abs(dir) // the state file's paths are absolute
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if s.o.APITLS && !s.o.TLS {
		return errors.New("--api-tls needs --tls (the API's certificate comes from the stack's CA)")
	}
	if s.o.TLS {
		if s.tls, err = generateTLS(filepath.Join(dir, "tls")); err != nil {
			return err
		}
	}
	if s.o.APITLS {
		s.state.GatewayScheme = "https"
	}
	// Free ports asked for (0) are chosen outside the pods' port ranges,
	// which the pods bind later.
	backendPorts, err := s.planAddrs(s.o.natsSize() + 2*s.o.etcdSize())
	if err != nil {
		return err
	}
	if s.o.natsSize() > 1 {
		err = s.startNATSCluster(ctx, dir, backendPorts)
	} else {
		if s.o.NATSPort == 0 {
			s.o.NATSPort = backendPorts.port()
		}
		err = s.startNATS(dir)
	}
	if err != nil {
		return err
	}
	if s.o.etcdSize() > 1 {
		err = s.startEtcdCluster(ctx, dir, backendPorts)
	} else {
		etcdPeerPort := backendPorts.port()
		if s.o.EtcdPort == 0 {
			s.o.EtcdPort = backendPorts.port()
		}
		err = s.startEtcd(ctx, dir, etcdPeerPort)
	}
	if err != nil {
		return err
	}
	nc, err := s.natsSecurity("devstack").Connect(ctx, s.state.NATSURL, "hermod-devstack", bus.WithLogger(s.log))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	limits := bus.DefaultLimits()
	limits.Replicas = s.streamReplicas()
	if err := bus.EnsureStreams(sctx, js, limits); err != nil {
		return fmt.Errorf("create the streams: %w", err)
	}
	return nil
}

// startNATS starts the embedded NATS unless --nats-url names one; under
// --tls it requires TLS with client certificates and the hermod user, and
// its URL is tls://.
func (s *stack) startNATS(dir string) error {
	s.state.NATSURL = s.o.NATSURL
	if s.state.NATSURL != "" {
		return nil
	}
	if err := portFree("127.0.0.1", s.o.NATSPort, "--nats-port"); err != nil {
		return err
	}
	o := natsembed.Options{Name: "hermod-devstack", Port: s.o.NATSPort, JetStream: true, StoreDir: filepath.Join(dir, "nats")}
	if s.tls != nil {
		cfg, err := s.tls.natsServerTLS()
		if err != nil {
			return err
		}
		o.TLS, o.Users = cfg, s.tls.natsUsers()
	}
	srv, err := natsembed.Start(o)
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	s.nats = srv
	s.state.NATSURL = srv.ClientURL()
	if s.tls != nil {
		s.state.NATSURL = "tls://" + strings.TrimPrefix(s.state.NATSURL, "nats://")
	}
	return nil
}

// startEtcd starts the embedded etcd unless --etcd-endpoints names one;
// under --tls it serves https with client certificates required and
// RBAC on.
func (s *stack) startEtcd(ctx context.Context, dir string, peerPort int) error {
	s.state.EtcdEndpoints = s.o.EtcdEndpoints
	if len(s.state.EtcdEndpoints) > 0 {
		return nil
	}
	if err := portFree("127.0.0.1", s.o.EtcdPort, "--etcd-port"); err != nil {
		return err
	}
	o := etcdembed.Options{Name: "hermod-devstack", Dir: filepath.Join(dir, "etcd"), ClientPort: s.o.EtcdPort, PeerPort: peerPort}
	if s.tls != nil {
		o.ClientTLS = s.tls.etcdServerTLS()
	}
	srv, err := etcdembed.Start(ctx, o)
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	s.etcd = srv
	s.state.EtcdEndpoints = srv.ClientURLs()
	return s.setupEtcdAuth(ctx)
}

// setupEtcdAuth turns on the embedded etcd's RBAC under --tls (through
// every member's URL).
func (s *stack) setupEtcdAuth(ctx context.Context) error {
	if s.tls == nil {
		return nil
	}
	return s.tls.setupEtcdAuth(ctx, s.state.EtcdEndpoints)
}

// pushConfig validates the pool's config and writes it to etcd.
func (s *stack) pushConfig(ctx context.Context) error {
	data, source := DefaultConfig, "the default (reference/000's load-aware scorers)"
	if s.o.ConfigFile != "" {
		var err error
		if data, err = os.ReadFile(s.o.ConfigFile); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		source = s.o.ConfigFile
	}
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	sched, err := scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
	if err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	_ = sched.Close()
	cli, err := s.etcdSecurity("devstack").NewClient(ctx, s.state.EtcdEndpoints)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	v, err := coord.PutConfig(ctx, cli, s.o.Pool, data)
	if err != nil {
		return err
	}
	s.log.Info("pool config written to etcd", "pool", s.o.Pool, "source", source, "key", coord.ConfigKey(s.o.Pool), "revision", v.Revision)
	return nil
}

// children starts the pods, the collector, the indexer, the responses
// store, the pickers and the gateways.
func (s *stack) children(ctx context.Context) error {
	etcd := strings.Join(s.state.EtcdEndpoints, ",")
	v := strconv.Itoa(s.o.Verbosity)
	gateways := max(s.o.Gateways, 1)
	// collector, indexer (2), responses (2), pickers (2 each), the
	// gateways after the first, the gateways' ops, the in-flight server
	addrs, err := s.planAddrs(3 + 2 + 2*s.o.Pickers + gateways - 1 + gateways + 1)
	if err != nil {
		return err
	}
	if len(s.o.Variants) == 0 { // else the fleet follows the autoscaler
		if err := s.startPods(etcd, v); err != nil {
			return err
		}
	}
	common := append([]string{"--pool", s.o.Pool, "--etcd-endpoints", etcd, "--nats-url", s.state.NATSURL, "-v", v, "--log-format", "text"}, s.tracingArgs()...)
	common = slices.Clip(common) // each service's append(common, ...) gets its own array
	s.state.Collector = stackstate.Service{Name: "collector", Ops: addrs.next()}
	if _, err := s.launch("collector", stackstate.RoleCollector, map[string]string{"ops": s.state.Collector.Ops}, "hermod-collector", slices.Concat(common, s.serviceArgs("collector", false), s.streamArgs(), []string{"--metrics-listen", s.state.Collector.Ops}, s.o.CollectorArgs)...); err != nil {
		return err
	}
	// Routing goes on without the indexer (precise prefix scoring fails
	// open) while it restarts.
	s.state.Indexer = stackstate.Service{Name: "indexer", GRPC: addrs.next(), Ops: addrs.next()}
	if _, err := s.launch("indexer", stackstate.RoleIndexer, serviceAddrs(s.state.Indexer), "hermod-indexer", slices.Concat(common, s.serviceArgs("indexer", false), s.streamArgs(),
		[]string{"--listen", s.state.Indexer.GRPC, "--metrics-listen", s.state.Indexer.Ops, "--replica", "indexer"}, s.o.IndexerArgs)...); err != nil {
		return err
	}
	// The responses store behind /v1/responses: the pool config's
	// responses-store plugin selects its backend (memory by default). It
	// runs background responses through the first gateway.
	s.state.Responses = stackstate.Service{Name: "responses", GRPC: addrs.next(), Ops: addrs.next()}
	if _, err := s.launch("responses", stackstate.RoleResponses, serviceAddrs(s.state.Responses), "hermod-responses", append([]string{"--pool", s.o.Pool, "--etcd-endpoints", etcd, "-v", v, "--log-format", "text",
		"--listen", s.state.Responses.GRPC, "--metrics-listen", s.state.Responses.Ops, "--replica", "responses", "--gateway-url", s.gatewayURL()}, slices.Concat(s.tracingArgs(), s.apiCAArgs(), s.serviceArgs("responses", true), s.o.ResponsesArgs)...)...); err != nil {
		return err
	}
	pickerExtra, err := s.startValkey(ctx, addrs.next())
	if err != nil {
		return err
	}
	pickerAddrs, err := s.startPickers(common, addrs, append(pickerExtra, s.o.PickerArgs...))
	if err != nil {
		return err
	}
	return s.startGateways(common, addrs, gateways, pickerAddrs)
}

// launch starts a supervised child (from the stack's bin directory when
// binary is a bare name) that listens on addrs by use ("grpc", "ops",
// "http", ...); its readiness probe follows from its role. An error is
// the first start's: the stack stops.
func (s *stack) launch(name, role string, addrs map[string]string, binary string, args ...string) (*child, error) {
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(s.o.BinDir, binary)
	}
	ready, live := probesFor(role, addrs, s.apiProbeClient())
	return s.sup.start(childSpec{name: name, role: role, bin: binary, args: args, ports: portsOf(addrs), probe: ready, live: live,
		noRestart: restartSet(s.o.NoRestart).excludes(name, role)})
}

// gatewayURL is the first gateway's API base URL.
func (s *stack) gatewayURL() string { return s.state.APIScheme() + "://" + s.o.Listen }

// curlCA is curl's option trusting the stack's CA (--api-tls).
func (s *stack) curlCA() string {
	if !s.o.APITLS {
		return ""
	}
	return " --cacert " + s.tls.CAFile
}

// apiCAArgs make a service that calls the API trust the stack's CA
// (--api-tls).
func (s *stack) apiCAArgs() []string {
	if !s.o.APITLS {
		return nil
	}
	return []string{"--gateway-ca-file", s.tls.CAFile}
}

// apiProbeClient probes the API over HTTPS trusting the stack's CA
// (--api-tls; nil otherwise).
func (s *stack) apiProbeClient() *http.Client {
	if !s.o.APITLS {
		return nil
	}
	cfg, err := tlsconfig.ClientFiles{CAFile: s.tls.CAFile}.Config()
	if err != nil {
		return nil
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg}}
}

// startPods starts one vllm-sim process per pod.
// toolCallArgs are the vllm-sim flags of a pod serving agents, as vLLM is
// run for them: tool_choice "auto" (the default whenever a request offers
// tools, as coding agents' requests do) is answered, not refused.
var toolCallArgs = []string{"--enable-auto-tool-choice", "--tool-call-parser", "hermes"}

func (s *stack) startPods(etcd, v string) error {
	for i := range s.o.Pods {
		speed := s.o.podSpeed(i)
		port := s.o.SimBasePort + i
		kv := s.o.KVBasePort + 2*i
		args := []string{"serve", s.o.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--pods", "1",
			"--first-pod-index", strconv.Itoa(i), "--pool", s.o.Pool, "--etcd-endpoints", etcd, "--registration-ttl", "5s",
			"--pod-speed", strconv.FormatFloat(speed, 'g', -1, 64), "--speed", strconv.FormatFloat(s.o.Speed, 'g', -1, 64),
			"--kv-events-config", fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d","topic":"kv@{pod}@{model}"}`, kv, kv+1),
			"-v", v}
		if s.o.DCGMPort > 0 {
			args = append(args, "--node-address", podNodeAddress(i), "--dcgm-port", strconv.Itoa(s.o.DCGMPort))
		}
		args = append(append(args, toolCallArgs...), s.securityArgs("vllm-sim", true)...)
		name := fmt.Sprintf("vllm-sim-%d", i)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c, err := s.launch(name, stackstate.RolePod, podAddrs(addr, kv), "vllm-sim", append(args, s.o.SimArgs...)...)
		if err != nil {
			return err
		}
		s.state.Pods = append(s.state.Pods, stackstate.Pod{Name: name, Address: addr, Speed: speed, PID: c.pid()})
	}
	return nil
}

// podNodeAddress is the loopback address of pod i's node with
// --dcgm-port.
func podNodeAddress(i int) string { return fmt.Sprintf("127.0.1.%d", i%254+1) }

// startValkey starts the in-flight server with --valkey and returns the
// pickers' arguments for it (none without).
func (s *stack) startValkey(ctx context.Context, addr string) ([]string, error) {
	if !s.o.Valkey {
		return nil, nil
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("--valkey needs redis-server (make deps installs it)")
	}
	host, port, _ := net.SplitHostPort(addr)
	c, err := s.launch("valkey", stackstate.RoleValkey, map[string]string{"redis": addr}, redis, "--port", port, "--bind", host, "--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err != nil {
		return nil, err
	}
	s.state.Valkey = addr
	if s.tls != nil {
		s.log.Warn("--tls: the pickers reach valkey in plaintext without a password (the in-flight option takes no TLS files yet)", "valkey", addr)
	}
	if err := s.sup.awaitReady(ctx, 10*time.Second, c); err != nil { // the pickers connect at start
		return nil, fmt.Errorf("valkey: %w", err)
	}
	return []string{"--inflight-valkey-address", "redis://" + addr}, nil
}

// startPickers starts the picker replicas and returns their gRPC
// addresses.
func (s *stack) startPickers(common []string, addrs *addrPlan, extra []string) ([]string, error) {
	var pickerAddrs []string
	for i := range s.o.Pickers {
		svc := stackstate.Service{Name: fmt.Sprintf("picker-%d", i), GRPC: addrs.next(), Ops: addrs.next()}
		// the pods are simulators: blocks are keyed from the built-in tokenizer's ids
		args := slices.Concat(common, s.serviceArgs("picker", false), s.streamArgs(), []string{"--listen", svc.GRPC, "--metrics-listen", svc.Ops, "--replica", svc.Name,
			"--indexer-address", s.state.Indexer.GRPC, "--tokenizer", "builtin"})
		if _, err := s.launch(svc.Name, stackstate.RolePicker, serviceAddrs(svc), "hermod-picker", append(args, extra...)...); err != nil {
			return nil, err
		}
		s.state.Pickers = append(s.state.Pickers, svc)
		pickerAddrs = append(pickerAddrs, svc.GRPC)
	}
	return pickerAddrs, nil
}

// startGateways starts the gateways: the first on --listen, the others on
// planned ports.
func (s *stack) startGateways(common []string, addrs *addrPlan, gateways int, pickerAddrs []string) error {
	s.state.Gateway = s.o.Listen
	flow, err := s.flowControlFile()
	if err != nil {
		return err
	}
	for i := range gateways {
		name, listen, pickers := "gateway", s.o.Listen, pickerAddrs
		if i > 0 {
			name, listen = fmt.Sprintf("gateway-%d", i), addrs.next()
		}
		if s.o.PairGateways && len(pickerAddrs) > 0 {
			pickers = pickerAddrs[i%len(pickerAddrs) : i%len(pickerAddrs)+1]
		}
		ops := addrs.next() // /metrics is not on the API address
		gwArgs := append(slices.Concat(common, s.serviceArgs("gateway", false)), "--listen", listen, "--metrics-listen", ops, "--picker-addrs", strings.Join(pickers, ","), "--replica", name, "--responses-address", s.state.Responses.GRPC)
		if flow != "" {
			gwArgs = append(gwArgs, "--flow-control", flow)
		}
		if s.o.APITLS {
			gw := s.tls.Identities["gateway"]
			gwArgs = append(gwArgs, "--api-tls-cert-file", gw.Cert, "--api-tls-key-file", gw.Key)
		}
		gwArgs = append(gwArgs, s.o.GatewayArgs...)
		if _, err := s.launch(name, stackstate.RoleGateway, map[string]string{"http": listen, "ops": ops}, "hermod-gateway", gwArgs...); err != nil {
			return err
		}
		s.state.Gateways = append(s.state.Gateways, listen)
		s.state.GatewayOps = append(s.state.GatewayOps, ops)
	}
	return nil
}

// tracingArgs are the arguments that make a Hermod service export its
// spans (none without --otlp-endpoint).
func (s *stack) tracingArgs() []string {
	if s.o.OTLPEndpoint == "" {
		return nil
	}
	return []string{"--otlp-endpoint", s.o.OTLPEndpoint}
}

// waitReady waits until every child has passed its readiness probe
// (a child that exits meanwhile is restarted, up to the restart policy's
// start attempts).
func (s *stack) waitReady(ctx context.Context) error {
	s.sup.mu.Lock()
	children := slices.Clone(s.sup.children)
	s.sup.mu.Unlock()
	return s.sup.awaitReady(ctx, 60*time.Second, children...)
}

// writeState writes the state file once the stack is ready; from then on
// every change of a child rewrites it (publish).
func (s *stack) writeState() error {
	s.stateSecurity()
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.live = true
	if s.o.StateFile == "" {
		return nil
	}
	if err := s.writeStateLocked(); err != nil {
		return fmt.Errorf("--state-file: %w", err)
	}
	return nil
}

// publish rewrites the state file after a child started, became ready or
// exited (nothing before the stack is ready, or once it stops).
func (s *stack) publish() {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if !s.live || s.o.StateFile == "" {
		return
	}
	if err := s.writeStateLocked(); err != nil {
		s.log.Warn("rewriting the state file failed", "state_file", s.o.StateFile, "error", err)
	}
}

// writeStateLocked writes the state with the children's current process
// ids, atomically; stateMu is held.
func (s *stack) writeStateLocked() error {
	st := s.state // the children's part is rebuilt on each write
	st.Children = s.sup.snapshot()
	st.PIDs = map[string]int{}
	for _, c := range st.Children {
		if c.PID > 0 {
			st.PIDs[c.Name] = c.PID
		}
	}
	st.Pods = slices.Clone(s.state.Pods)
	for i := range st.Pods {
		st.Pods[i].PID = st.PIDs[st.Pods[i].Name]
	}
	return st.Write(s.o.StateFile)
}

// podSpeed is pod i's speed factor.
func (o *Options) podSpeed(i int) float64 {
	switch {
	case len(o.PodSpeeds) > 0:
		return o.PodSpeeds[i]
	case i >= o.Pods-o.SlowPods:
		return o.SlowSpeed
	}
	return 1
}

// ParsePodSpeeds parses --pod-speeds: positive numbers, one per pod.
func ParsePodSpeeds(list []string) ([]float64, error) {
	out := make([]float64, len(list))
	for i, s := range list {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("--pod-speeds: %q is not a positive number", s)
		}
		out[i] = v
	}
	return out, nil
}

func (s *stack) banner() {
	slow := ""
	switch {
	case len(s.o.PodSpeeds) > 0:
		slow = fmt.Sprintf(", at speeds %s", strings.Trim(fmt.Sprint(s.o.PodSpeeds), "[]"))
	case s.o.Pods == 0:
		slow = " (none started: register model servers with hermodctl endpoints register NAME HOST:PORT --model M)"
	case s.o.SlowPods > 0:
		slow = fmt.Sprintf(", %d of them at %gx speed", s.o.SlowPods, s.o.SlowSpeed)
	}
	ctl := filepath.Join(s.o.BinDir, "hermodctl")
	if rel, err := filepath.Rel(mustGetwd(), ctl); err == nil && !strings.HasPrefix(rel, "..") {
		ctl = rel
	}
	flags := s.ctlFlags()
	body := fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "Hello! What is Hermod?"}]}`, s.o.Model)
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	fmt.Fprintf(s.out.out, `
Hermod is running: pool %q, %d vllm-sim pods serving %s%s, %d picker(s), a collector, a KV-event indexer and a gateway.

  OpenAI API   %s/v1   (models: %s/v1/models)
  metrics      http://%s/metrics (gateway), http://%s/metrics (picker-0), http://%s/metrics (collector), http://%s/metrics (indexer)
  NATS         %s%s
  etcd         %s%s
%s
Try it:

  curl -s%s %s/v1/chat/completions -H 'Content-Type: application/json' \
    -d '%s'

  %s%s audit tail      # every routing decision as it is taken
  %s%s endpoints list  # the pods, their load and models
  %s%s config get      # the pool's EndpointPickerConfig (config set FILE to change it live)

Ctrl-C stops everything.

`, s.o.Pool, s.o.Pods, s.o.Model, slow, s.o.Pickers,
		s.gatewayURL(), s.gatewayURL(), s.state.GatewayOps[0], s.state.Pickers[0].Ops, s.state.Collector.Ops, s.state.Indexer.Ops,
		s.state.NATSURL, s.natsBanner(), strings.Join(s.state.EtcdEndpoints, ","), s.etcdBanner(), s.tlsBanner(),
		s.curlCA(), s.gatewayURL(), body, ctl, flags, ctl, flags, ctl, flags)
}

// ctlFlags are hermodctl's global flags reaching this stack, before the
// command (each command takes the ones it uses): the state file, which
// holds the addresses and under --tls the security settings, or else
// the addresses and the security flags themselves.
func (s *stack) ctlFlags() string {
	if s.o.StateFile != "" {
		return " --state-file " + s.o.StateFile
	}
	flags := ""
	if s.tls != nil || s.o.NATSPort != 4222 || s.o.EtcdPort != 2379 || s.o.NATSURL != "" || len(s.o.EtcdEndpoints) > 0 || s.o.natsSize() > 1 || s.o.etcdSize() > 1 {
		flags = fmt.Sprintf(" --nats-url %s --etcd-endpoints %s", s.state.NATSURL, strings.Join(s.state.EtcdEndpoints, ","))
	}
	if s.tls != nil {
		flags += " " + strings.Join(s.securityArgs("hermodctl", false), " ")
	}
	if s.o.Pool != "default" {
		flags += " --pool " + s.o.Pool
	}
	return flags
}

// tlsBanner is the banner's TLS line ("" without --tls).
func (s *stack) tlsBanner() string {
	if s.tls == nil {
		return ""
	}
	line := fmt.Sprintf("  TLS          on: mutual TLS on gRPC, etcd (users, RBAC) and NATS (user); CA %s, certificates and passwords in %s\n", s.tls.CAFile, s.tls.Dir)
	line += "               (plaintext still: the OpenAI API, the ops ports, KV events over ZeroMQ, OTLP"
	if s.o.Valkey {
		line += ", valkey: the pickers' in-flight option takes no TLS files yet"
	}
	return line + ")\n"
}

// wait runs until ctx ends or a child cannot start (an autoscaled
// pod's first start); children that exit are restarted meanwhile.
func (s *stack) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.log.Info("stopping")
		return nil
	case <-s.sup.failed:
		return s.sup.err()
	}
}

// shutdown stops the children (gateway first, pods last), then the
// servers, and removes temporary data.
func (s *stack) shutdown() error {
	var errs []error
	ctx := context.Background()
	s.stateMu.Lock()
	s.live = false // no rewrite of the state file from here
	s.stateMu.Unlock()
	if s.fleetW != nil {
		s.fleetW.Close()
	}
	if s.fleet != nil {
		errs = append(errs, s.fleet.stopAll(ctx)...)
	}
	if s.cli != nil {
		_ = s.cli.Close()
	}
	if s.sup != nil {
		errs = append(errs, s.sup.stopAll(ctx)...)
	}
	if s.etcd != nil {
		if err := s.etcd.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.etcdCluster != nil {
		if err := s.etcdCluster.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.nats != nil {
		s.nats.Shutdown()
	}
	if s.natsCluster != nil {
		s.natsCluster.Shutdown()
	}
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
	if s.o.StateFile != "" {
		_ = os.Remove(s.o.StateFile)
	}
	return errors.Join(errs...)
}

// portFree fails with a hint when a fixed port is taken.
func portFree(host string, port int, flagName string) error {
	if port == 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d is in use (another devstack?): stop it, or pass %s with another port", port, flagName)
	}
	return l.Close()
}

// addrFree fails with a hint when the gateway's address is taken.
func addrFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w (another devstack?)", addr, err)
	}
	return l.Close()
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
// addrPlan hands out the services' addresses. They are all chosen before
// any child starts, each held open until every one is chosen (so no two
// are the same), and none in the pods' HTTP and KV-event port ranges,
// which the pods bind only once they run.
type addrPlan struct {
	addrs []string
}

func (s *stack) planAddrs(n int) (*addrPlan, error) {
	reserved := func(port int) bool {
		return (port >= s.o.SimBasePort && port < s.o.SimBasePort+s.o.Pods) ||
			(port >= s.o.KVBasePort && port < s.o.KVBasePort+2*s.o.Pods)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	p := &addrPlan{}
	for attempts := 0; len(p.addrs) < n; attempts++ {
		if attempts > 100*n {
			return nil, fmt.Errorf("no %d free ports outside the pods' ranges", n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing service ports: %w", err)
		}
		held = append(held, l)
		if reserved(l.Addr().(*net.TCPAddr).Port) {
			continue
		}
		p.addrs = append(p.addrs, l.Addr().String())
	}
	return p, nil
}

// next returns the next planned address.
func (p *addrPlan) next() string {
	a := p.addrs[0]
	p.addrs = p.addrs[1:]
	return a
}

// port returns the next planned address's port.
func (p *addrPlan) port() int {
	_, port, _ := net.SplitHostPort(p.next())
	n, _ := strconv.Atoi(port)
	return n
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}
