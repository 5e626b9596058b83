// Package fleet runs several simulated pods in one process, on consecutive
// HTTP and ZeroMQ ports and one simulated clock, and optionally registers
// each in etcd (the endpoint record of Hermod's registry, on a lease).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/tools/vllm-sim/internal/cli"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
	"github.com/hermod/hermod/tools/vllm-sim/internal/server"
)

// Fleet is a set of pods sharing a process and a clock.
type Fleet struct {
	opts  *cli.Options
	clock *engine.WallClock
	pods  []*server.Pod
	log   *slog.Logger

	etcd *clientv3.Client
	mu   sync.Mutex
	regs map[int]*coord.Registration
	ctx  context.Context // of Run; registrations end with it
}

func (f *Fleet) runContext() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil {
		return context.Background()
	}
	return f.ctx
}

// New builds the pods of o.
func New(o *cli.Options, log *slog.Logger) (*Fleet, error) {
	f := &Fleet{opts: o, clock: engine.NewWallClock(o.Speed), log: log, regs: map[int]*coord.Registration{}}
	var cfgs []server.Config
	for i := range o.Pods {
		cfg, err := f.podConfig(i)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cfg)
	}
	if err := checkPorts(cfgs); err != nil {
		return nil, err
	}
	for _, cfg := range cfgs {
		p, err := server.New(cfg, f.clock)
		if err != nil {
			f.closePods()
			return nil, err
		}
		f.pods = append(f.pods, p)
	}
	return f, nil
}

// Pods returns the pods.
func (f *Fleet) Pods() []*server.Pod { return f.pods }

func (f *Fleet) podConfig(i int) (server.Config, error) {
	o := f.opts
	name := fmt.Sprintf("%s-%d", o.PodName, o.FirstPodIndex+i)
	ec := o.Engine
	ec.PodSpeed = 1
	switch len(o.PodSpeeds) {
	case 0:
	case 1:
		ec.PodSpeed = o.PodSpeeds[0]
	default:
		ec.PodSpeed = o.PodSpeeds[i]
	}
	port := 0
	if o.Port != 0 {
		port = o.Port + i
	}
	kc := o.KVEvents
	if kc.Enabled {
		var err error
		if kc.Endpoint, err = offsetEndpoint(kc.Endpoint, i); err != nil {
			return server.Config{}, fmt.Errorf("--kv-events-config endpoint: %w", err)
		}
		if kc.ReplayEndpoint != "" {
			if kc.ReplayEndpoint, err = offsetEndpoint(kc.ReplayEndpoint, i); err != nil {
				return server.Config{}, fmt.Errorf("--kv-events-config replay_endpoint: %w", err)
			}
		}
		kc.Topic = strings.NewReplacer("{pod}", name, "{model}", o.ServedNames[0], "{index}", strconv.Itoa(i)).Replace(kc.Topic)
	}
	cfg := server.Config{
		Name: name, Host: o.Host, Port: port, ModelPath: o.Model, ServedNames: o.ServedNames, Adapters: o.LoRAModules,
		Engine: ec, Speed: o.Speed, Seed: o.Seed + uint64(i), KVEvents: kc, EventEncoding: o.EventEncoding,
		ReplayFraming: o.ReplayFraming, PromptTokensDetails: o.DetailsTokens, LegacyMetrics: o.LegacyMetrics,
		Faults: o.Faults, APIKey: o.APIKey, Runner: o.Runner, EmbeddingDim: o.EmbeddingDim, Logger: f.log,
		AutoToolChoice: o.AutoToolChoice, ToolCallParser: o.ToolCallParser, MaxLogprobs: o.MaxLogprobs,
	}
	if len(o.EtcdEndpoints) > 0 {
		cfg.OnDown = func() { f.deregister(i) }
		cfg.OnUp = func() { f.register(f.runContext(), i) }
	}
	return cfg, nil
}

// checkPorts rejects fleets whose pods' HTTP, event and replay ports
// collide (pod i adds i to each base port).
func checkPorts(cfgs []server.Config) error {
	owner := map[int]string{}
	claim := func(port int, what string) error {
		if port == 0 {
			return nil
		}
		if prev, dup := owner[port]; dup {
			return fmt.Errorf("port %d is both %s and %s: with --pods %d, give the HTTP port, the KV events endpoint and the replay endpoint base ports at least %d apart",
				port, prev, what, len(cfgs), len(cfgs))
		}
		owner[port] = what
		return nil
	}
	for _, c := range cfgs {
		if err := claim(c.Port, c.Name+" HTTP"); err != nil {
			return err
		}
		if !c.KVEvents.Enabled {
			continue
		}
		if err := claim(tcpPort(c.KVEvents.Endpoint), c.Name+" KV events"); err != nil {
			return err
		}
		if err := claim(tcpPort(c.KVEvents.ReplayEndpoint), c.Name+" KV replay"); err != nil {
			return err
		}
	}
	return nil
}

