package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplitGlobals(t *testing.T) {
	g, rest, err := splitGlobals([]string{"--etcd-endpoints", "a:1", "config", "--pool=p", "get", "--nats-url", "n"})
	if err != nil || g[flagEtcd] != "a:1" || g[flagPool] != "p" || strings.Join(rest, " ") != "config get --nats-url n" {
		t.Fatalf("globals %v rest %v err %v", g, rest, err)
	}
	// A command without verbs takes the flags after it.
	g, rest, err = splitGlobals([]string{"--pool", "p", "version", "-o", "json"})
	if err != nil || g[flagPool] != "p" || strings.Join(rest, " ") != "version -o json" {
		t.Fatalf("version: globals %v rest %v err %v", g, rest, err)
	}
	for _, args := range [][]string{{"--bogus", "config", "get"}, {"--pool"}} {
		if _, _, err := splitGlobals(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// Global flags work before the command, a state file and a context file
// fill what the command line leaves, in that order, and the command
// line wins over both.
func TestGlobalFlagsAndSavedContexts(t *testing.T) {
	s := newStores(t)
	put := writeFile(t, "plugins: [{type: queue-scorer}]\n")
	if _, errs, code := run(append(append([]string{"config", "set"}, s.flags("--wait", "0")...), put)...); code != ExitOK {
		t.Fatalf("set: %s", errs)
	}
	if out, errs, code := run("--etcd-endpoints", s.etcd, "--pool", s.pool, "config", "get"); code != ExitOK || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("global flags before the command: %d %q %q", code, out, errs)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(`{"pool":"`+s.pool+`","etcd_endpoints":["`+s.etcd+`"],"nats_url":"`+s.nats+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := run("--state-file", state, "config", "get"); code != ExitOK || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("--state-file: %d %q %q", code, out, errs)
	}
	ctxFile := filepath.Join(dir, "context")
	if err := os.WriteFile(ctxFile, []byte("pool: "+s.pool+"\netcd-endpoints: ["+s.etcd+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMOD_CONTEXT", ctxFile)
	if out, errs, code := run("config", "get"); code != ExitOK || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("context file: %d %q %q", code, out, errs)
	}
	// the command line wins: another pool has no config
	if _, errs, code := run("config", "get", "--pool", "other-pool"); code != ExitFailure || !strings.Contains(errs, "has no config") {
		t.Fatalf("the command line over the context: %d %q", code, errs)
	}
	if err := os.WriteFile(ctxFile, []byte("pool: p\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run("config", "get"); code != ExitUsage || !strings.Contains(errs, "bogus") {
		t.Fatalf("a context file with an unknown field: %d %q", code, errs)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out, _, code := run(args...); code != ExitOK || !strings.HasPrefix(out, "hermodctl ") {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out, _, code := run("completion", sh); code != ExitOK || !strings.Contains(out, "autoscaler") {
			t.Errorf("completion %s: %d", sh, code)
		}
	}
	if _, _, code := run("completion", "tcsh"); code != ExitUsage {
		t.Errorf("completion tcsh: %d", code)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, _, _ := run("completion", "bash")
	// complete "hermodctl --pool p config g" and "hermodctl au"
	probe := script + `
COMP_WORDS=(hermodctl --pool p config g); COMP_CWORD=4; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl au); COMP_CWORD=1; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl config get -o ""); COMP_CWORD=4; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl --pool p autoscaler status --output j); COMP_CWORD=6; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl endpoints list --o); COMP_CWORD=3; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl config set --o); COMP_CWORD=3; _hermodctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(hermodctl version -o y); COMP_CWORD=3; _hermodctl; echo "${COMPREPLY[*]}"
`
	out, err := exec.Command(bash, "-c", probe).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := []string{"get", "audit autoscaler", "raw json yaml", "json", "--output", "", "yaml"}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("completions %q, want %q", got, want)
	}
	fish, _, _ := run("completion", "fish")
	if !strings.Contains(fish, "'__fish_seen_subcommand_from config; and __fish_seen_subcommand_from get' -s o -l output -x -a \"raw json yaml\"") {
		t.Errorf("fish does not complete config get's -o:\n%s", fish)
	}
}

// A devstack --tls state file's security section gives the security
// flags by name.
func TestStateFileSecurity(t *testing.T) {
	state := writeFile(t, `{"pool":"p","etcd_endpoints":["https://127.0.0.1:1"],"nats_url":"tls://127.0.0.1:2",
"security":{"etcd-ca-file":"/tls/ca.crt","etcd-username":"hermod","nats-password-file":"/tls/nats-password"},"tls":{"ca_file":"/tls/ca.crt"}}`)
	c, err := readStateFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if c.Security["etcd-ca-file"] != "/tls/ca.crt" || c.Security["etcd-username"] != "hermod" || c.Security["nats-password-file"] != "/tls/nats-password" || c.NATSURL != "tls://127.0.0.1:2" {
		t.Errorf("read %+v", c)
	}
}
