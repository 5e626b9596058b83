package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	k8syaml "sigs.k8s.io/yaml"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/scheduling"
)

func configGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl config get", stderr, withEtcd)
	t := &c.t
	output := c.output(formatRaw, configGetFormats, configGetAliases,
		"output `format`: raw (the document as stored; table and text are the same), json or yaml\n"+
			"(the config and its revision: pool, key, revision, version, config, document)")
	c.usage("Usage: hermodctl config get [--pool P] [--etcd-endpoints E] [-o raw|json|yaml]\n\n" +
		"Prints the pool's EndpointPickerConfig as stored in etcd, after a comment line\n" +
		"with its revision (config set --if-revision takes it); config set takes what it\n" +
		"prints back. -o json and -o yaml print one document instead:\n" +
		"  pool, key       the pool and its config's etcd key\n" +
		"  revision        the etcd revision that wrote the config (config set --if-revision)\n" +
		"  version         how many times the key was written since it was created\n" +
		"  config          the config, parsed (without its comments)\n" +
		"  document        the config as stored, comments included\n" +
		"(config set takes that YAML back too: it stores its config: block.)\n\n")
	if ok, code := c.parse(args, nil); !ok {
		return code
	}
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	v, err := coord.GetConfig(rctx, cli, t.pool)
	if errors.Is(err, coord.ErrNoConfig) {
		fmt.Fprintf(stderr, "pool %q has no config in etcd (%s): its pickers run the default config\n", t.pool, coord.ConfigKey(t.pool))
		return ExitFailure
	}
	if err != nil {
		return c.fail(err)
	}
	if output.structured() {
		err = writeStoredConfig(stdout, output.format, v)
	} else {
		err = writeRawConfig(stdout, v)
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// writeRawConfig writes config get's default output: the header comment,
// then the config as stored.
func writeRawConfig(w io.Writer, v coord.ConfigVersion) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, getHeader+"\n", v.Pool, v.Revision, coord.ConfigKey(v.Pool))
	b.Write(v.Data)
	if len(v.Data) > 0 && v.Data[len(v.Data)-1] != '\n' {
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// storedConfig is config get's JSON and YAML: a pool's config with its
// etcd key's metadata.
type storedConfig struct {
	Pool string `json:"pool"`
	Key  string `json:"key"`
	// Revision is the etcd revision of the write that stored the config
	// (the key's mod revision): what config set --if-revision takes.
	Revision int64 `json:"revision"`
	// Version counts the writes of the key since it was created.
	Version int64 `json:"version"`
	// Config is the config, parsed; its comments are dropped.
	Config json.RawMessage `json:"config"`
	// Document is the config as stored, comments included.
	Document string `json:"document"`
}

// writeStoredConfig writes the config as a storedConfig in format.
func writeStoredConfig(w io.Writer, format string, v coord.ConfigVersion) error {
	key := coord.ConfigKey(v.Pool)
	cfg, err := k8syaml.YAMLToJSON(v.Data)
	if err != nil {
		return fmt.Errorf("the config stored at %s (revision %d) is not YAML: %w", key, v.Revision, err)
	}
	return writeStructured(w, format, storedConfig{Pool: v.Pool, Key: key, Revision: v.Revision, Version: v.Version, Config: cfg, Document: string(v.Data)}, false)
}

func configSet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newSubcommand(ctx, "hermodctl config set", stderr, withEtcd|withNATS)
	fs, t := c.fs, &c.t
	strict := fs.Bool("strict", false, "refuse a config with warnings too")
	ifRev := fs.Int64("if-revision", -1, "write only if the stored config is still at this revision (0: only if there is none)")
	wait := fs.Duration("wait", 5*time.Second, "wait this long for the pickers to report loading it (0: do not wait)")
	c.usage("Usage: hermodctl config set [--pool P] [--etcd-endpoints E] [--nats-url U] [-strict] [--if-revision N] [--wait D] FILE\n\n" +
		"Validates FILE as config validate does and, if it is valid, stores it as the pool's\n" +
		"EndpointPickerConfig in etcd: every picker of the pool loads it without a restart.\n" +
		"An invalid file is refused and nothing is written. It warns about every profile whose\n" +
		"label or role filters match none of the pool's registered endpoints (requests that\n" +
		"profile serves would fail with 503 no_endpoint_matched). Then waits for the pickers to say\n" +
		"that they loaded it (or why they refused it).\n\n")
	if ok, code := c.parse(args, func(n int) bool { return n == 1 }); !ok {
		return code
	}
	path := c.arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		return c.fail(err)
	}
	data = withoutGetHeader(data)
	if doc, err := scheduling.ConfigDocument(data); err == nil {
		data = doc // a values file: only its config block is stored
	}
	resolved, err := validateConfig(data)
	if err == nil && *strict && len(resolved.Warnings) > 0 {
		err = fmt.Errorf("warnings are errors with -strict:\n%s", strings.Join(resolved.Warnings, "\n"))
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid; nothing was written\n%s\n", path, indent(err.Error()))
		return ExitFailure
	}
	for _, w := range resolved.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	cli, err := t.etcdClient(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer func() { _ = cli.Close() }()
	if n := warnUnmatched(ctx, cli, t.pool, data, stderr); n > 0 && *strict {
		fmt.Fprintf(stderr, "%s: warnings are errors with -strict; nothing was written\n", path)
		return ExitFailure
	}

	// Listen for the pickers' reports before writing, so none is missed.
	var statuses *statusCollector
	if *wait > 0 {
		if statuses, err = collectStatuses(ctx, t); err != nil {
			fmt.Fprintf(stderr, "note: not waiting for the pickers (%v)\n", err)
		} else {
			defer statuses.close()
		}
	}
	var opts []coord.PutOption
	if *ifRev >= 0 {
		opts = append(opts, coord.IfRevision(*ifRev))
	}
	v, err := coord.PutConfig(ctx, cli, t.pool, data, opts...)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "pool %s: config written (revision %d)\n", t.pool, v.Revision)
	if statuses == nil {
		return ExitOK
	}
	got := statuses.wait(ctx, v.Revision, *wait)
	if len(got) == 0 {
		fmt.Fprintf(stdout, "no picker reported within %s (are any running for pool %s?)\n", *wait, t.pool)
		return ExitOK
	}
	code := ExitOK
	for _, s := range got {
		if s.GetAccepted() {
			fmt.Fprintf(stdout, "  %s: loaded\n", s.GetReplica())
			continue
		}
		code = ExitFailure
		fmt.Fprintf(stdout, "  %s: REFUSED, keeps its previous config:\n%s\n", s.GetReplica(), indent(indent(s.GetError())))
	}
	return code
}

