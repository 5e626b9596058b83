package cmdline

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestEnvSetsWhatTheCommandLineLeavesAlone(t *testing.T) {
	t.Setenv("HERMOD_NATS_URL", "nats://env:4222")
	t.Setenv("HERMOD_POOL", "from-env")
	t.Setenv("HERMOD_ETCD_ENDPOINTS", "a:1, b:2")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	natsURL := fs.String("nats-url", "nats://default:4222", "")
	pool := fs.String("pool", "default", "")
	var etcd List
	fs.Var(&etcd, "etcd-endpoints", "")
	if err := Parse(fs, []string{"--pool", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if *natsURL != "nats://env:4222" || *pool != "from-flag" || !slices.Equal(etcd, List{"a:1", "b:2"}) {
		t.Errorf("nats %q pool %q etcd %v", *natsURL, *pool, etcd)
	}
}

func TestBadEnvValueNamesTheVariable(t *testing.T) {
	t.Setenv("HERMOD_REPLAY_WINDOW", "soon")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("replay-window", 0, "")
	err := Parse(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "HERMOD_REPLAY_WINDOW") {
		t.Fatalf("err = %v", err)
	}
}

func TestListRepeatsAndSplits(t *testing.T) {
	var l List
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Var(&l, "e", "")
	if err := fs.Parse([]string{"-e", "a,b", "-e", "c", "-e", " "}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l, List{"a", "b", "c"}) || l.String() != "a,b,c" {
		t.Errorf("list = %v", l)
	}
}

func TestCommonLogger(t *testing.T) {
	c := Common{LogFormat: "yaml"}
	if _, err := c.Logger(io.Discard); err == nil {
		t.Error("log format yaml accepted")
	}
	c.LogFormat = "text"
	if _, err := c.Logger(io.Discard); err != nil {
		t.Error(err)
	}
}
