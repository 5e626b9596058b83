package bootstrap

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/testkit/redistest"
)

// ValkeySecurity against a real redis-server that speaks TLS only,
// verifies client certificates and has an ACL user: the right files and
// password get in; a missing certificate, a wrong password, a password in
// the URL and skip_verify do not.
func TestValkeyTLSAndCredentials(t *testing.T) {
	p := newPKI(t)
	srv := redistest.StartTLS(t, redistest.TLS{CertFile: p.server.Cert, KeyFile: p.server.Key, CAFile: p.caFile, AuthClients: true},
		"--user", "default", "off", "--user", "picker", "on", ">s3cret", "~*", "&*", "+@all")
	url := "rediss://" + srv.Addr()
	t.Cleanup(waitValkeyRetries)
	good := writeSecret(t, "password", "s3cret")
	bad := writeSecret(t, "wrong", "nope")

	parse := func(t *testing.T, args ...string) ValkeySecurity {
		t.Helper()
		var v ValkeySecurity
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v.RegisterFlags(fs, "inflight-valkey", "the in-flight server")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return v
	}
	ping := func(v ValkeySecurity, url string) error {
		opt, err := v.ClientOption(url)
		if err != nil {
			return err
		}
		opt.DisableCache = true
		opt.Dialer.Timeout = 2 * time.Second
		c, err := valkey.NewClient(opt)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return c.Do(ctx, c.B().Ping().Build()).Error()
	}
	files := []string{"--inflight-valkey-ca-file", p.caFile, "--inflight-valkey-cert-file", p.client.Cert, "--inflight-valkey-key-file", p.client.Key}

	for _, tc := range []struct {
		name string
		args []string
		env  string
		url  string
		err  string // "" = the PING answers; "*" = any error
	}{
		{name: "certificate, user and password file", args: append([]string{"--inflight-valkey-username", "picker", "--inflight-valkey-password-file", good}, files...)},
		{name: "password from the environment", args: append([]string{"--inflight-valkey-username", "picker"}, files...), env: "s3cret"},
		{name: "wrong password", args: append([]string{"--inflight-valkey-username", "picker", "--inflight-valkey-password-file", bad}, files...), err: "WRONGPASS"},
		{name: "no client certificate", args: []string{"--inflight-valkey-ca-file", p.caFile, "--inflight-valkey-username", "picker", "--inflight-valkey-password-file", good}, err: "*"}, // the server resets the handshake
		{name: "a password in the URL", args: files, url: "rediss://picker:s3cret@" + srv.Addr(), err: "a password in the URL"},
		{name: "skip_verify", args: []string{"--inflight-valkey-username", "picker"}, url: url + "?skip_verify=true", err: "skip_verify is not allowed"},
		{name: "both a file and the variable", args: []string{"--inflight-valkey-password-file", good}, env: "s3cret", err: "both --inflight-valkey-password-file and HERMOD_INFLIGHT_VALKEY_PASSWORD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("HERMOD_INFLIGHT_VALKEY_PASSWORD", tc.env)
			}
			u := url
			if tc.url != "" {
				u = tc.url
			}
			err := ping(parse(t, tc.args...), u)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("PING: %v", err)
			case tc.err == "*" && err == nil:
				t.Fatal("PING answered")
			case tc.err != "" && tc.err != "*" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
	if got := fmt.Sprint((&ValkeySecurity{Prefix: "index-redis"}).PasswordEnv()); got != "HERMOD_INDEX_REDIS_PASSWORD" {
		t.Errorf("PasswordEnv = %s", got)
	}
}

// waitValkeyRetries waits (up to 3 s) for valkey-go's retry timers of the
// failed dials to run out: each is a goroutine sleeping out its backoff
// after NewClient has returned.
func waitValkeyRetries() {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "valkey-go.(*call).DelayDo") {
			return
		}
	}
}
