package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
)

// Global flags: the connection settings, which every subcommand that
// connects takes, may also come before the command (hermodctl
// --etcd-endpoints X config get), and two of them name where settings are
// kept: --state-file (a running devstack's) and --context (a saved
// context; default $XDG_CONFIG_HOME/hermod/context, ~/.config/hermod/context).
// A setting comes from, first to last: the subcommand's own flags, the
// global flags, the HERMOD_<FLAG> environment, the state file, the context
// file, the defaults.
const (
	flagPool      = "pool"
	flagEtcd      = "etcd-endpoints"
	flagNATS      = "nats-url"
	flagStateFile = "state-file"
	flagContext   = "context"
)

// securityFlagNames are the TLS and credential settings of the
// connections (bootstrap's flags; secrets themselves come from files or
// HERMOD_ETCD_PASSWORD, HERMOD_NATS_PASSWORD, HERMOD_NATS_TOKEN).
var securityFlagNames = slices.Concat(bootstrap.EtcdSecurityFlags, bootstrap.NATSSecurityFlags)

var globalFlagNames = append([]string{flagPool, flagEtcd, flagNATS, flagStateFile, flagContext}, securityFlagNames...)

// globals are the global flags given, by name.
type globals map[string]string

type globalsKey struct{}

func withGlobals(ctx context.Context, g globals) context.Context {
	return context.WithValue(ctx, globalsKey{}, g)
}

func globalsOf(ctx context.Context) globals {
	g, _ := ctx.Value(globalsKey{}).(globals)
	return g
}

// splitGlobals takes the global flags out of args, up to the subcommand's
// verb (the second word that is not a flag; the first for a command
// without verbs, version), and returns them with the other arguments in
// order.
func splitGlobals(args []string) (globals, []string, error) {
	g := globals{}
	var rest []string
	words := 0
	verbless := false // a command without verbs (version, completion): the flags after it are its own
	for i := 0; i < len(args); i++ {
		a := args[i]
		if words >= 2 || verbless || !strings.HasPrefix(a, "-") || a == "-" || a == "-h" || a == "--help" || isVersion(a) {
			rest = append(rest, a)
			if !strings.HasPrefix(a, "-") {
				words++
				verbless = verbless || (words == 1 && groups[a] == nil)
			}
			verbless = verbless || isVersion(a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !isGlobal(name) {
			return nil, nil, fmt.Errorf("unknown global flag %s (global flags: --%s)", a, strings.Join(globalFlagNames, ", --"))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("global flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		g[name] = value
	}
	return g, rest, nil
}

func isGlobal(name string) bool {
	for _, n := range globalFlagNames {
		if n == name {
			return true
		}
	}
	return false
}

// connection is a saved set of connection settings: a devstack state file
// (its pool, etcd_endpoints, nats_url and, from devstack --tls, its
// security section) or a context file (pool, etcd-endpoints, nats-url);
// both hold the security flags by their names (etcd-ca-file,
// nats-creds-file, ...; files, never secrets).
type connection struct {
	Pool    string   `json:"pool" yaml:"pool"`
	Etcd    []string `json:"etcd_endpoints" yaml:"etcd-endpoints"`
	NATSURL string   `json:"nats_url" yaml:"nats-url"`
	// Security holds the security flags' values by flag name.
	Security map[string]string `json:"security,omitempty" yaml:",inline"`
}

// readStateFile reads a devstack state file.
func readStateFile(path string) (connection, error) {
	var c connection
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("--%s: %w", flagStateFile, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("--%s %s: %w", flagStateFile, path, err)
	}
	return c, nil
}

// readContext reads a context file; the default one may be missing.
func readContext(path string, explicit bool) (connection, error) {
	var c connection
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("--%s: %w", flagContext, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("--%s %s: %w", flagContext, path, err)
	}
	for k, v := range c.Security {
		if !slices.Contains(securityFlagNames, k) {
			return c, fmt.Errorf("--%s %s: unknown setting %q (settings: pool, etcd-endpoints, nats-url, %s)", flagContext, path, k, strings.Join(securityFlagNames, ", "))
		}
		// a file named relative to the context file
		if strings.HasSuffix(k, "-file") && v != "" && !filepath.IsAbs(v) {
			c.Security[k] = filepath.Join(filepath.Dir(path), v)
		}
	}
	return c, nil
}

// defaultContextPath is $XDG_CONFIG_HOME/hermod/context, or
// ~/.config/hermod/context ("" when neither is known).
func defaultContextPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hermod", "context")
}

// applySettings sets the flags of fs the command line left unset from the
// global flags, then the environment, then the state file and the context
// file.
func applySettings(ctx context.Context, fs *flag.FlagSet) error {
	g := globalsOf(ctx)
	for _, name := range globalFlagNames {
		if v, ok := g[name]; ok && fs.Lookup(name) != nil && !isSet(fs, name) {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("--%s=%q: %w", name, v, err)
			}
		}
	}
	if err := cmdline.ApplyEnv(fs, outputEnv(fs)); err != nil {
		return err
	}
	sources, err := savedConnections(g)
	if err != nil {
		return err
	}
	for _, c := range sources {
		saved := [][2]string{{flagPool, c.Pool}, {flagEtcd, strings.Join(c.Etcd, ",")}, {flagNATS, c.NATSURL}}
		for _, name := range securityFlagNames {
			saved = append(saved, [2]string{name, c.Security[name]})
		}
		for _, kv := range saved {
			name, v := kv[0], kv[1]
			if v == "" || fs.Lookup(name) == nil || isSet(fs, name) {
				continue
			}
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("%s from a saved context: %w", name, err)
			}
		}
	}
	return nil
}

// savedConnections returns the state file's settings and the context
// file's, in that order (each only when given or, for the default
// context, present).
func savedConnections(g globals) ([]connection, error) {
	stateFile, contextFile, explicit := g[flagStateFile], g[flagContext], true
	if v, ok := os.LookupEnv(cmdline.EnvName(flagStateFile)); ok && stateFile == "" {
		stateFile = v
	}
	if v, ok := os.LookupEnv(cmdline.EnvName(flagContext)); ok && contextFile == "" {
		contextFile = v
	}
	if contextFile == "" {
		contextFile, explicit = defaultContextPath(), false
	}
	var out []connection
	if stateFile != "" {
		c, err := readStateFile(stateFile)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if contextFile != "" {
		c, err := readContext(contextFile, explicit)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// isSet reports whether the flag name of fs was set.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
