package responses

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/services/gateway/internal/auth"
)

// call sends a request as tenant (empty: none) and decodes the answer.
func call(t *testing.T, srv *httptest.Server, tenant, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if tenant != "" {
		req.Header.Set(auth.TenantHeader, tenant)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func itemTexts(list map[string]any) []string {
	var out []string
	for _, it := range list["data"].([]any) {
		m := it.(map[string]any)
		out = append(out, m["role"].(string)+":"+m["content"].([]any)[0].(map[string]any)["text"].(string))
	}
	return out
}

func TestConversationObjectAndItems(t *testing.T) {
	srv, _, _ := setup(t)
	code, conv := call(t, srv, "", http.MethodPost, "/v1/conversations", `{"metadata":{"topic":"demo"},"items":[{"type":"message","role":"user","content":"hello"},{"role":"assistant","content":[{"type":"output_text","text":"hi"}]}]}`)
	id, _ := conv["id"].(string)
	if code != 200 || !strings.HasPrefix(id, "conv_") || conv["object"] != "conversation" || conv["metadata"].(map[string]any)["topic"] != "demo" || conv["created_at"].(float64) < 1 {
		t.Fatalf("create: %d %v", code, conv)
	}
	if code, got := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id, ""); code != 200 || got["id"] != id {
		t.Fatalf("get: %d %v", code, got)
	}
	code, added := call(t, srv, "", http.MethodPost, "/v1/conversations/"+id+"/items", `{"items":[{"role":"user","content":"one"},{"role":"user","content":"two"}]}`)
	if code != 200 || added["object"] != "list" || fmt.Sprint(itemTexts(added)) != "[user:one user:two]" || added["has_more"] != false {
		t.Fatalf("add items: %d %v", code, added)
	}
	// newest first by default; paging with after and limit
	code, list := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?limit=3", "")
	if code != 200 || fmt.Sprint(itemTexts(list)) != "[user:two user:one assistant:hi]" || list["has_more"] != true {
		t.Fatalf("list: %d %v", code, list)
	}
	code, rest := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?limit=3&after="+list["last_id"].(string), "")
	if code != 200 || fmt.Sprint(itemTexts(rest)) != "[user:hello]" || rest["has_more"] != false {
		t.Fatalf("next page: %d %v", code, rest)
	}
	code, asc := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?order=asc", "")
	if code != 200 || fmt.Sprint(itemTexts(asc)) != "[user:hello assistant:hi user:one user:two]" {
		t.Fatalf("ascending: %d %v", code, asc)
	}
	first := asc["first_id"].(string)
	if code, item := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items/"+first, ""); code != 200 || item["id"] != first || item["type"] != "message" {
		t.Fatalf("get item: %d %v", code, item)
	}
	if code, after := call(t, srv, "", http.MethodDelete, "/v1/conversations/"+id+"/items/"+first, ""); code != 200 || after["object"] != "conversation" {
		t.Fatalf("delete item: %d %v", code, after)
	}
	if code, _ := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items/"+first, ""); code != 404 {
		t.Fatalf("deleted item: %d", code)
	}
	if code, _ := call(t, srv, "", http.MethodDelete, "/v1/conversations/"+id+"/items/"+first, ""); code != 404 {
		t.Fatalf("deleting a deleted item: %d", code)
	}
	code, upd := call(t, srv, "", http.MethodPost, "/v1/conversations/"+id, `{"metadata":{"topic":"changed","k":"v"}}`)
	if code != 200 || upd["metadata"].(map[string]any)["topic"] != "changed" {
		t.Fatalf("update: %d %v", code, upd)
	}
	if _, got := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id, ""); got["metadata"].(map[string]any)["k"] != "v" {
		t.Fatalf("after update: %v", got)
	}
	if code, del := call(t, srv, "", http.MethodDelete, "/v1/conversations/"+id, ""); code != 200 || del["object"] != "conversation.deleted" || del["deleted"] != true {
		t.Fatalf("delete: %d %v", code, del)
	}
	for _, p := range []string{"", "/items"} {
		if code, e := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+p, ""); code != 404 || e["error"].(map[string]any)["code"] != "not_found" {
			t.Fatalf("deleted conversation%s: %d %v", p, code, e)
		}
	}
	// an empty create
	if code, c := call(t, srv, "", http.MethodPost, "/v1/conversations", ``); code != 200 || c["metadata"] == nil {
		t.Fatalf("empty create: %d %v", code, c)
	}
}

