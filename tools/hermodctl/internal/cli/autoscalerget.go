package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/coord"
)

func autoscalerGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl autoscaler get", stderr, withEtcd)
	t := &c.t
	output := c.output("", readFormats, tableAliases,
		"output `format`: table, json or yaml (default: table for a list, yaml for one object)")
	c.usage("Usage: hermodctl autoscaler get [--pool P] [--etcd-endpoints E] [-o table|json|yaml] [NAME | configmaps | configmap/NAME]\n\n" +
		"Without NAME, lists the pool's VariantAutoscaling objects: their model, replica bounds\n" +
		"and cost as applied (- when unset: the autoscaler applies its defaults), the local\n" +
		"actuator's replica target (TARGET), and from the status the autoscaler records, the\n" +
		"replicas it last decided (DESIRED), whether they were applied, and when it decided.\n" +
		"With NAME (or variantautoscaling/NAME), prints that variant as applied, with its\n" +
		"status. configmaps lists the applied ConfigMaps and their data entries; configmap/NAME\n" +
		"prints one.\n\n" +
		"Output: a list is a table unless -o says otherwise; -o json and -o yaml print it as\n" +
		"kubectl does, {apiVersion: v1, kind: List, items: [...]}, each item the object as\n" +
		"applied with its status (the local actuator's replica target shows in the table\n" +
		"and in one object's YAML comments only). One object prints as YAML, after comment\n" +
		"lines with its revision and replica target; -o json prints it alone, -o table as a\n" +
		"one-row table.\n\n")
	if ok, code := c.parse(args, func(n int) bool { return n <= 1 }); !ok {
		return code
	}
	cli, kind, name, code := c.openRef(ctx, false)
	if cli == nil {
		return code
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	objs, err := readObjects(rctx, cli, t.pool, kind, name)
	if err == nil && name != "" && len(objs) == 0 {
		err = fmt.Errorf("%s: %w in pool %s (%s)", resourceRef(kind, name), errNotFound, t.pool, objectKey(t.pool, kind, name))
	}
	if err == nil {
		err = printObjects(stdout, stderr, t.pool, kind, name, output.format, objs)
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// storedObject is an autoscaler object as stored in etcd and, for a
// variant, what get shows beside it.
type storedObject struct {
	kind, name string
	key        string
	value      []byte
	revision   int64  // the key's mod revision
	status     []byte // the status the autoscaler records (JSON), nil if none
	target     []byte // the local actuator's replica target, nil if none
}

// readObjects reads the pool's objects of kind, all of them or the one
// named, with the variants' statuses and replica targets, at one revision.
func readObjects(ctx context.Context, cli *clientv3.Client, pool, kind, name string) ([]storedObject, error) {
	var opts []clientv3.OpOption
	if name == "" {
		opts = append(opts, clientv3.WithPrefix())
	}
	prefixes := []string{objectKey(pool, kind, "")}
	if kind == kindVariant {
		prefixes = append(prefixes, statusPrefix(pool), coord.ReplicaTargetsPrefix(pool))
	}
	ops := make([]clientv3.Op, 0, len(prefixes))
	for _, p := range prefixes {
		ops = append(ops, clientv3.OpGet(p+name, opts...))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", prefixes[0]+name, err)
	}
	// byName maps the keys of response i, without prefix, to their values.
	byName := func(i int) map[string][]byte {
		m := map[string][]byte{}
		if i < len(resp.Responses) {
			for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
				m[strings.TrimPrefix(string(kv.Key), prefixes[i])] = kv.Value
			}
		}
		return m
	}
	statuses, targets := byName(1), byName(2)
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	objs := make([]storedObject, 0, len(kvs))
	for _, kv := range kvs {
		n := strings.TrimPrefix(string(kv.Key), prefixes[0])
		objs = append(objs, storedObject{kind: kind, name: n, key: string(kv.Key), value: kv.Value, revision: kv.ModRevision,
			status: statuses[n], target: targets[n]})
	}
	return objs, nil
}

// printObjects prints what get read in format: "" is a table for a list
// (name ""), YAML for one object.
func printObjects(w, stderr io.Writer, pool, kind, name, format string, objs []storedObject) error {
	if format == "" {
		format = formatTable
		if name != "" {
			format = formatYAML
		}
	}
	switch {
	case format == formatTable && kind == kindVariant:
		return printVariants(w, stderr, pool, objs, name == "")
	case format == formatTable:
		return printConfigMaps(w, stderr, pool, objs, name == "")
	case name != "" && format == formatYAML:
		return printObjectYAML(w, pool, objs[0])
	case name != "":
		o, err := objectJSON(objs[0])
		if err != nil {
			return err
		}
		return writeStructured(w, format, o, false)
	}
	items := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		item, err := objectJSON(o)
		if err != nil {
			fmt.Fprintf(stderr, "warning: left out %s: %v\n", resourceRef(o.kind, o.name), err)
			continue
		}
		items = append(items, item)
	}
	return writeStructured(w, format, newKubeList(items), false)
}

