package datalayer

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Model is one entry of an OpenAI /v1/models list.
type Model struct {
	// ID is the name requests use: the base model or a LoRA adapter.
	ID string
	// Root is what the model was loaded from (vLLM: the base model's name
	// or path, an adapter's path).
	Root string
	// Parent is the base model of an adapter; empty for a base model.
	Parent string
}

// modelList is the wire form of GET /v1/models.
type modelList struct {
	Object string `json:"object"`
	Data   *[]struct {
		ID     string  `json:"id"`
		Root   string  `json:"root"`
		Parent *string `json:"parent"`
	} `json:"data"`
}

var (
	errNoData   = errors.New(`no "data" array`)
	errModelID  = errors.New("model without id")
	errNotAList = errors.New(`"object" is not "list"`)
)

// ParseModels decodes a /v1/models body ({"object":"list","data":[...]}),
// keeping the order of the list and the first of entries with the same id.
// An entry without id is an error, as is a body without a data array or
// whose object is not "list". Fields other than id, root and parent are
// ignored.
func ParseModels(body []byte) ([]Model, error) {
	var l modelList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("parse model list: %w", err)
	}
	if l.Object != "" && l.Object != "list" {
		return nil, fmt.Errorf("parse model list: %w", errNotAList)
	}
	if l.Data == nil {
		return nil, fmt.Errorf("parse model list: %w", errNoData)
	}
	out := make([]Model, 0, len(*l.Data))
	seen := make(map[string]struct{}, len(*l.Data))
	for i, d := range *l.Data {
		if d.ID == "" {
			return nil, fmt.Errorf("parse model list: entry %d: %w", i, errModelID)
		}
		if _, dup := seen[d.ID]; dup {
			continue
		}
		seen[d.ID] = struct{}{}
		m := Model{ID: d.ID, Root: d.Root}
		if d.Parent != nil {
			m.Parent = *d.Parent
		}
		out = append(out, m)
	}
	return out, nil
}

// ModelIDs returns the IDs of models, in order: the names of the base
// models and adapters an endpoint serves. It never returns nil.
func ModelIDs(models []Model) []string {
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	return ids
}
