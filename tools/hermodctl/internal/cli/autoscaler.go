package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/coord"
)

// stdin is what apply -f - reads; tests replace it.
var stdin io.Reader = os.Stdin

// autoscalerValidation is the help text's account of who validates what.
const autoscalerValidation = "hermodctl checks only what it needs to store each document under its key:\n" +
	"apiVersion, kind and metadata.name. hermod-autoscaler validates the objects fully\n" +
	"when it loads them; if the pool's objects are then invalid, it logs why and keeps\n" +
	"scaling with the last valid set until they are fixed: check its log after applying.\n"

// statusPrefix returns /hermod/autoscaler/<pool>/status/, where the
// autoscaler records each variant's status (JSON).
func statusPrefix(pool string) string { return coord.AutoscalerPrefix(pool) + "status/" }

// variantStatus is the part of a variant's status that get's table shows.
type variantStatus struct {
	DesiredOptimizedAlloc struct {
		NumReplicas int32     `json:"numReplicas"`
		LastRunTime time.Time `json:"lastRunTime"`
	} `json:"desiredOptimizedAlloc"`
	Actuation struct {
		Applied bool `json:"applied"`
	} `json:"actuation"`
}

func autoscalerApply(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl autoscaler apply", stderr, withEtcd)
	fs, t := c.fs, &c.t
	file := fs.String("f", "", "the file of objects to apply (- reads stdin)")
	c.usage("Usage: hermodctl autoscaler apply -f FILE|- [--pool P] [--etcd-endpoints E]\n\n"+
		"Stores the autoscaler objects of FILE (- reads stdin) for the pool in etcd, each\n"+
		"under its key, replacing the stored object of the same kind and name; stored\n"+
		"objects that FILE does not name are left alone:\n"+
		"  %-50s%s<name>\n"+
		"  %-50s%s<name>\n"+
		"    named %s\n"+
		"FILE is a YAML stream, documents separated by --- lines (each may also be JSON).\n"+
		"It is written in one etcd transaction: all of it or, if any document is refused,\n"+
		"none of it. hermod-autoscaler picks the changes up without a restart.\n\n%s\n",
		kindVariant+" (apiVersion "+variantAPI+")", coord.AutoscalerVariantsPrefix("<pool>"),
		kindConfigMap+" (apiVersion "+configMapAPI+")", coord.AutoscalerConfigMapsPrefix("<pool>"),
		strings.Join(configMapNames, ", "), autoscalerValidation)
	if ok, code := c.parse(args, func(n int) bool { return n == 0 && *file != "" }); !ok {
		return code
	}
	if !c.validPool() {
		return ExitUsage
	}
	source, data, err := readInput(*file)
	if err != nil {
		return c.fail(err)
	}
	objs, err := parseObjects(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid; nothing was written\n%s\n", source, indent(err.Error()))
		return ExitFailure
	}
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	ops := make([]clientv3.Op, 0, len(objs))
	for _, o := range objs {
		ops = append(ops, clientv3.OpPut(o.key(t.pool), string(o.data)))
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := cli.Txn(rctx).Then(ops...).Commit(); err != nil {
		fmt.Fprintf(stderr, "hermodctl autoscaler apply: write %d objects of pool %s: %v\n", len(objs), t.pool, err)
		return ExitFailure
	}
	for _, o := range objs {
		fmt.Fprintf(stdout, "%s configured\n", o.ref())
	}
	return ExitOK
}

// readInput reads a file, or stdin for "-"; it returns the name to show.
func readInput(file string) (string, []byte, error) {
	if file == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return "stdin", nil, fmt.Errorf("read stdin: %w", err)
		}
		return "stdin", data, nil
	}
	data, err := os.ReadFile(file)
	return file, data, err
}

func autoscalerGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl autoscaler get", stderr, withEtcd)
	fs, t := c.fs, &c.t
	output := fs.String("o", "yaml", "output of one object: yaml or json (lists are tables)")
	c.usage("Usage: hermodctl autoscaler get [--pool P] [--etcd-endpoints E] [-o yaml|json] [NAME | configmaps | configmap/NAME]\n\n" +
		"Without NAME, lists the pool's VariantAutoscaling objects: their model, replica bounds\n" +
		"and cost as applied (- when unset: the autoscaler applies its defaults), the local\n" +
		"actuator's replica target (TARGET), and from the status the autoscaler records, the\n" +
		"replicas it last decided (DESIRED), whether they were applied, and when it decided.\n" +
		"With NAME (or variantautoscaling/NAME), prints that variant as applied, with its\n" +
		"status. configmaps lists the applied ConfigMaps and their data entries; configmap/NAME\n" +
		"prints one.\n\n")
	if ok, code := c.parse(args, func(n int) bool { return n <= 1 && (*output == "yaml" || *output == "json") }); !ok {
		return code
	}
	cli, kind, name, code := c.openRef(ctx, false)
	if cli == nil {
		return code
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var err error
	switch {
	case name != "":
		err = getObject(rctx, cli, t.pool, kind, name, *output, stdout)
	case kind == kindConfigMap:
		err = listConfigMaps(rctx, cli, t.pool, stdout, stderr)
	default:
		err = listVariants(rctx, cli, t.pool, stdout, stderr)
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// openRef checks --pool and the argument, a reference to the pool's
// objects (parseRef; with named, to one object), then connects to etcd.
// It returns a nil client, with the exit code, when the subcommand is to
// stop (why is said on stderr); the caller closes the client.
func (c *subcommand) openRef(ctx context.Context, named bool) (cli *clientv3.Client, kind, name string, code int) {
	if !c.validPool() {
		return nil, "", "", ExitUsage
	}
	arg := c.fs.Arg(0)
	kind, name, err := parseRef(arg)
	if err == nil && named && name == "" {
		err = fmt.Errorf("%q: not a name", arg)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
		return nil, "", "", ExitUsage
	}
	if cli, err = c.t.etcdClient(ctx); err != nil {
		return nil, "", "", c.fail(err)
	}
	return cli, kind, name, ExitOK
}

// errNotFound is returned for an object that is not stored.
var errNotFound = errors.New("not found")

// parseRef reads get's and delete's argument: "" or variantautoscalings
// (every variant), configmaps (every ConfigMap), NAME or
// variantautoscaling/NAME, configmap/NAME.
func parseRef(arg string) (kind, name string, err error) {
	switch arg {
	case "", variantResource, variantResource + "s":
		return kindVariant, "", nil
	case configMapResource, configMapResource + "s":
		return kindConfigMap, "", nil
	}
	kind, name = kindVariant, arg
	if resource, rest, ok := strings.Cut(arg, "/"); ok {
		switch resource {
		case variantResource:
		case configMapResource:
			kind = kindConfigMap
		default:
			return "", "", fmt.Errorf("%q: unknown resource %q (want %s or %s)", arg, resource, variantResource, configMapResource)
		}
		name = rest
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: not a name", arg)
	}
	return kind, name, nil
}

// listVariants prints the variants' table; the objects, statuses and
// targets are read at one revision.
func listVariants(ctx context.Context, cli *clientv3.Client, pool string, stdout, stderr io.Writer) error {
	vp, sp, rp := coord.AutoscalerVariantsPrefix(pool), statusPrefix(pool), coord.ReplicaTargetsPrefix(pool)
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(vp, clientv3.WithPrefix()),
		clientv3.OpGet(sp, clientv3.WithPrefix()),
		clientv3.OpGet(rp, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return fmt.Errorf("read %s: %w", coord.AutoscalerPrefix(pool), err)
	}
	// byName maps the keys of response i, without prefix, to their values.
	byName := func(i int, prefix string) map[string][]byte {
		m := map[string][]byte{}
		for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
			m[strings.TrimPrefix(string(kv.Key), prefix)] = kv.Value
		}
		return m
	}
	variants := resp.Responses[0].GetResponseRange().GetKvs()
	statuses, targets := byName(1, sp), byName(2, rp)
	if len(variants) == 0 {
		fmt.Fprintf(stdout, "pool %s has no VariantAutoscaling objects\n", pool)
		return nil
	}
	var warnings []string
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODEL\tMIN\tMAX\tCOST\tTARGET\tDESIRED\tAPPLIED\tLAST RUN")
	for _, kv := range variants {
		name := strings.TrimPrefix(string(kv.Key), vp)
		model, lo, hi, cost := "-", "-", "-", "-"
		var doc yaml.Node
		if err := yaml.Unmarshal(kv.Value, &doc); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", resourceRef(kindVariant, name), err))
		} else {
			spec := lookup(root(&doc), "spec")
			model, lo, hi, cost = display(lookup(spec, "modelID")), display(lookup(spec, "minReplicas")),
				display(lookup(spec, "maxReplicas")), display(lookup(spec, "variantCost"))
		}
		target, desired, applied, lastRun := "-", "-", "-", "-"
		if v, ok := targets[name]; ok {
			target = strings.TrimSpace(string(v))
		}
		if v, ok := statuses[name]; ok {
			var st variantStatus
			if err := json.Unmarshal(v, &st); err != nil {
				warnings = append(warnings, fmt.Sprintf("status of %s: %v", resourceRef(kindVariant, name), err))
			} else {
				desired, applied = strconv.Itoa(int(st.DesiredOptimizedAlloc.NumReplicas)), strconv.FormatBool(st.Actuation.Applied)
				if at := st.DesiredOptimizedAlloc.LastRunTime; !at.IsZero() {
					lastRun = now.Sub(at).Round(time.Second).String() + " ago"
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, model, lo, hi, cost, target, desired, applied, lastRun)
	}
	_ = tw.Flush()
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	return nil
}

// listConfigMaps prints the ConfigMaps' table.
func listConfigMaps(ctx context.Context, cli *clientv3.Client, pool string, stdout, stderr io.Writer) error {
	prefix := coord.AutoscalerConfigMapsPrefix(pool)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read %s: %w", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		fmt.Fprintf(stdout, "pool %s has no applied ConfigMaps: the autoscaler uses those of its --config file, if any, or its defaults\n", pool)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDATA")
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		entries := "-"
		var doc yaml.Node
		if err := yaml.Unmarshal(kv.Value, &doc); err != nil {
			fmt.Fprintf(stderr, "warning: %s: %v\n", resourceRef(kindConfigMap, name), err)
		} else if data := lookup(root(&doc), "data"); data != nil && data.Kind == yaml.MappingNode {
			var keys []string
			for i := 0; i+1 < len(data.Content); i += 2 {
				keys = append(keys, resolve(data.Content[i]).Value)
			}
			if len(keys) > 0 {
				entries = strings.Join(keys, ",")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, entries)
	}
	return tw.Flush()
}

// getObject prints one object as applied; a variant with its status (from
// the autoscaler's status key) and, in YAML, its replica target.
func getObject(ctx context.Context, cli *clientv3.Client, pool, kind, name, output string, stdout io.Writer) error {
	key := objectKey(pool, kind, name)
	ops := []clientv3.Op{clientv3.OpGet(key)}
	if kind == kindVariant {
		ops = append(ops, clientv3.OpGet(statusPrefix(pool)+name), clientv3.OpGet(coord.ReplicaTargetKey(pool, name)))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	// value returns the value of response i's key, nil if there is none.
	value := func(i int) []byte {
		if i >= len(resp.Responses) {
			return nil
		}
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return nil
		}
		return kvs[0].Value
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return fmt.Errorf("%s: %w in pool %s (%s)", resourceRef(kind, name), errNotFound, pool, key)
	}
	revision, status, target := kvs[0].ModRevision, value(1), value(2)
	var doc yaml.Node
	if err := yaml.Unmarshal(kvs[0].Value, &doc); err != nil || root(&doc) == nil || root(&doc).Kind != yaml.MappingNode {
		return fmt.Errorf("%s: the stored value is not a YAML mapping (%s)", key, strings.TrimSpace(string(kvs[0].Value)))
	}
	if status != nil {
		if err := setStatus(root(&doc), status); err != nil {
			return fmt.Errorf("status of %s: %w", resourceRef(kind, name), err)
		}
	}
	if output == "json" {
		var v any
		if err := doc.Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(stdout, "# pool %s, revision %d (%s)\n", pool, revision, key)
	if kind == kindVariant {
		if target != nil {
			fmt.Fprintf(stdout, "# replica target (local actuator): %s\n", strings.TrimSpace(string(target)))
		}
		if status == nil {
			fmt.Fprintln(stdout, "# no status: the autoscaler has not decided for this variant yet")
		}
	}
	if root(&doc).Style&yaml.FlowStyle != 0 {
		blockStyle(&doc) // applied as JSON: print it as YAML
	} else {
		blockCollections(&doc)
	}
	return writeYAML(stdout, &doc)
}

// setStatus sets (or replaces) the status of object m to the status JSON.
func setStatus(m *yaml.Node, status []byte) error {
	var st yaml.Node
	if err := yaml.Unmarshal(status, &st); err != nil || len(st.Content) == 0 {
		return fmt.Errorf("not JSON: %q", status)
	}
	blockStyle(&st)
	value := st.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if resolve(m.Content[i]).Value == "status" {
			m.Content[i+1] = value
			return nil
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "status"}, value)
	return nil
}

// blockCollections prints the mappings and sequences of n (JSON's flow
// style) as blocks; unlike blockStyle, it keeps the scalars' quoting and
// literal blocks as written.
func blockCollections(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style &^= yaml.FlowStyle
	}
	for _, c := range n.Content {
		blockCollections(c)
	}
}

