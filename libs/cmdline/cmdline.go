// Package cmdline holds the command-line conventions every Hermod binary
// shares: each flag may also be set by the environment variable
// HERMOD_<FLAG> (upper case, dashes as underscores; the command line wins),
// the common flags (-v, --log-format, --otlp-endpoint), list-valued flags,
// and a context that ends on SIGINT or SIGTERM.
package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hermod/hermod/libs/telemetry"
)

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "HERMOD_"

// EnvName returns the environment variable that sets a flag.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets every flag of fs for which include returns true (every flag
// when include is nil) from its environment variable, if set, unless the
// flag was already set (by the command line, which wins). Call it after
// fs.Parse.
func ApplyEnv(fs *flag.FlagSet, include func(name string) bool) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || (include != nil && !include(f.Name)) {
			return
		}
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Parse parses args, then sets the flags the command line left alone from
// the environment.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return ApplyEnv(fs, nil)
}

// Common are the flags of every service.
type Common struct {
	// Verbosity is -v: klog-style 0..5 (4 = per-request plugin logs).
	Verbosity int
	// LogFormat is --log-format: json (services' default) or text.
	LogFormat string
	// OTLPEndpoint is --otlp-endpoint: where traces go (host:port of an
	// OTLP gRPC collector); empty = traces are propagated but not exported.
	OTLPEndpoint string
}

// Register adds the common flags to fs.
func (c *Common) Register(fs *flag.FlagSet) {
	fs.IntVar(&c.Verbosity, "v", 0, "log verbosity 0..5 (4: per-request plugin logs)")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC endpoint (host:port) to export traces to; empty: no export")
}

// Logger returns the logger the common flags ask for, writing to w.
func (c *Common) Logger(w io.Writer) (*slog.Logger, error) {
	return telemetry.NewLogger(w, telemetry.LogFormat(c.LogFormat), c.Verbosity)
}

// List is a flag holding a list of strings, given comma-separated or by
// repeating the flag.
type List []string

// String implements flag.Value.
func (l *List) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value: it appends the comma-separated values.
func (l *List) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	*l = append(*l, out...)
	return nil
}

// Run is a command's body: it parses fs from args (then the HERMOD_*
// environment), builds the logger common's flags ask for, and runs run
// under a context SIGINT and SIGTERM cancel. common's flags must be
// registered on fs.
func Run(fs *flag.FlagSet, args []string, common *Common, run func(ctx context.Context, log *slog.Logger) error) error {
	if err := Parse(fs, args); err != nil {
		return err
	}
	log, err := common.Logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return run(ctx, log)
}

// Or returns the list, or def when it is empty.
func (l List) Or(def ...string) []string {
	if len(l) == 0 {
		return def
	}
	return l
}

// SignalContext returns a context canceled on SIGINT or SIGTERM; stop
// releases the signal handlers.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// Main runs a binary's run function and exits: 0 when it returns nil or
// flag.ErrHelp (-h printed the usage), 1 with "name: error" on stderr
// otherwise. With --version (or -version, or version) as its only
// argument, it prints the build's version instead.
func Main(name string, run func() error) {
	if PrintVersion(name, os.Args[1:], os.Stdout) {
		os.Exit(0)
	}
	err := run()
	if err == nil || errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}

// PrintVersion prints "name version (commit ..., time, go)" to w and
// reports true when args ask for the version alone: --version, -version
// or version.
func PrintVersion(name string, args []string, w io.Writer) bool {
	if len(args) != 1 {
		return false
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintf(w, "%s %s\n", name, telemetry.BuildInfo())
		return true
	}
	return false
}
