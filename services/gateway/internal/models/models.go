// Package models serves the gateway's /v1/models: the union of the models
// the pool's registered endpoints serve, in the OpenAI list format.
package models

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/openai"
)

// List holds the pool's models; its methods are safe for concurrent use.
type List struct {
	cur atomic.Pointer[listing]
}

// listing is the list as served: its body, and each model's by id.
type listing struct {
	body []byte
	byID map[string][]byte
}

// New returns an empty list.
func New() *List {
	l := &List{}
	l.set(nil, time.Now())
	return l
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Root    string `json:"root,omitempty"`
	Parent  string `json:"parent,omitempty"`
}

// Update replaces the list from a registry snapshot: every endpoint's
// served models, base models first-class (root = itself) and adapters
// pointing at their base model.
func (l *List) Update(snap coord.Snapshot) {
	base := map[string]bool{}
	parent := map[string]string{}
	for _, ep := range snap.Endpoints {
		if m := ep.GetModel(); m != "" {
			base[m] = true
		}
	}
	for _, ep := range snap.Endpoints {
		for _, m := range ep.GetServedModels() {
			if !base[m] {
				parent[m] = ep.GetModel()
			}
		}
	}
	var out []model
	for m := range base {
		out = append(out, model{ID: m, Root: m})
	}
	for m, p := range parent {
		out = append(out, model{ID: m, Root: p, Parent: p})
	}
	l.set(out, time.Now())
}

func (l *List) set(ms []model, at time.Time) {
	slices.SortFunc(ms, func(a, b model) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	for i := range ms {
		ms[i].Object, ms[i].Created, ms[i].OwnedBy = "model", at.Unix(), "hermod"
	}
	if ms == nil {
		ms = []model{}
	}
	b, _ := json.Marshal(struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", ms})
	byID := make(map[string][]byte, len(ms))
	for _, m := range ms {
		mb, _ := json.Marshal(m)
		byID[m.ID] = append(mb, '\n')
	}
	l.cur.Store(&listing{body: append(b, '\n'), byID: byID})
}

// ServeHTTP serves the list.
func (l *List) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(l.cur.Load().body)
}

// ServeModel serves one model of the list (GET /v1/models/{model...}):
// the model object, or OpenAI's 404 for a model the pool does not serve.
func (l *List) ServeModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("model")
	b, ok := l.cur.Load().byID[id]
	if !ok {
		openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, "model_not_found", "model",
			fmt.Sprintf("The model `%s` does not exist", id), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