func tcpPort(ep string) int {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return 0
	}
	_, port, err := net.SplitHostPort(rest)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// offsetEndpoint adds i to a tcp:// endpoint's port (vLLM's data-parallel
// rule) and appends "-i" to other transports' addresses.
func offsetEndpoint(ep string, i int) (string, error) {
	if i == 0 {
		return ep, nil
	}
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return ep + "-" + strconv.Itoa(i), nil
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("%q: %w", ep, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("%q: bad port", ep)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(n+i)), nil
}

// Run serves every pod until ctx ends, registering each in etcd once it
// listens (when etcd endpoints are configured) and deregistering on exit.
func (f *Fleet) Run(ctx context.Context) error {
	if len(f.opts.EtcdEndpoints) > 0 {
		cli, err := f.opts.Etcd.NewClient(ctx, f.opts.EtcdEndpoints)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		f.etcd = cli
		defer cli.Close()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if f.opts.DCGMPort > 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(f.nodeAddress(), strconv.Itoa(f.opts.DCGMPort)))
		if err != nil {
			return fmt.Errorf("DCGM exporter page: %w", err)
		}
		f.log.Info("serving a DCGM exporter page", "address", ln.Addr().String())
		wg.Go(func() { f.serveDCGM(ctx, ln) })
	}
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	errs := make(chan error, len(f.pods))
	for i, p := range f.pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
		select {
		case <-p.Ready():
			f.log.Info("pod ready", "pod", p.Config().Name, "address", p.Addr(), "kv_events", p.Config().KVEvents.Endpoint,
				"speed", p.Config().Engine.PodSpeed)
			if f.etcd != nil {
				f.register(ctx, i)
			}
		case <-ctx.Done():
		}
	}
	<-ctx.Done()
	f.mu.Lock()
	regs := maps.Clone(f.regs)
	f.mu.Unlock()
	for i := range regs {
		f.deregister(i)
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func (f *Fleet) record(i int) *registryv1.Endpoint {
	p := f.pods[i]
	cfg := p.Config()
	labels := maps.Clone(f.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, f.opts.PodLabels[i])
	ep := &registryv1.Endpoint{
		Name: cfg.Name, Pool: f.opts.Pool, Address: f.opts.Advertise, NodeAddress: f.nodeAddress(), Port: int32(cfg.Port), Labels: labels,
		Model: cfg.ServedNames[0], ServedModels: append(append([]string{}, cfg.ServedNames...), cfg.Engine.Adapters...),
		KvEventsTopic: cfg.KVEvents.Topic,
	}
	if kc := cfg.KVEvents; kc.Enabled {
		// a pod that binds is dialled by the indexer; one that connects
		// reaches a central indexer, which needs no address from it
		if kvzmq.ShouldBind(kc.Endpoint) {
			ep.KvEventsEndpoint = advertised(kc.Endpoint, f.opts.Advertise)
		}
		if kc.ReplayEndpoint != "" {
			ep.KvReplayEndpoint = advertised(kc.ReplayEndpoint, f.opts.Advertise)
		}
	}
	return ep
}

// nodeAddress is the address of the pods' node.
func (f *Fleet) nodeAddress() string {
	if f.opts.NodeAddress != "" {
		return f.opts.NodeAddress
	}
	return f.opts.Advertise
}

// advertised replaces a wildcard host in a tcp:// endpoint by addr.
func advertised(ep, addr string) string {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return ep
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return ep
	}
	if host == "*" || host == "" || host == "0.0.0.0" || host == "::" {
		host = addr
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

func (f *Fleet) register(ctx context.Context, i int) {
	if ctx.Err() != nil {
		return
	}
	reg, err := coord.Register(ctx, f.etcd, f.record(i), f.opts.RegisterTTL, coord.WithLogger(f.log))
	if err != nil {
		f.log.Error("registering the pod in etcd failed", "pod", f.pods[i].Config().Name, "error", err)
		return
	}
	f.mu.Lock()
	if ctx.Err() != nil { // the fleet stopped while registering
		f.mu.Unlock()
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = reg.Close(closeCtx)
		cancel()
		return
	}
	f.regs[i] = reg
	f.mu.Unlock()
}

func (f *Fleet) deregister(i int) {
	f.mu.Lock()
	reg := f.regs[i]
	delete(f.regs, i)
	f.mu.Unlock()
	if reg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reg.Close(ctx); err != nil {
		f.log.Warn("deregistering the pod failed; its lease will expire", "pod", f.pods[i].Config().Name, "error", err)
	}
}

func (f *Fleet) closePods() {
	for _, p := range f.pods {
		_ = p.Close()
	}
}
