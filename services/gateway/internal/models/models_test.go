package models

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

func TestListUnionOfServedModels(t *testing.T) {
	l := New()
	l.Update(coord.Snapshot{Endpoints: map[string]*registryv1.Endpoint{
		"a": {Name: "a", Model: "llama", ServedModels: []string{"llama", "sql-lora"}},
		"b": {Name: "b", Model: "llama", ServedModels: []string{"llama"}},
		"c": {Name: "c", Model: "qwen"},
	}})
	w := httptest.NewRecorder()
	l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	var got struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, Root, Parent string
			OwnedBy                  string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || len(got.Data) != 3 {
		t.Fatalf("%s", w.Body.String())
	}
	want := [][3]string{{"llama", "llama", ""}, {"qwen", "qwen", ""}, {"sql-lora", "llama", "llama"}}
	for i, m := range got.Data {
		if m.ID != want[i][0] || m.Root != want[i][1] || m.Parent != want[i][2] || m.Object != "model" || m.OwnedBy != "hermod" {
			t.Errorf("model %d: %+v", i, m)
		}
	}
	l.Update(coord.Snapshot{})
	w = httptest.NewRecorder()
	l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if w.Body.String() != "{\"object\":\"list\",\"data\":[]}\n" {
		t.Errorf("empty pool: %s", w.Body.String())
	}
}

// GET /v1/models/{model}: the model object, a name with slashes included;
// OpenAI's 404 for a model the pool does not serve.
func TestServeModel(t *testing.T) {
	l := New()
	l.Update(coord.Snapshot{Endpoints: map[string]*registryv1.Endpoint{
		"a": {Name: "a", Model: "meta-llama/Llama-3.1-8B-Instruct", ServedModels: []string{"meta-llama/Llama-3.1-8B-Instruct", "sql-lora"}},
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models/{model...}", l.ServeModel)
	for path, want := range map[string]string{
		"/v1/models/meta-llama/Llama-3.1-8B-Instruct": `"id":"meta-llama/Llama-3.1-8B-Instruct"`,
		"/v1/models/sql-lora":                         `"parent":"meta-llama/Llama-3.1-8B-Instruct"`,
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) || !strings.Contains(w.Body.String(), `"object":"model"`) {
			t.Errorf("%s: %d %s", path, w.Code, w.Body.String())
		}
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models/gpt-9", nil))
	var e struct {
		Error struct{ Message, Type, Param, Code string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusNotFound || e.Error.Code != "model_not_found" ||
		e.Error.Param != "model" || e.Error.Message != "The model `gpt-9` does not exist" {
		t.Errorf("unknown model: %d %s", w.Code, w.Body.String())
	}
}
