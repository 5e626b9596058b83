package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

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

// parse parses args (flags, then HERMOD_<FLAG>). valid checks the parsed
// values given the number of arguments left (nil: none may be left). ok
// is false, with the exit code, when the subcommand is to stop: help was
// asked, or the flags or arguments are not valid (the usage is printed).
func (c *subcommand) parse(args []string, valid func(nargs int) bool) (ok bool, code int) {
	if err := c.fs.Parse(args); err != nil {
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
	if !valid(c.fs.NArg()) {
		c.fs.Usage()
		return false, ExitUsage
	}
	return true, ExitOK
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
