// Package cli implements hermodctl's commands. Run is main without the
// process: tests call it with their own arguments and writers.
package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and found a problem (invalid config)
	ExitUsage   = 2 // the command line is wrong
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// output lists the formats of the command's -o (--output) flag; nil
	// when it has none. Completion offers them.
	output []string
}

// groups maps "group verb" to commands.
var groups = map[string]map[string]command{
	"config": {
		"validate": {summary: "check EndpointPickerConfig files and print the config each runs as (llm-d.ai layout)", run: configValidate, output: validateFormats},
		"convert":  {summary: "rewrite EndpointPickerConfig files in the llm-d.ai/v1alpha1 (v0.9+) layout", run: configConvert, output: convertFormats},
		"get":      {summary: "print the pool's EndpointPickerConfig stored in etcd", run: configGet, output: configGetFormats},
		"set":      {summary: "validate a config and store it for the pool (pickers reload it)", run: configSet},
	},
	"endpoints": {
		"list":       {summary: "list the pool's endpoints with their latest metrics", run: endpointsList, output: readFormats},
		"register":   {summary: "register a model server Hermod did not start (a VM, bare metal, Slurm)", run: endpointsRegister},
		"deregister": {summary: "remove an endpoint from the pool's registry", run: endpointsDeregister},
	},
	"autoscaler": {
		"apply":  {summary: "store VariantAutoscaling objects and ConfigMaps for the pool's autoscaler", run: autoscalerApply},
		"get":    {summary: "list the pool's variants with their targets and status, or print one", run: autoscalerGet, output: readFormats},
		"delete": {summary: "delete a VariantAutoscaling (or an applied ConfigMap)", run: autoscalerDelete},
		"status": {summary: "show the autoscaler's leader and its latest scaling decisions", run: autoscalerStatus, output: readFormats},
	},
	"audit": {
		"tail":   {summary: "follow the pool's routing decisions", run: auditTail, output: readFormats},
		"replay": {summary: "print the routing decisions stored since a time", run: auditReplay, output: readFormats},
	},
}

// Run runs hermodctl with args (without the program name) and returns the
// exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g, args, err := splitGlobals(args)
	if err != nil {
		fmt.Fprintf(stderr, "hermodctl: %v\n\n", err)
		usage(stderr)
		return ExitUsage
	}
	ctx = withGlobals(ctx, g)
	if len(args) > 0 && isVersion(args[0]) {
		return version(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 2 && args[0] == "completion" {
		return completion(args[1], stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return ExitOK
	}
	group, ok := groups[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hermodctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return ExitUsage
	}
	if len(args) < 2 {
		fmt.Fprintf(stderr, "hermodctl %s: missing subcommand\n\n", args[0])
		usage(stderr)
		return ExitUsage
	}
	cmd, ok := group[args[1]]
	if !ok {
		fmt.Fprintf(stderr, "hermodctl %s: unknown subcommand %q\n\n", args[0], args[1])
		usage(stderr)
		return ExitUsage
	}
	return cmd.run(ctx, args[2:], stdout, stderr)
}

func usage(w io.Writer) {
	var lines []string
	for g, verbs := range groups {
		for v, c := range verbs {
			lines = append(lines, fmt.Sprintf("  %-24s %s", g+" "+v, c.summary))
		}
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("  %-24s %s", "completion bash|zsh|fish", "print a shell completion script"), fmt.Sprintf("  %-24s %s", "version", "print hermodctl's version and build"))
	fmt.Fprintf(w, "Usage: hermodctl [global flags] <command> [flags] [args]\n\nCommands:\n%s\n\n"+
		"Global flags (before or after the command): --pool, --etcd-endpoints, --nats-url, --state-file FILE (a devstack's\n"+
		"state file) and --context FILE (default ~/.config/hermod/context: YAML with pool, etcd-endpoints, nats-url).\n"+
		"Read commands (get, list, status, tail, replay, validate, version) take -o/--output FORMAT as kubectl does:\n"+
		"table (the default), json or yaml; config get prints raw (the stored document) by default, config\n"+
		"validate yaml (or none). HERMOD_OUTPUT sets a default format. A command's flags may come before or after\n"+
		"its arguments. Run hermodctl <command> -h for a command's flags.\n", strings.Join(lines, "\n"))
}