func TestConversationRefusals(t *testing.T) {
	srv, _, _ := setupWith(t, Options{MaxConversationItems: 3})
	_, conv := call(t, srv, "", http.MethodPost, "/v1/conversations", `{}`)
	id := conv["id"].(string)
	many := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 21), ",") + `]}`
	bigMeta := map[string]string{}
	for i := range 17 {
		bigMeta[fmt.Sprint("k", i)] = "v"
	}
	bm, _ := json.Marshal(map[string]any{"metadata": bigMeta})
	for _, c := range []struct {
		method, path, body, param string
		code                      int
	}{
		{http.MethodPost, "/v1/conversations", many, "items", 400},
		{http.MethodPost, "/v1/conversations", string(bm), "metadata", 400},
		{http.MethodPost, "/v1/conversations", `{"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "metadata", 400},
		{http.MethodPost, "/v1/conversations", `{"items":[{"role":"robot","content":"x"}]}`, "items", 400},
		{http.MethodPost, "/v1/conversations", `{"items":"not a list"}`, "items", 400},
		{http.MethodPost, "/v1/conversations", `{"metadata":`, "", 400},
		{http.MethodPost, "/v1/conversations/" + id + "/items", `{}`, "items", 400},
		{http.MethodPost, "/v1/conversations/" + id + "/items", `{"items":[]}`, "items", 400},
		{http.MethodPost, "/v1/conversations/" + id, `{}`, "metadata", 400},
		{http.MethodGet, "/v1/conversations/" + id + "/items?limit=0", "", "limit", 400},
		{http.MethodGet, "/v1/conversations/" + id + "/items?order=sideways", "", "order", 400},
		{http.MethodPost, "/v1/conversations/conv_nope/items", `{"items":[{"role":"user","content":"x"}]}`, "", 404},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"x","conversation":"conv_nope"}`, "conversation", 404},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"x","conversation":{"id":""}}`, "conversation", 400},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"x","conversation":"` + id + `","previous_response_id":"resp_1"}`, "conversation", 400},
		// MaxConversationItems is 3
		{http.MethodPost, "/v1/conversations/" + id + "/items", `{"items":[{"role":"user","content":"1"},{"role":"user","content":"2"},{"role":"user","content":"3"},{"role":"user","content":"4"}]}`, "", 400},
	} {
		code, e := call(t, srv, "", c.method, c.path, c.body)
		errObj, _ := e["error"].(map[string]any)
		if code != c.code || errObj == nil || (c.param != "" && errObj["param"] != c.param) {
			t.Errorf("%s %s %.60s: %d %v, want %d on %q", c.method, c.path, c.body, code, e, c.code, c.param)
		}
	}
	// a turn that would overfill it: generated, not added, and told
	if code, _ := call(t, srv, "", http.MethodPost, "/v1/conversations/"+id+"/items", `{"items":[{"role":"user","content":"1"},{"role":"user","content":"2"}]}`); code != 200 {
		t.Fatal(code)
	}
	code, e := call(t, srv, "", http.MethodPost, "/v1/responses", `{"model":"m","input":"x","conversation":"`+id+`"}`)
	if code != 400 || e["error"].(map[string]any)["code"] != "conversation_too_large" {
		t.Fatalf("overfilling turn: %d %v", code, e)
	}
}

