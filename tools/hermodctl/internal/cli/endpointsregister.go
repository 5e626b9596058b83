package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/coord"
)

// endpointsRegister writes an endpoint Hermod did not start into the
// registry: a model server on a VM, bare metal or a Slurm node.
func endpointsRegister(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl endpoints register", stderr, withEtcd)
	fs := c.fs
	var (
		spec            coord.EndpointSpec
		served, labels  cmdline.List
		ttl             time.Duration
		permanent, keep bool
	)
	fs.StringVar(&spec.Model, "model", "", "the base model the server serves (required)")
	fs.Var(&served, "served-models", "every model name it serves, LoRA adapters too (default: the base model; it is added when missing)")
	fs.Var(&labels, "labels", "labels, comma-separated key=value (e.g. mif.moreh.io/role=decode)")
	fs.StringVar(&spec.KVEvents, "kv-events", "", "its ZMQ KV-event endpoint (tcp://host:port), for hermod-indexer")
	fs.StringVar(&spec.KVReplay, "kv-replay", "", "its ZMQ replay endpoint (tcp://host:port)")
	fs.StringVar(&spec.KVEventsTopic, "kv-events-topic", "", "the topic of its KV events (default: every topic)")
	fs.IntVar(&spec.DataParallelRank, "data-parallel-rank", 0, "its data-parallel rank, if it is one of several on a host")
	fs.DurationVar(&ttl, "ttl", time.Minute, "lease of the entry: it goes unless registered again within it (see --keep)")
	fs.BoolVar(&permanent, "permanent", false, "no lease: the entry stays until endpoints deregister")
	fs.BoolVar(&keep, "keep", false, "stay in the foreground renewing the lease until interrupted, then deregister")
	c.usage("Usage: hermodctl endpoints register [--pool P] [--etcd-endpoints E] --model M [flags] NAME HOST:PORT\n\n" +
		"Registers a model server Hermod did not start (a VM, bare metal, a Slurm job) in the pool's\n" +
		"registry: the collector scrapes it, the pickers route to it, the indexer follows its KV events.\n" +
		"With --ttl (default 1m) the entry goes unless registered again in time (cron, a systemd timer);\n" +
		"with --keep this command renews it until interrupted; with --permanent it stays until\n" +
		"endpoints deregister.\n\n")
	if ok, code := c.parse(args, func(n int) bool { return n == 2 }); !ok {
		return code
	}
	if !c.validPool() {
		return ExitUsage
	}
	spec.Name, spec.Address, spec.ServedModels = c.arg(0), c.arg(1), served
	ep, err := specEndpoint(spec, labels, c.t.pool)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "%s: %s\n", c.name, line)
		}
		return ExitUsage
	}
	cli, err := c.t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	switch {
	case keep:
		return keepRegistered(ctx, c, cli, ep, ttl, stdout)
	case permanent:
		ttl = 0
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	rev, err := coord.PutEndpoint(rctx, cli, ep, ttl)
	if err != nil {
		return c.fail(err)
	}
	lease := "permanent"
	if ttl > 0 {
		lease = "for " + ttl.String()
	}
	fmt.Fprintf(stdout, "endpoint %s registered in pool %s (%s, revision %d)\n", ep.GetName(), ep.GetPool(), lease, rev)
	return ExitOK
}

// keepRegistered keeps ep registered until ctx ends, then deregisters it.
func keepRegistered(ctx context.Context, c *subcommand, cli *clientv3.Client, ep *registryv1.Endpoint, ttl time.Duration, stdout io.Writer) int {
	reg, err := coord.Register(ctx, cli, ep, ttl)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "endpoint %s registered in pool %s; renewing its lease until interrupted\n", ep.GetName(), ep.GetPool())
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	if err := reg.Close(cctx); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "endpoint %s deregistered\n", ep.GetName())
	return ExitOK
}

// specArgs names the arguments that the fields of a coord.EndpointSpec
// which are not flags come from.
var specArgs = map[string]string{"name": "NAME", "address": "HOST:PORT"}

// specEndpoint completes spec with labels (key=value each) and returns the
// entry it stands for in pool. Its errors, one a line, name the flag
// (--field) or argument (NAME, HOST:PORT) at fault.
func specEndpoint(spec coord.EndpointSpec, labels []string, pool string) (*registryv1.Endpoint, error) {
	if len(labels) > 0 {
		spec.Labels = make(map[string]string, len(labels))
		for _, l := range labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return nil, fmt.Errorf("--labels: %q is not key=value", l)
			}
			spec.Labels[k] = v
		}
	}
	ep, err := spec.Endpoint(pool)
	if err == nil {
		return ep, nil
	}
	errs := []error{err}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	named := make([]error, 0, len(errs))
	for _, e := range errs {
		var se *coord.SpecError
		if !errors.As(e, &se) {
			named = append(named, e)
			continue
		}
		arg, ok := specArgs[se.Field]
		if !ok {
			arg = "--" + se.Field
		}
		named = append(named, fmt.Errorf("%s: %w", arg, se.Err))
	}
	return nil, errors.Join(named...)
}

// endpointsDeregister removes an endpoint from the registry.
func endpointsDeregister(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl endpoints deregister", stderr, withEtcd)
	c.usage("Usage: hermodctl endpoints deregister [--pool P] [--etcd-endpoints E] NAME\n\n" +
		"Removes an endpoint from the pool's registry: the pickers stop routing to it.\n\n")
	if ok, code := c.parse(args, func(n int) bool { return n == 1 }); !ok {
		return code
	}
	if !c.validPool() {
		return ExitUsage
	}
	cli, err := c.t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	name := c.arg(0)
	ok, err := coord.DeleteEndpoint(rctx, cli, c.t.pool, name)
	if err != nil {
		return c.fail(err)
	}
	if !ok {
		return c.fail(fmt.Errorf("pool %s has no endpoint %s", c.t.pool, name))
	}
	fmt.Fprintf(stdout, "endpoint %s deregistered from pool %s\n", name, c.t.pool)
	return ExitOK
}
