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
		var cases strings.Builder
		for _, c := range cmds {
			fmt.Fprintf(&cases, "\t\t%s) words=%q ;;\n", c, strings.Join(verbs[c], " "))
		}
		fmt.Fprintf(stdout, bashScript, flags, strings.Join(append(cmds, "completion", "version"), " "), cases.String())
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

// bashScript completes global flags, commands and verbs; the global flags
// take a value, which is not a command word.
const bashScript = `_hermodctl() {
	local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" sub="" skip="" i w words
	for ((i = 1; i < COMP_CWORD; i++)); do
		w="${COMP_WORDS[i]}"
		if [[ -n $skip ]]; then skip=""; continue; fi
		case "$w" in
		--*=*) continue ;;
		-*) skip=1; continue ;;
		esac
		if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi
	done
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "%s" -- "$cur"))
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
