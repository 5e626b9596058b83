package bootstrap

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpsToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
	get := func(h http.Handler, path, token string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := get(start(t, Options{Config: Config{Pool: "p"}}).Ops(ok), "/metrics", ""); code != http.StatusOK {
		t.Fatalf("no token configured: %d", code)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Config: Config{Pool: "p", OpsTokenFile: file}}).Ops(ok)
	if get(h, "/metrics", "") != http.StatusUnauthorized || get(h, "/metrics", "tok-1") != http.StatusOK || get(h, "/health", "") != http.StatusOK {
		t.Fatal("the ops token file is not applied")
	}
	t.Setenv("HERMOD_OPS_TOKEN", "tok-2")
	if get(start(t, Options{Config: Config{Pool: "p"}}).Ops(ok), "/metrics", "tok-2") != http.StatusOK {
		t.Fatal("HERMOD_OPS_TOKEN is not applied")
	}
	_, err := Start(t.Context(), Options{Name: "x", Config: Config{Pool: "p", OpsTokenFile: file}})
	if err == nil || !strings.Contains(err.Error(), "ops token") && !strings.Contains(err.Error(), "--ops-token-file") {
		t.Fatalf("a token in both the file and the environment: %v", err)
	}
}
