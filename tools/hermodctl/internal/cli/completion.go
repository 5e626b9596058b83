package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// completion prints hermodctl's completion script for shell: bash, zsh
// (through bashcompinit) or fish. The commands come from the command
// table, so the scripts follow it.
func completion(shell string, stdout, stderr io.Writer) int {
	cmds, verbs := commandWords()
	flags := "--" + strings.Join(globalFlagNames, " --")
	switch shell {
	case "bash", "zsh":
		if shell == "zsh" {
			fmt.Fprintln(stdout, "autoload -U +X bashcompinit && bashcompinit")
		}
		var cases, outputs strings.Builder
		for _, c := range cmds {
			fmt.Fprintf(&cases, "\t\t%s) words=%q ;;\n", c, strings.Join(verbs[c], " "))
		}
		for _, c := range outputCommands() {
			fmt.Fprintf(&outputs, "\t\t%q) formats=%q ;;\n", c.name, strings.Join(c.formats, " "))
		}
		fmt.Fprintf(stdout, bashScript, outputs.String(), flags, strings.Join(append(cmds, "completion", "version"), " "), cases.String())
	case "fish":
		fmt.Fprintf(stdout, "complete -c hermodctl -f\n")
		for _, f := range globalFlagNames {
			fmt.Fprintf(stdout, "complete -c hermodctl -l %s -r\n", f)
		}
		fmt.Fprintf(stdout, "complete -c hermodctl -n __fish_use_subcommand -a %q\n", strings.Join(append(cmds, "completion", "version"), " "))
		for _, c := range cmds {
			fmt.Fprintf(stdout, "complete -c hermodctl -n '__fish_seen_subcommand_from %s' -a %q\n", c, strings.Join(verbs[c], " "))
		}
		fmt.Fprintf(stdout, "complete -c hermodctl -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
		for _, c := range outputCommands() {
			cond := "__fish_seen_subcommand_from " + c.name
			if g, v, ok := strings.Cut(c.name, " "); ok {
				cond = "__fish_seen_subcommand_from " + g + "; and __fish_seen_subcommand_from " + v
			}
			fmt.Fprintf(stdout, "complete -c hermodctl -n '%s' -s o -l output -x -a %q\n", cond, strings.Join(c.formats, " "))
		}
	default:
		fmt.Fprintf(stderr, "hermodctl completion: %q is not a shell this command knows (bash, zsh or fish)\n", shell)
		return ExitUsage
	}
	return ExitOK
}

// commandWords returns the command groups, sorted, and each one's verbs.
func commandWords() ([]string, map[string][]string) {
	var cmds []string
	verbs := map[string][]string{}
	for g, vs := range groups {
		cmds = append(cmds, g)
		for v := range vs {
			verbs[g] = append(verbs[g], v)
		}
		sort.Strings(verbs[g])
	}
	sort.Strings(cmds)
	return cmds, verbs
}

// outputCommand is a command with -o, as completion names it ("config
// get", "version"), and its formats.
type outputCommand struct {
	name    string
	formats []string
}

// outputCommands returns the commands that take -o, sorted, version last.
func outputCommands() []outputCommand {
	var out []outputCommand
	for g, verbs := range groups {
		for v, c := range verbs {
			if c.output != nil {
				out = append(out, outputCommand{name: g + " " + v, formats: c.output})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return append(out, outputCommand{name: "version", formats: readFormats})
}

// bashScript completes global flags, commands and verbs, and the -o flag
// and its formats for the commands that take it; the global flags take a
// value, which is not a command word.
const bashScript = `_hermodctl() {
	local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" sub="" skip="" i w words formats=""
	for ((i = 1; i < COMP_CWORD; i++)); do
		w="${COMP_WORDS[i]}"
		if [[ -n $skip ]]; then skip=""; continue; fi
		case "$w" in
		--*=*) continue ;;
		-*) skip=1; continue ;;
		esac
		if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi
	done
	case "$cmd${sub:+ $sub}" in
%s	esac
	if [[ -n $formats && ( $prev == -o || $prev == -output || $prev == --output ) ]]; then
		COMPREPLY=($(compgen -W "$formats" -- "$cur"))
		return
	fi
	if [[ $cur == -* ]]; then
		words="%s"
		[[ -n $formats ]] && words+=" -o --output"
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
		return
	fi
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "%s" -- "$cur"))
		return
	fi
	[[ -n $sub ]] && return
	case "$cmd" in
	completion) words="bash zsh fish" ;;
%s	*) words="" ;;
	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _hermodctl hermodctl
`
