// Command hermod-devstack runs Hermod on one machine (`make run`): embedded
// NATS and etcd, a vllm-sim fleet, the collector, the picker(s) and the
// gateway, until Ctrl-C. Children that exit are restarted with backoff.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/tools/devstack/internal/stack"
)

func main() { cmdline.Main("hermod-devstack", run) }

func run() error {
	fs := flag.NewFlagSet("hermod-devstack", flag.ContinueOnError)
	var (
		o       stack.Options
		common  cmdline.Common
		etcd    cmdline.List
		simArgs cmdline.List
	)
	fs.StringVar(&o.Pool, "pool", "default", "the inference pool")
	fs.StringVar(&o.Model, "model", "meta-llama/Llama-3.1-8B-Instruct", "the model the pods serve")
	fs.IntVar(&o.Pods, "pods", 4, "vllm-sim pods (one process each); 0: none, for model servers registered with hermodctl endpoints register")
	fs.IntVar(&o.SlowPods, "slow-pods", 1, "how many of the pods are slower")
	fs.Float64Var(&o.SlowSpeed, "slow-speed", 0.5, "speed factor of the slower pods")
	var podSpeeds cmdline.List
	fs.Var(&podSpeeds, "pod-speeds", "one speed factor per pod, comma-separated (e.g. 1,1,0.5,2): sets --pods and replaces --slow-pods and --slow-speed")
	fs.Float64Var(&o.Speed, "speed", 1, "simulated time runs this many times faster than real time")
	fs.IntVar(&o.Pickers, "pickers", 1, "picker replicas")
	fs.IntVar(&o.Gateways, "gateways", 1, "gateway replicas (the first on --listen, the others on free ports; the state file lists them)")
	fs.BoolVar(&o.PairGateways, "pair-gateways", false, "give gateway i picker i alone (modulo --pickers) instead of every picker")
	fs.BoolVar(&o.Valkey, "valkey", false, "run a redis-server for the pool's global in-flight counts (valkey-least-request-picker) and hand it to the pickers")
	var pickerArgs, gatewayArgs, indexerArgs, collectorArgs cmdline.List
	fs.Var(&pickerArgs, "picker-args", "more hermod-picker arguments, comma-separated (e.g. --picker-args=--local-view)")
	fs.Var(&gatewayArgs, "gateway-args", "more hermod-gateway arguments, comma-separated (e.g. --gateway-args=--flow-control,flow.yaml)")
	fs.Var(&indexerArgs, "indexer-args", "more hermod-indexer arguments, comma-separated (e.g. --indexer-args=--block-size,64)")
	fs.Var(&collectorArgs, "collector-args", "more hermod-collector arguments, comma-separated (e.g. --collector-args=--endpoints-file,endpoints.yaml with --pods 0)")
	var variants, autoscalerArgs cmdline.List
	fs.Var(&variants, "variants", "autoscale the fleet: variants name:cost:min:max:initial[:speed], comma-separated; their pods follow hermod-autoscaler (local actuator) instead of --pods")
	fs.Var(&autoscalerArgs, "autoscaler-args", "more hermod-autoscaler arguments, comma-separated")
	var responsesArgs cmdline.List
	fs.Var(&responsesArgs, "responses-args", "more hermod-responses arguments, comma-separated")
	fs.StringVar(&o.ControlListen, "control-listen", "", "serve the control endpoint on this loopback host:port (127.0.0.1:0: a free port; the state file has it): tests stop, kill and start the embedded NATS servers and etcd members through it")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the gateway's OpenAI API")
	fs.IntVar(&o.SimBasePort, "sim-base-port", 8000, "pod i serves HTTP on this port + i")
	fs.IntVar(&o.KVBasePort, "kv-base-port", 5557, "pod i publishes KV events on this port + 2i (replay + 2i + 1)")
	fs.StringVar(&o.NATSURL, "nats-url", "", "use this NATS server instead of an embedded one")
	fs.IntVar(&o.NATSPort, "nats-port", 4222, "port of the embedded NATS server (0: a free one); server i of a --nats-cluster listens on this port + i")
	fs.IntVar(&o.NATSCluster, "nats-cluster", 1, "embedded NATS servers: 1, or a JetStream cluster on loopback (3: the streams get 3 replicas and the services --stream-replicas 3); stores under <data-dir>/nats-cluster-N")
	fs.Var(&etcd, "etcd-endpoints", "use this etcd instead of an embedded one (comma-separated endpoints)")
	o.Etcd.RegisterFlags(fs) // TLS and credentials of an external etcd and NATS
	o.NATS.RegisterFlags(fs)
	fs.BoolVar(&o.APITLS, "api-tls", false, "the gateways serve the OpenAI API over HTTPS (HTTP/2 and HTTP/1.1) with their certificate from the stack's CA (the state file's tls.ca_file; background runs trust it); on by default with --tls, --api-tls=false keeps the API plaintext")
	fs.BoolVar(&o.TLS, "tls", false, "secure every hop the stack owns with generated material (<data-dir>/tls): mutual TLS on gRPC (default policy), embedded etcd with client certificates and RBAC, embedded NATS with client certificates and a user; the state file's security section reaches it (hermodctl --state-file)")
	fs.IntVar(&o.EtcdPort, "etcd-port", 2379, "client port of the embedded etcd (0: a free one); member i of an --etcd-cluster listens on this port + i, its peer port is this port + 1000 + i")
	fs.IntVar(&o.EtcdCluster, "etcd-cluster", 1, "embedded etcd members: 1, or a cluster on loopback (3 serves through the loss of one); data under <data-dir>/etcd-cluster-N, whose peer-ports.json a reused --data-dir starts the members on again")
	fs.StringVar(&o.ConfigFile, "config", "", "EndpointPickerConfig for the pool (default: reference/000's load-aware scorers)")
	fs.StringVar(&o.BinDir, "bin-dir", "", "directory of the Hermod binaries (default: this binary's)")
	fs.StringVar(&o.DataDir, "data-dir", "", "keep NATS and etcd data here (default: a temporary directory, removed at exit)")
	fs.StringVar(&o.StateFile, "state-file", "", "write the running stack's addresses and process ids here (JSON) once it is ready, and again whenever a child restarts")
	var noRestart cmdline.List
	fs.Var(&noRestart, "no-restart", "children left down once they exit, by name (picker-1, vllm-sim-0) or role (pod, picker, gateway, indexer, ...), comma-separated; every other child is restarted with backoff (0.2s doubling to 10s), on the same ports")
	fs.IntVar(&o.DCGMPort, "dcgm-port", 0, "give each pod a node of its own on loopback (127.0.1.<i+1>) serving a DCGM exporter DaemonSet's page at this port, for dcgm-data-source with useNodeAddress (0: none)")
	fs.Var(&simArgs, "sim-args", "more vllm-sim arguments, comma-separated (e.g. --sim-args=--max-num-seqs,64)")
	common.Register(fs)
	if err := cmdline.Parse(fs, os.Args[1:]); err != nil {
		return err
	}
	if !flagSet(fs, "api-tls") {
		o.APITLS = o.TLS // --tls secures the API too, unless told otherwise
	}
	o.EtcdEndpoints, o.SimArgs, o.PickerArgs, o.Verbosity = etcd, simArgs, pickerArgs, common.Verbosity
	o.GatewayArgs, o.IndexerArgs, o.CollectorArgs = gatewayArgs, indexerArgs, collectorArgs
	o.NoRestart = noRestart
	if len(podSpeeds) > 0 {
		speeds, err := stack.ParsePodSpeeds(podSpeeds)
		if err != nil {
			return err
		}
		o.PodSpeeds, o.Pods, o.SlowPods = speeds, len(speeds), 0
	}
	o.OTLPEndpoint = common.OTLPEndpoint // every service exports its spans there
	vs, err := stack.ParseVariants(variants)
	if err != nil {
		return err
	}
	o.Variants, o.AutoscalerArgs, o.ResponsesArgs = vs, autoscalerArgs, responsesArgs
	if o.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--bin-dir: %w", err)
		}
		o.BinDir = filepath.Dir(exe)
	}
	common.LogFormat = "text"
	log, err := common.Logger(os.Stderr)
	if err != nil {
		return err
	}
	o.Out, o.Logger = os.Stdout, log.With("component", "devstack")
	ctx, stop := cmdline.SignalContext(context.Background())
	defer stop()
	return stack.Run(ctx, o)
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
