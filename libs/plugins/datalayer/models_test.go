package datalayer

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseModels(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []Model
	}{
		{"vllm-sim", string(readTestdata(t, "models-vllm-sim.json")), []Model{
			{ID: "mymodel", Root: "mymodel"},
			{ID: "sql-lora", Root: "/x", Parent: "mymodel"},
			{ID: "chat-lora", Root: "/y", Parent: "mymodel"},
		}},
		{"openai with permissions", string(readTestdata(t, "models-openai.json")), []Model{
			{ID: "meta-llama/Llama-3.1-8B-Instruct", Root: "meta-llama/Llama-3.1-8B-Instruct"},
			{ID: "sql-lora", Root: "/adapters/sql", Parent: "meta-llama/Llama-3.1-8B-Instruct"},
		}},
		{"empty list", `{"object":"list","data":[]}`, []Model{}},
		{"no object field", `{"data":[{"id":"a"}]}`, []Model{{ID: "a"}}},
		{"duplicate ids keep the first", `{"data":[{"id":"a","root":"1"},{"id":"b"},{"id":"a","root":"2"}]}`, []Model{{ID: "a", Root: "1"}, {ID: "b"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseModels([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseModelsErrors(t *testing.T) {
	tests := []struct{ name, body, msg string }{
		{"not json", `<html>502</html>`, "invalid character"},
		{"truncated", `{"object":"list","data":[{"id":"a"`, "unexpected end"},
		{"no data", `{"object":"list"}`, `no "data" array`},
		{"null data", `{"object":"list","data":null}`, `no "data" array`},
		{"not a list", `{"object":"model","id":"a","data":[]}`, `"object" is not "list"`},
		{"entry without id", `{"data":[{"id":"a"},{"object":"model"}]}`, "entry 1: model without id"},
		{"wrong type", `{"data":{"id":"a"}}`, "cannot unmarshal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModels([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "parse model list: ") {
				t.Errorf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

func TestModelIDs(t *testing.T) {
	got := ModelIDs([]Model{{ID: "a"}, {ID: "b", Parent: "a"}})
	if !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("ModelIDs = %v", got)
	}
	if got := ModelIDs(nil); got == nil || len(got) != 0 {
		t.Errorf("ModelIDs(nil) = %#v, want an empty non-nil slice", got)
	}
}

// FuzzModelList checks that ParseModels never panics and returns unique,
// non-empty ids.
func FuzzModelList(f *testing.F) {
	f.Add(readTestdata(f, "models-vllm-sim.json"))
	f.Add(readTestdata(f, "models-openai.json"))
	f.Add([]byte(`{"object":"list","data":[{"id":"a","parent":null},{"id":"a"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		models, err := ParseModels(body)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range models {
			if m.ID == "" || seen[m.ID] {
				t.Fatalf("id %q in %+v", m.ID, models)
			}
			seen[m.ID] = true
		}
	})
}
