package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/coord"
)

// The connection flags a subcommand takes besides --pool.
const (
	withEtcd = 1 << iota
	withNATS
)

// subcommand is one subcommand being run: its flags (--pool and the connection flags
// it takes among them), its usage, and how it fails.
type subcommand struct {
	ctx    context.Context
	name   string
	fs     *flag.FlagSet
	t      target
	stderr io.Writer
	// args are the arguments left after the flags.
	args []string
}

// newSubcommand declares a subcommand's flag set, writing to stderr, with
// --pool and the connection flags of with (withEtcd, withNATS); ctx
// carries the global flags.
func newSubcommand(ctx context.Context, name string, stderr io.Writer, with int) *subcommand {
	c := &subcommand{ctx: ctx, name: name, fs: flag.NewFlagSet(name, flag.ContinueOnError), stderr: stderr}
	c.fs.SetOutput(stderr)
	c.t.registerPool(c.fs)
	if with&withEtcd != 0 {
		c.t.registerEtcd(c.fs)
	}
	if with&withNATS != 0 {
		c.t.registerNATS(c.fs)
	}
	return c
}

// usage sets what -h prints before the flags: the synopsis and the
// description (a format and its arguments).
func (c *subcommand) usage(format string, args ...any) {
	c.fs.Usage = func() {
		fmt.Fprintf(c.stderr, format, args...)
		c.fs.PrintDefaults()
	}
}

// output declares the subcommand's -o and --output flags (registerOutput).
func (c *subcommand) output(def string, formats []string, aliases map[string]string, help string) *outputFlag {
	return registerOutput(c.fs, def, formats, aliases, help)
}

// parse parses args (flags, in any order with the arguments, then the
// global flags, HERMOD_<FLAG> and the saved settings). valid checks the
// parsed values given the number of arguments left (nil: none may be
// left). ok is false, with the exit code, when the subcommand is to stop:
// help was asked, or the flags or arguments are not valid (the usage is
// printed).
func (c *subcommand) parse(args []string, valid func(nargs int) bool) (ok bool, code int) {
	var err error
	if c.args, err = parseFlags(c.fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, ExitOK
		}
		return false, ExitUsage
	}
	if err := applySettings(c.ctx, c.fs); err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
		return false, ExitUsage
	}
	if valid == nil {
		valid = func(n int) bool { return n == 0 }
	}
	if !valid(len(c.args)) {
		c.fs.Usage()
		return false, ExitUsage
	}
	return true, ExitOK
}

// parseLocal parses the flags of a command that does not connect (config
// validate, version) as subcommand.parse does, then HERMOD_<FLAG>. It
// returns the arguments left, or ok false with the exit code when the
// command is to stop (help was asked, or a flag is wrong: said on stderr).
func parseLocal(fs *flag.FlagSet, args []string, stderr io.Writer) (rest []string, ok bool, code int) {
	rest, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, false, ExitOK
	}
	if err != nil {
		return nil, false, ExitUsage // the flag package said why, with the usage
	}
	if err := cmdline.ApplyEnv(fs, outputEnv(fs)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return nil, false, ExitUsage
	}
	return rest, true, ExitOK
}

// arg returns the argument i left after the flags, "" if there is none.
func (c *subcommand) arg(i int) string {
	if i >= len(c.args) {
		return ""
	}
	return c.args[i]
}

// validPool checks --pool; false when it is not a pool name (said on
// stderr).
func (c *subcommand) validPool() bool {
	if err := coord.ValidatePoolName(c.t.pool); err != nil {
		fmt.Fprintf(c.stderr, "%s: --pool: %v\n", c.name, err)
		return false
	}
	return true
}

// fail says err on stderr and returns ExitFailure.
func (c *subcommand) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return ExitFailure
}
