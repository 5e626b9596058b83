package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
)

func endpointsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl endpoints list", stderr, withEtcd|withNATS)
	t := &c.t
	output := c.output(formatTable, readFormats, tableAliases, "output `format`: table, json (a JSON array) or yaml")
	c.usage("Usage: hermodctl endpoints list [--pool P] [--etcd-endpoints E] [--nats-url U] [-o table|json|yaml]\n\n" +
		"Lists the pool's registered endpoints with their latest metrics (from the\n" +
		"collector's metrics bucket in NATS; shown as - when NATS cannot be reached).\n" +
		"-o json and -o yaml print an array of {endpoint, metrics}: the registry entry and\n" +
		"the latest metrics (absent when there are none), with the proto field names.\n\n")
	if ok, code := c.parse(args, nil); !ok {
		return code
	}
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	snap, err := coord.LoadSnapshot(ctx, cli, t.pool)
	if err != nil {
		return c.fail(err)
	}
	metrics := map[string]*eventsv1.PodMetrics{}
	if nc, js, err := t.natsConn(ctx); err != nil {
		fmt.Fprintf(stderr, "note: no metrics (%v)\n", err)
	} else {
		mctx, cancel := context.WithTimeout(ctx, dialTimeout)
		ms, _, err := bus.LatestMetrics(mctx, js, t.pool)
		cancel()
		nc.Close()
		if err != nil {
			fmt.Fprintf(stderr, "note: no metrics (%v)\n", err)
		}
		for _, m := range ms {
			metrics[m.GetEndpoint()] = m
		}
	}
	eps := snap.Sorted()
	if output.structured() {
		if err := writeEndpoints(stdout, output.format, eps, metrics); err != nil {
			return c.fail(err)
		}
		return ExitOK
	}
	if len(eps) == 0 {
		fmt.Fprintf(stdout, "pool %s has no registered endpoints\n", t.pool)
		return ExitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tRUNNING\tWAITING\tKV\tMETRICS AGE\tMODELS\tLABELS")
	now := time.Now()
	for _, ep := range eps {
		running, waiting, kv, age := "-", "-", "-", "-"
		models := ep.GetServedModels()
		if m, ok := metrics[ep.GetName()]; ok {
			running, waiting = fmt.Sprint(m.GetRunningRequests()), fmt.Sprint(m.GetWaitingRequests())
			kv = fmt.Sprintf("%.1f%%", 100*m.GetKvCacheUsage())
			age = now.Sub(m.GetTime().AsTime()).Round(time.Millisecond).String()
			if m.GetConsecutiveFailures() > 0 {
				age += fmt.Sprintf(" (%d failed: %s)", m.GetConsecutiveFailures(), m.GetError())
			}
			if len(m.GetServedModels()) > 0 {
				models = m.GetServedModels()
			}
		}
		fmt.Fprintf(tw, "%s\t%s:%d\t%s\t%s\t%s\t%s\t%s\t%s\n", ep.GetName(), ep.GetAddress(), ep.GetPort(), running, waiting, kv, age,
			strings.Join(models, ","), labels(ep.GetLabels()))
	}
	_ = tw.Flush()
	for _, ke := range snap.Malformed {
		fmt.Fprintf(stderr, "warning: skipped %v\n", ke)
	}
	return ExitOK
}

// endpointRow is an endpoint in endpoints list's JSON and YAML.
type endpointRow struct {
	Endpoint json.RawMessage `json:"endpoint"`
	Metrics  json.RawMessage `json:"metrics,omitempty"`
}

// writeEndpoints writes the endpoints, with their metrics, as a JSON or
// YAML array.
func writeEndpoints(w io.Writer, format string, eps []*registryv1.Endpoint, metrics map[string]*eventsv1.PodMetrics) error {
	rows := make([]endpointRow, 0, len(eps))
	for _, ep := range eps {
		var r endpointRow
		var err error
		if r.Endpoint, err = protoJSON(ep); err != nil {
			return fmt.Errorf("endpoint %s: %w", ep.GetName(), err)
		}
		if m, ok := metrics[ep.GetName()]; ok {
			if r.Metrics, err = protoJSON(m); err != nil {
				return fmt.Errorf("metrics of endpoint %s: %w", ep.GetName(), err)
			}
		}
		rows = append(rows, r)
	}
	return writeStructured(w, format, rows, false)
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
