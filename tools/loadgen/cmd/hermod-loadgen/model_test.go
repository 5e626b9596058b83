package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Without --model the first model the gateway lists is used; a gateway
// that lists none, or answers an error, is a clear error.
func TestServedModel(t *testing.T) {
	for body, want := range map[string]string{
		`{"object":"list","data":[{"id":"llama"},{"id":"lora"}]}`: "llama",
		`{"object":"list","data":[]}`:                             "serves no model",
		`not json`:                                                "GET",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(body))
		}))
		got, err := servedModel(srv.URL+"/", "k")
		srv.Close()
		if (err == nil && got != want) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %q, %v; want %q", body, got, err, want)
		}
	}
}
