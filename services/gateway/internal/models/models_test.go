package models

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