func TestConversationOwnership(t *testing.T) {
	srv, _, _ := setup(t)
	_, conv := call(t, srv, "alice", http.MethodPost, "/v1/conversations", `{"items":[{"role":"user","content":"secret"}]}`)
	id := conv["id"].(string)
	_, items := call(t, srv, "alice", http.MethodGet, "/v1/conversations/"+id+"/items", "")
	item := items["first_id"].(string)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/conversations/" + id, ""},
		{http.MethodPost, "/v1/conversations/" + id, `{"metadata":{"a":"b"}}`},
		{http.MethodGet, "/v1/conversations/" + id + "/items", ""},
		{http.MethodPost, "/v1/conversations/" + id + "/items", `{"items":[{"role":"user","content":"x"}]}`},
		{http.MethodGet, "/v1/conversations/" + id + "/items/" + item, ""},
		{http.MethodDelete, "/v1/conversations/" + id + "/items/" + item, ""},
		{http.MethodDelete, "/v1/conversations/" + id, ""},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"x","conversation":"` + id + `"}`},
	} {
		for _, who := range []string{"bob", ""} {
			if code, out := call(t, srv, who, c.method, c.path, c.body); code != http.StatusNotFound {
				t.Errorf("%s %s as %q: %d %v, want 404", c.method, c.path, who, code, out)
			}
		}
	}
	if _, after := call(t, srv, "alice", http.MethodGet, "/v1/conversations/"+id+"/items", ""); fmt.Sprint(itemTexts(after)) != "[user:secret]" {
		t.Fatalf("another principal changed it: %v", after)
	}
}

// A response in a conversation reads its items as context and adds its
// input and output to it, streamed or not; responses racing on one
// conversation all land.
func TestResponsesInAConversation(t *testing.T) {
	srv, st, c := setup(t)
	_, conv := call(t, srv, "", http.MethodPost, "/v1/conversations", `{"items":[{"role":"user","content":"earlier"}]}`)
	id := conv["id"].(string)
	code, r1 := call(t, srv, "", http.MethodPost, "/v1/responses", `{"model":"m","input":"first","conversation":"`+id+`"}`)
	if code != 200 || r1["conversation"].(map[string]any)["id"] != id || r1["previous_response_id"] != nil {
		t.Fatalf("first turn: %d %v", code, r1)
	}
	if fmt.Sprint(c.messages[0]) != fmt.Sprint([]chatMessage{{"user", "earlier"}, {"user", "first"}}) {
		t.Fatalf("first turn's context: %v", c.messages[0])
	}
	// streamed, naming the conversation as an object
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"model":"m","input":"second","stream":true,"conversation":{"id":"`+id+`"}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events, last := readEvents(t, resp.Body)
	resp.Body.Close()
	if events[len(events)-1] != "response.completed" || last["response"].(map[string]any)["conversation"].(map[string]any)["id"] != id {
		t.Fatalf("streamed turn: %v %v", events, last)
	}
	want := []chatMessage{{"user", "earlier"}, {"user", "first"}, {"assistant", "reply to first"}, {"user", "second"}}
	if fmt.Sprint(c.messages[1]) != fmt.Sprint(want) {
		t.Fatalf("second turn's context %v, want %v", c.messages[1], want)
	}
	_, list := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?order=asc", "")
	if got := fmt.Sprint(itemTexts(list)); got != "[user:earlier user:first assistant:reply to first user:second assistant:reply to second]" {
		t.Fatalf("items: %s", got)
	}
	// the output item keeps the response's message id
	out := r1["output"].([]any)[0].(map[string]any)["id"].(string)
	if code, item := call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items/"+out, ""); code != 200 || item["role"] != "assistant" {
		t.Fatalf("output item %s: %d %v", out, code, item)
	}

	// Another writer lands between this turn's read and its swap: the
	// swap is refused, the change reapplied, and both are kept.
	st.mu.Lock()
	st.beforeSwap = func(m *memStore) {
		r := proto.Clone(m.recs[id]).(*responsesv1.StoredResponse)
		var cv conversation
		_ = json.Unmarshal(r.Data, &cv)
		cv.Items = append(cv.Items, userText("landed first"))
		r.Data, _ = json.Marshal(cv)
		m.revision++
		r.Revision = m.revision
		m.recs[id] = r
	}
	conflicts := st.conflicts
	st.mu.Unlock()
	if code, _ := call(t, srv, "", http.MethodPost, "/v1/responses", `{"model":"m","input":"third","conversation":"`+id+`"}`); code != 200 {
		t.Fatal(code)
	}
	_, list = call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?limit=3", "")
	if got := fmt.Sprint(itemTexts(list)); got != "[assistant:reply to third user:third user:landed first]" || st.conflicts != conflicts+1 {
		t.Fatalf("after a lost race: %s (%d conflicts)", got, st.conflicts-conflicts)
	}

	// eight at once
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out := call(t, srv, "", http.MethodPost, "/v1/responses", fmt.Sprintf(`{"model":"m","input":"racer %d","conversation":%q}`, i, id)); code != 200 {
				t.Errorf("racer %d: %d %v", i, code, out)
			}
		}()
	}
	wg.Wait()
	_, list = call(t, srv, "", http.MethodGet, "/v1/conversations/"+id+"/items?limit=100&order=asc", "")
	texts := strings.Join(itemTexts(list), "|")
	for i := range 8 {
		if !strings.Contains(texts, fmt.Sprintf("user:racer %d|", i)) || !strings.Contains(texts, fmt.Sprintf("assistant:reply to racer %d", i)) {
			t.Errorf("racer %d's items are missing: %s", i, texts)
		}
	}
	if n := len(list["data"].([]any)); n != 8+16 {
		t.Fatalf("%d items, want 24", n)
	}

	// deleted while a turn ran: the client is told its items did not land
	st.mu.Lock()
	st.beforeSwap = func(m *memStore) { delete(m.recs, id) }
	st.mu.Unlock()
	code, e := call(t, srv, "", http.MethodPost, "/v1/responses", `{"model":"m","input":"late","conversation":"`+id+`"}`)
	if code != 404 || e["error"].(map[string]any)["code"] != "conversation_not_updated" {
		t.Fatalf("conversation deleted mid-turn: %d %v", code, e)
	}
}