// writeYAML encodes n with two-space indents.
func writeYAML(w io.Writer, n *yaml.Node) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func autoscalerDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl autoscaler delete", stderr, withEtcd)
	t := &c.t
	c.usage("Usage: hermodctl autoscaler delete [--pool P] [--etcd-endpoints E] NAME|configmap/NAME\n\n"+
		"Deletes the pool's VariantAutoscaling NAME, with its status, in one etcd transaction\n"+
		"(or, as configmap/NAME, an applied ConfigMap: the autoscaler falls back to the one\n"+
		"of its --config file, if any, or to its defaults). The autoscaler stops scaling\n"+
		"the variant once it loads the change; hermodctl leaves the variant's replicas and\n"+
		"the local actuator's replica target (%s<name>) alone.\n\n", coord.ReplicaTargetsPrefix("<pool>"))
	if ok, code := c.parse(args, func(n int) bool { return n == 1 }); !ok {
		return code
	}
	cli, kind, name, code := c.openRef(ctx, true)
	if cli == nil {
		return code
	}
	defer func() { _ = cli.Close() }()
	key := objectKey(t.pool, kind, name)
	ops := []clientv3.Op{clientv3.OpDelete(key)}
	if kind == kindVariant {
		ops = append(ops, clientv3.OpDelete(statusPrefix(t.pool)+name))
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cli.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).Then(ops...).Commit()
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl autoscaler delete: delete %s: %v\n", key, err)
		return ExitFailure
	}
	if !resp.Succeeded {
		fmt.Fprintf(stderr, "hermodctl autoscaler delete: %s: %v in pool %s (%s)\n", resourceRef(kind, name), errNotFound, t.pool, key)
		return ExitFailure
	}
	fmt.Fprintf(stdout, "%s deleted\n", resourceRef(kind, name))
	return ExitOK
}