// printVariants prints the variants' table; with listing, says so when
// the pool has none.
func printVariants(w, stderr io.Writer, pool string, objs []storedObject, listing bool) error {
	if len(objs) == 0 && listing {
		_, err := fmt.Fprintf(w, "pool %s has no VariantAutoscaling objects\n", pool)
		return err
	}
	var warnings []string
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODEL\tMIN\tMAX\tCOST\tTARGET\tDESIRED\tAPPLIED\tLAST RUN")
	for _, o := range objs {
		model, lo, hi, cost := "-", "-", "-", "-"
		var doc yaml.Node
		if err := yaml.Unmarshal(o.value, &doc); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", resourceRef(kindVariant, o.name), err))
		} else {
			spec := lookup(root(&doc), "spec")
			model, lo, hi, cost = display(lookup(spec, "modelID")), display(lookup(spec, "minReplicas")),
				display(lookup(spec, "maxReplicas")), display(lookup(spec, "variantCost"))
		}
		target, desired, applied, lastRun := "-", "-", "-", "-"
		if o.target != nil {
			target = strings.TrimSpace(string(o.target))
		}
		if o.status != nil {
			var st variantStatus
			if err := json.Unmarshal(o.status, &st); err != nil {
				warnings = append(warnings, fmt.Sprintf("status of %s: %v", resourceRef(kindVariant, o.name), err))
			} else {
				desired, applied = strconv.Itoa(int(st.DesiredOptimizedAlloc.NumReplicas)), strconv.FormatBool(st.Actuation.Applied)
				if at := st.DesiredOptimizedAlloc.LastRunTime; !at.IsZero() {
					lastRun = now.Sub(at).Round(time.Second).String() + " ago"
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.name, model, lo, hi, cost, target, desired, applied, lastRun)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, warning := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", warning)
	}
	return nil
}

// printConfigMaps prints the ConfigMaps' table; with listing, says so
// when the pool has none.
func printConfigMaps(w, stderr io.Writer, pool string, objs []storedObject, listing bool) error {
	if len(objs) == 0 && listing {
		_, err := fmt.Fprintf(w, "pool %s has no applied ConfigMaps: the autoscaler uses those of its --config file, if any, or its defaults\n", pool)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDATA")
	for _, o := range objs {
		entries := "-"
		var doc yaml.Node
		if err := yaml.Unmarshal(o.value, &doc); err != nil {
			fmt.Fprintf(stderr, "warning: %s: %v\n", resourceRef(kindConfigMap, o.name), err)
		} else if data := lookup(root(&doc), "data"); data != nil && data.Kind == yaml.MappingNode {
			var keys []string
			for i := 0; i+1 < len(data.Content); i += 2 {
				keys = append(keys, resolve(data.Content[i]).Value)
			}
			if len(keys) > 0 {
				entries = strings.Join(keys, ",")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", o.name, entries)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// objectDocument parses an object as applied and sets its status, if it
// has one.
func objectDocument(o storedObject) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(o.value, &doc); err != nil || root(&doc) == nil || root(&doc).Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: the stored value is not a YAML mapping (%s)", o.key, strings.TrimSpace(string(o.value)))
	}
	if o.status != nil {
		if err := setStatus(root(&doc), o.status); err != nil {
			return nil, fmt.Errorf("status of %s: %w", resourceRef(o.kind, o.name), err)
		}
	}
	return &doc, nil
}

// objectJSON returns an object as applied, with its status, in JSON.
func objectJSON(o storedObject) (json.RawMessage, error) {
	doc, err := objectDocument(o)
	if err != nil {
		return nil, err
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", o.key, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s as JSON: %w", o.key, err)
	}
	return b, nil
}

// printObjectYAML prints one object as applied, with its status, after
// comment lines: its revision and, for a variant, its replica target (or
// that it has no status yet).
func printObjectYAML(w io.Writer, pool string, o storedObject) error {
	doc, err := objectDocument(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# pool %s, revision %d (%s)\n", pool, o.revision, o.key)
	if o.kind == kindVariant {
		if o.target != nil {
			fmt.Fprintf(w, "# replica target (local actuator): %s\n", strings.TrimSpace(string(o.target)))
		}
		if o.status == nil {
			fmt.Fprintln(w, "# no status: the autoscaler has not decided for this variant yet")
		}
	}
	if root(doc).Style&yaml.FlowStyle != 0 {
		blockStyle(doc) // applied as JSON: print it as YAML
	} else {
		blockCollections(doc)
	}
	return writeYAML(w, doc)
}
