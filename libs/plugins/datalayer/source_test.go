package datalayer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

const modelsBody = `{"object":"list","data":[{"id":"base","object":"model","root":"base","parent":null},{"id":"lora-a","object":"model","root":"/a","parent":"base"}]}`

var wantModels = []Model{{ID: "base", Root: "base"}, {ID: "lora-a", Root: "/a", Parent: "base"}}

// pod is a model server serving a model list at path; other paths are 404.
func pod(t *testing.T, tlsServer bool, path string, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	if handler == nil {
		handler = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(modelsBody))
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, handler)
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(mux) // a self-signed certificate
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv
}

// endpointOf returns the scheduling endpoint of a test server.
func endpointOf(t *testing.T, srv *httptest.Server) *scheduling.Endpoint {
	t.Helper()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return scheduling.NewEndpoint("pod", host, p, nil)
}

func source(t *testing.T, p ModelsParams) *ModelsSource {
	t.Helper()
	s, err := NewModelsSource("", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestFetch(t *testing.T) {
	tests := []struct {
		name   string
		tls    bool
		path   string
		params ModelsParams
	}{
		{"defaults", false, "/v1/models", DefaultModelsParams()},
		{"custom path", false, "/custom/models", ModelsParams{Scheme: "http", Path: "/custom/models"}},
		{"https, self-signed, insecureSkipVerify", true, "/v1/models", ModelsParams{Scheme: "https", Path: "/v1/models", InsecureSkipVerify: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var accept string
			srv := pod(t, tc.tls, tc.path, func(w http.ResponseWriter, r *http.Request) {
				accept = r.Header.Get("Accept")
				_, _ = w.Write([]byte(modelsBody))
			})
			s := source(t, tc.params)
			ep := endpointOf(t, srv)
			if got, want := s.URL(ep), tc.params.Scheme+"://"+ep.HostPort()+tc.path; got != want {
				t.Errorf("URL %s, want %s", got, want)
			}
			data, err := s.Fetch(context.Background(), ep)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(data, wantModels) {
				t.Errorf("fetched %#v, want %#v", data, wantModels)
			}
			if accept != "application/json" {
				t.Errorf("Accept %q", accept)
			}
		})
	}
}

func TestFetchHTTPSVerified(t *testing.T) {
	srv := pod(t, true, "/v1/models", nil)
	s := source(t, ModelsParams{Scheme: "https", Path: "/v1/models", InsecureSkipVerify: false})
	_, err := s.Fetch(context.Background(), endpointOf(t, srv))
	var cv *tls.CertificateVerificationError
	if err == nil || !errors.As(err, &cv) ||
		!strings.Contains(err.Error(), "the endpoint's TLS certificate does not verify against the system's roots (insecureSkipVerify is false; set it to true to skip the check)") {
		t.Fatalf("error %v", err)
	}
	if !strings.HasPrefix(err.Error(), "GET https://"+endpointOf(t, srv).HostPort()+"/v1/models: ") {
		t.Errorf("error does not name the URL: %v", err)
	}
}

func TestFetchErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedEP := endpointOf(t, closed)
	closed.Close()
	plain := pod(t, false, "/v1/models", nil)
	secure := pod(t, true, "/v1/models", nil)
	serve := func(status int, body string) *scheduling.Endpoint {
		return endpointOf(t, pod(t, false, "/v1/models", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
	}
	slow := endpointOf(t, pod(t, false, "/v1/models", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	elsewhere := pod(t, false, "/v1/models", nil)
	redirect := endpointOf(t, pod(t, false, "/v1/models", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/v1/models", http.StatusFound)
	}))
	trailing := pod(t, false, "/v1/models", nil)
	trailing.Config.Handler.(*http.ServeMux).Handle("GET /models", http.RedirectHandler("/v1/models", http.StatusMovedPermanently))

	httpSrc := source(t, DefaultModelsParams())
	httpsSrc := source(t, ModelsParams{Scheme: "https", Path: "/v1/models", InsecureSkipVerify: true})
	pathSrc := source(t, ModelsParams{Scheme: "http", Path: "/models"})
	tests := []struct {
		name    string
		src     *ModelsSource
		ep      *scheduling.Endpoint
		timeout time.Duration
		want    string
		check   func(error) bool
	}{
		{"status", httpSrc, serve(http.StatusBadGateway, "upstream down"), 0, "status 502 Bad Gateway", func(err error) bool {
			var se *StatusError
			return errors.As(err, &se) && se.StatusCode == http.StatusBadGateway
		}},
		{"not json", httpSrc, serve(http.StatusOK, "<html>hello</html>"), 0, "parse model list: invalid character", isBodyError},
		{"no data", httpSrc, serve(http.StatusOK, `{"object":"list"}`), 0, `parse model list: no "data" array`, isBodyError},
		{"too large", httpSrc, serve(http.StatusOK, `{"data":[],"pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}`), 0, "body larger than 4194304 bytes", isBodyError},
		{"connection refused", httpSrc, closedEP, 0, "connection refused", func(err error) bool {
			var ne net.Error
			return errors.As(err, &ne)
		}},
		{"deadline", httpSrc, slow, 50 * time.Millisecond, "context deadline exceeded", func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"https to an http server", httpsSrc, endpointOf(t, plain), 0, "server gave HTTP response to HTTPS client", nil},
		{"http to an https server", httpSrc, endpointOf(t, secure), 0, "status 400 Bad Request", nil},
		{"redirect to another host", httpSrc, redirect, 0, "status 302 Found", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			_, err := tc.src.Fetch(ctx, tc.ep)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "GET "+tc.src.URL(tc.ep)+": ") {
				t.Errorf("error does not start with the request: %v", err)
			}
			if tc.check != nil && !tc.check(err) {
				t.Errorf("error %T (%v) is not of the expected kind", err, err)
			}
			if d := time.Since(start); tc.timeout > 0 && d > tc.timeout+time.Second {
				t.Errorf("took %v with a %v deadline", d, tc.timeout)
			}
		})
	}
	// A redirect within the endpoint is followed.
	if got, err := pathSrc.Fetch(context.Background(), endpointOf(t, trailing)); err != nil || !reflect.DeepEqual(got, wantModels) {
		t.Errorf("redirect within the endpoint: %v, %v", got, err)
	}
}

func isBodyError(err error) bool {
	var be *BodyError
	return errors.As(err, &be)
}

func TestExtract(t *testing.T) {
	x := NewModelsExtractor("")
	if tn := x.TypedName(); tn.Type != ModelsExtractorType || tn.Name != ModelsExtractorType {
		t.Errorf("typed name %+v", tn)
	}
	ep := scheduling.NewEndpoint("pod", "10.0.0.1", 8000, nil)
	if err := x.Extract(context.Background(), wantModels, ep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ep.Models, []string{"base", "lora-a"}) {
		t.Errorf("models %v", ep.Models)
	}
	if !ep.Serves("lora-a") || !ep.Serves("base") || ep.Serves("other") {
		t.Errorf("Serves disagrees with models %v", ep.Models)
	}
	// An empty list: known to serve nothing (nil would mean unknown).
	if err := x.Extract(context.Background(), []Model{}, ep); err != nil || ep.Models == nil || len(ep.Models) != 0 || ep.Serves("base") {
		t.Errorf("empty list: models %#v, error %v", ep.Models, err)
	}
	err := x.Extract(context.Background(), []string{"base"}, ep)
	if err == nil || err.Error() != "model-server-protocol-models: expects the model list a models-data-source fetches, got []string" {
		t.Errorf("wrong data: %v", err)
	}
	if err := x.Extract(context.Background(), wantModels, nil); err == nil {
		t.Error("nil endpoint: no error")
	}
}

// Fetch then Extract, as the data layer runs them.
func TestFetchExtract(t *testing.T) {
	srv := pod(t, true, "/custom/models", nil)
	s := source(t, ModelsParams{Scheme: "https", Path: "/custom/models", InsecureSkipVerify: true})
	ep := endpointOf(t, srv)
	data, err := s.Fetch(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewModelsExtractor("x").Extract(context.Background(), data, ep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ep.Models, []string{"base", "lora-a"}) {
		t.Errorf("models %v", ep.Models)
	}
}
