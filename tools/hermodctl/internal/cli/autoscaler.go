package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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

// openRef checks --pool and the argument, a reference to the pool's
// objects (parseRef; with named, to one object), then connects to etcd.
// It returns a nil client, with the exit code, when the subcommand is to
// stop (why is said on stderr); the caller closes the client.
func (c *subcommand) openRef(ctx context.Context, named bool) (cli *clientv3.Client, kind, name string, code int) {
	if !c.validPool() {
		return nil, "", "", ExitUsage
	}
	arg := c.arg(0)
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