// statusCollector gathers the ConfigStatus events of a pool.
type statusCollector struct {
	mu    sync.Mutex
	got   []*eventsv1.ConfigStatus
	more  chan struct{}
	close func()
}

func collectStatuses(ctx context.Context, t *target) (*statusCollector, error) {
	nc, _, err := t.natsConn(ctx)
	if err != nil {
		return nil, err
	}
	subject, err := bus.ConfigSubject(t.pool)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &statusCollector{more: make(chan struct{}, 1)}
	sub, err := bus.Subscribe(nc, subject, func(s *eventsv1.ConfigStatus, _ string) {
		c.mu.Lock()
		c.got = append(c.got, s)
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	// A round trip makes sure the server has the subscription.
	if err := nc.FlushTimeout(dialTimeout); err != nil {
		_ = sub.Close()
		nc.Close()
		return nil, err
	}
	c.close = func() { _ = sub.Close(); nc.Close() }
	return c, nil
}

// wait returns the statuses of revision: it waits up to d for the first,
// then a moment for the other replicas.
func (c *statusCollector) wait(ctx context.Context, revision int64, d time.Duration) []*eventsv1.ConfigStatus {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return c.of(revision)
		case <-deadline.C:
			return c.of(revision)
		case <-settle:
			return c.of(revision)
		case <-c.more:
			if settle == nil && len(c.of(revision)) > 0 {
				settle = time.After(500 * time.Millisecond)
			}
		}
	}
}

func (c *statusCollector) of(revision int64) []*eventsv1.ConfigStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*eventsv1.ConfigStatus
	seen := map[string]bool{}
	for _, s := range c.got {
		if s.GetRevision() == revision && !seen[s.GetReplica()] {
			seen[s.GetReplica()] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetReplica() < out[j].GetReplica() })
	return out
}

// getHeader is the comment line config get prints before the config.
const getHeader = "# pool %s, revision %d (%s)"

// getHeaderLine matches getHeader's lines.
var getHeaderLine = regexp.MustCompile(`^# pool \S+, revision \d+ \(\S+\)\r?$`)

// withoutGetHeader drops the comment lines config get put at the top of
// data, so that what it printed can be set again without piling them up.
func withoutGetHeader(data []byte) []byte {
	for {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if !getHeaderLine.Match(line) {
			return data
		}
		data = rest
	}
}
