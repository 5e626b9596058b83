package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"

	"github.com/hermod/hermod/libs/kube/kubetest"
)

// apiServer is a minimal Kubernetes API: legacy discovery for apps/v1 and
// leaderworkerset.x-k8s.io/v1, the scale subresource of deployments and
// leaderworkersets, and GET of deployments. It checks resourceVersion on
// scale updates.
type apiServer struct {
	mu       sync.Mutex
	replicas map[string]int32 // "<resource>/<namespace>/<name>" -> spec.replicas
	rv       map[string]int
	ready    map[string]int32 // deployments' readyReplicas
	puts     int
}

func newAPIServer(t *testing.T) (*apiServer, *httptest.Server) {
	t.Helper()
	s := &apiServer{replicas: map[string]int32{}, rv: map[string]int{}, ready: map[string]int32{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		})
	})
	mux.HandleFunc("GET /api/v1", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
		})
	})
	mux.HandleFunc("GET /apis", func(w http.ResponseWriter, _ *http.Request) {
		group := func(name string) metav1.APIGroup {
			v := metav1.GroupVersionForDiscovery{GroupVersion: name + "/v1", Version: "v1"}
			return metav1.APIGroup{Name: name, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
		}
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{group("apps"), group("leaderworkerset.x-k8s.io")},
		})
	})
	for _, list := range []*metav1.APIResourceList{appsResources, lwsResources} {
		list := list.DeepCopy()
		list.TypeMeta = metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}
		mux.HandleFunc("GET /apis/"+list.GroupVersion, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, list)
		})
	}
	for _, p := range []string{"/apis/apps/v1/namespaces/{ns}/{resource}/{name}/scale", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/{resource}/{name}/scale"} {
		mux.HandleFunc("GET "+p, s.getScale)
		mux.HandleFunc("PUT "+p, s.putScale)
	}
	mux.HandleFunc("GET /apis/apps/v1/namespaces/{ns}/deployments/{name}", s.getDeployment)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func key(r *http.Request) string {
	return r.PathValue("resource") + "/" + r.PathValue("ns") + "/" + r.PathValue("name")
}

func (s *apiServer) scaleLocked(r *http.Request) *autoscalingv1.Scale {
	k := key(r)
	return &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.PathValue("ns"), Name: r.PathValue("name"), ResourceVersion: strconv.Itoa(s.rv[k])},
		Spec:       autoscalingv1.ScaleSpec{Replicas: s.replicas[k]},
		Status:     autoscalingv1.ScaleStatus{Replicas: s.replicas[k]},
	}
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("%s %q not found", r.PathValue("resource"), r.PathValue("name")),
	})
}

func (s *apiServer) getScale(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.replicas[key(r)]; !ok {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, s.scaleLocked(r))
}

func (s *apiServer) putScale(w http.ResponseWriter, r *http.Request) {
	var in autoscalingv1.Scale
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(r)
	if _, ok := s.replicas[k]; !ok {
		notFound(w, r)
		return
	}
	s.puts++
	if in.ResourceVersion != strconv.Itoa(s.rv[k]) {
		writeJSON(w, http.StatusConflict, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		})
		return
	}
	s.rv[k]++
	s.replicas[k] = in.Spec.Replicas
	writeJSON(w, http.StatusOK, s.scaleLocked(r))
}

func (s *apiServer) getDeployment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := "deployments/" + r.PathValue("ns") + "/" + r.PathValue("name")
	n, ok := s.replicas[k]
	if !ok {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.PathValue("ns"), Name: r.PathValue("name")},
		Spec:       appsv1.DeploymentSpec{Replicas: &n},
		Status:     appsv1.DeploymentStatus{Replicas: n, ReadyReplicas: s.ready[k]},
	})
}

func (s *apiServer) set(k string, replicas, ready int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas[k], s.rv[k], s.ready[k] = replicas, 1, ready
}

func (s *apiServer) get(k string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas[k]
}

// TestKubeconfigActuatorAgainstAPIServer runs the production wiring
// (clientset, memory-cached discovery, deferred RESTMapper, scale client)
// against an in-process API server.
func TestKubeconfigActuatorAgainstAPIServer(t *testing.T) {
	api, srv := newAPIServer(t)
	api.set("deployments/llm/d1", 1, 1)
	api.set("leaderworkersets/llm/w1", 2, 0)
	quiet := WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	a, err := NewFromKubeconfig(kubetest.WriteKubeconfig(t, srv.URL, "secret", ""), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := a.Scale(ctx, deployment("d1"), 3); err != nil {
		t.Fatalf("Scale deployment: %v", err)
	}
	if got := api.get("deployments/llm/d1"); got != 3 {
		t.Fatalf("deployment replicas = %d, want 3", got)
	}
	api.set("deployments/llm/d1", 3, 2)
	st, err := a.State(ctx, deployment("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (actuator.State{Desired: 3, Ready: 2}) {
		t.Fatalf("deployment State = %+v, want Desired 3 Ready 2", st)
	}

	if err := a.Scale(ctx, lws("w1"), 4); err != nil {
		t.Fatalf("Scale LeaderWorkerSet: %v", err)
	}
	if got := api.get("leaderworkersets/llm/w1"); got != 4 {
		t.Fatalf("LeaderWorkerSet replicas = %d, want 4", got)
	}
	st, err = a.State(ctx, lws("w1"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (actuator.State{Desired: 4, Ready: 4}) {
		t.Fatalf("LeaderWorkerSet State = %+v, want Desired 4 Ready 4 (status.replicas)", st)
	}

	puts := api.puts
	if err := a.Scale(ctx, lws("w1"), 4); err != nil {
		t.Fatal(err)
	}
	if api.puts != puts {
		t.Fatalf("Scale to the current count sent %d updates", api.puts-puts)
	}

	err = a.Scale(ctx, actuator.Target{Namespace: ns, APIVersion: "example.com/v1", Kind: "FooSet", Name: "x"}, 1)
	if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), `"FooSet"`) {
		t.Fatalf("unknown kind err = %v", err)
	}
	if _, err := a.State(ctx, deployment("nope")); !errors.Is(err, ErrTargetNotFound) {
		t.Fatalf("missing target err = %v, want ErrTargetNotFound", err)
	}
}

func TestNewForConfigDoesNotChangeConfig(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	before := *cfg
	if _, err := NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.GroupVersion != before.GroupVersion || cfg.NegotiatedSerializer != before.NegotiatedSerializer || cfg.UserAgent != before.UserAgent {
		t.Fatalf("config changed: %+v", cfg)
	}
}

func TestNewFromKubeconfigErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := NewFromKubeconfig(""); !errors.Is(err, rest.ErrNotInCluster) {
		t.Fatalf("empty path outside a cluster: err = %v, want rest.ErrNotInCluster", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := NewFromKubeconfig(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing kubeconfig: err = %v, want one naming %s", err, missing)
	}
}
