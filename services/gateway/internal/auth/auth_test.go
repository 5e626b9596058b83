package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys([]byte("# team keys\nalpha sk-alpha\nbeta sk-beta 2.5  # slow\n\ngamma sk-gamma 10 40\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0] != (Key{Name: "alpha", Secret: "sk-alpha"}) || keys[1] != (Key{Name: "beta", Secret: "sk-beta", RPS: 2.5, Burst: 3}) ||
		keys[2] != (Key{Name: "gamma", Secret: "sk-gamma", RPS: 10, Burst: 40}) {
		t.Errorf("keys %+v", keys)
	}
	for _, bad := range []string{"", "# nothing\n", "alpha", "a s 1 2 3", "a s x", "a s -1", "a s 1 0", "a s\na t", "a s\nb s"} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
	if _, err := ParseKeys([]byte("a s 1 x")); err == nil || !strings.Contains(err.Error(), "line 1: burst") {
		t.Errorf("error does not name the line and field: %v", err)
	}
}

func TestGuard(t *testing.T) {
	var seenAuth []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenAuth = append(seenAuth, r.Header.Get("Authorization"))
	})
	g := NewGuard([]Key{{Name: "a", Secret: "sk-a"}, {Name: "slow", Secret: "sk-slow", RPS: 0.001, Burst: 2}}, nil)
	h := g.Wrap(next)
	do := func(auth string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer", 401}, {"Bearer sk-b", 401}, {"Basic sk-a", 401}, {"Bearer sk-a", 200}, {"bearer  sk-a", 200}, {"Bearer sk-slow", 200}, {"Bearer sk-slow", 200}, {"Bearer sk-slow", 429}, {"Bearer sk-a", 200}} {
		w := do(c.auth)
		if w.Code != c.code {
			t.Errorf("%q: %d, want %d (%s)", c.auth, w.Code, c.code, w.Body.String())
		}
		if c.code == 429 && w.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		if c.code == 401 && !strings.Contains(w.Body.String(), "invalid_api_key") {
			t.Errorf("401 body %s", w.Body.String())
		}
	}
	for _, a := range seenAuth {
		if a != "" {
			t.Errorf("the key reached the upstream handler: %q", a)
		}
	}
}

// TestAnthropicKeys: Anthropic's clients present their key as x-api-key;
// it is accepted where a bearer token is, never reaches the model server,
// and a refusal on /v1/messages is written in Anthropic's error shape.
func TestAnthropicKeys(t *testing.T) {
	var leaked []string
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(APIKeyHeader); v != "" {
			leaked = append(leaked, v)
		}
	})
	h := NewGuard([]Key{{Name: "a", Secret: "sk-a"}, {Name: "b", Secret: "sk-b"}}, nil).Wrap(next)
	do := func(path string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		header []string
		code   int
	}{
		{[]string{"x-api-key", "sk-a"}, 200},
		{[]string{"X-Api-Key", " sk-b "}, 200},
		{[]string{"x-api-key", "sk-c"}, 401},
		{[]string{"x-api-key", ""}, 401},
		// A request presenting both is judged by its bearer token alone.
		{[]string{"Authorization", "Bearer sk-c", "x-api-key", "sk-a"}, 401},
		{[]string{"Authorization", "Bearer sk-a", "x-api-key", "sk-c"}, 200},
	} {
		if w := do("/v1/messages", c.header...); w.Code != c.code {
			t.Errorf("%q: %d, want %d (%s)", c.header, w.Code, c.code, w.Body.String())
		}
	}
	if len(leaked) != 0 {
		t.Errorf("x-api-key reached the upstream handler: %q", leaked)
	}
	w := do("/v1/messages", "x-api-key", "sk-nope")
	if body := w.Body.String(); !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"authentication_error"`) {
		t.Errorf("refusal on /v1/messages is not in Anthropic's shape: %s", body)
	}
	w = do("/v1/chat/completions", "x-api-key", "sk-nope")
	if body := w.Body.String(); strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "invalid_api_key") {
		t.Errorf("refusal on /v1/chat/completions is not in OpenAI's shape: %s", body)
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "proxy.local", "10.0.0.1:80"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if p, err := ParseTrustedProxies(" ::1 , 10.1.2.3/16,"); err != nil || len(p) != 2 || p[1].String() != "10.1.0.0/16" {
		t.Fatalf("%v %v", p, err)
	}
}

func TestPrincipals(t *testing.T) {
	var got []string
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, Principal(r.Context())+"|"+r.Header.Get(TenantHeader))
	})
	keyed := NewGuard([]Key{{Name: "alice", Secret: "sk-a"}}, nil).Wrap(next)
	proxies, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	open := Tenants(TenantTrust{Proxies: proxies}, next)
	untrusting := Tenants(TenantTrust{}, next)
	for _, c := range []struct {
		h                   http.Handler
		key, tenant, remote string
	}{
		{keyed, "sk-a", "", ""}, {keyed, "sk-a", "bob", ""},
		{open, "", "bob", "10.1.2.3:5000"}, {open, "", "", "10.1.2.3:5000"},
		{open, "", "carol", "192.168.1.7:1"}, {open, "", "mallory", "192.168.1.8:1"}, {open, "", "mallory", "[::ffff:10.0.0.1]:1"},
		{untrusting, "", "bob", "10.1.2.3:5000"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/responses/x", nil)
		if c.remote != "" {
			r.RemoteAddr = c.remote
		}
		if c.key != "" {
			r.Header.Set("Authorization", "Bearer "+c.key)
		}
		if c.tenant != "" {
			r.Header.Set(TenantHeader, c.tenant)
		}
		c.h.ServeHTTP(httptest.NewRecorder(), r)
	}
	// a key's name wins over a tenant header, which never reaches
	// upstream; without keys the header counts only from a trusted proxy
	// (an IPv4-mapped address is the IPv4 one)
	want := []string{"alice|", "alice|", "bob|", "|", "carol|", "|", "mallory|", "|"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("principals %q, want %q", got, want)
	}
}
