package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/hermod/hermod/testkit/mongotest"
	"github.com/hermod/hermod/testkit/redistest"
)

// The official OpenAI Go SDK drives the Conversations API through the
// gateway, on the in-memory store and on the tiered one (Redis with
// MongoDB behind it): create, retrieve, update, items (list with paging,
// add, retrieve, delete), responses that read and extend a conversation
// (racing ones included), and delete.
func TestOpenAISDKConversations(t *testing.T) {
	for _, tier := range []string{"memory", "tiered"} {
		t.Run(tier, func(t *testing.T) {
			args := []string{"--pods", "2", "--speed", "100"}
			if tier == "tiered" {
				rs, ms := redistest.Start(t), mongotest.Run(t)
				store := writeFile(t, t.TempDir(), "store.json", fmt.Sprintf(`{"tieredConfig":{"redis":{"address":%q},"mongo":{"uri":%q,"database":"hermod_e2e","collection":"responses"}}}`, rs.URL(), ms.URI()))
				args = append(args, "--responses-args=--store-config,@"+store)
			}
			conversationsThroughSDK(t, startStack(t, args...))
		})
	}
}

func conversationsThroughSDK(t *testing.T, s *devstack) {
	client := openai.NewClient(option.WithBaseURL(s.url("/v1/")), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Metadata: shared.Metadata{"topic": "kv caches"},
		Items:    []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("You are terse.", responses.EasyInputMessageRoleDeveloper)},
	})
	if err != nil || !strings.HasPrefix(conv.ID, "conv_") || conv.CreatedAt == 0 {
		t.Fatalf("create: %+v %v", conv, err)
	}
	got, err := client.Conversations.Get(ctx, conv.ID)
	if err != nil || got.ID != conv.ID || got.Metadata.(map[string]any)["topic"] != "kv caches" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if got, err = client.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "prefix caches"}}); err != nil || got.Metadata.(map[string]any)["topic"] != "prefix caches" {
		t.Fatalf("update: %+v %v", got, err)
	}

	// two turns in the conversation, the second streamed
	params := responses.ResponseNewParams{Model: s.state.Model, MaxOutputTokens: openai.Int(6),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What is a KV cache?")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}}
	first, err := client.Responses.New(ctx, params)
	if err != nil || first.Conversation.ID != conv.ID || first.OutputText() == "" {
		t.Fatalf("a turn in the conversation: %s %v", first.RawJSON(), err)
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("And a prefix cache?")}
	params.Conversation = responses.ResponseNewParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: conv.ID}}
	stream := client.Responses.NewStreaming(ctx, params)
	var completed responses.Response
	var events []string
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		switch ev.Type {
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		case "response.incomplete": // max_output_tokens reached
			completed = ev.AsResponseIncomplete().Response
		}
	}
	if err := stream.Err(); err != nil || completed.Conversation.ID != conv.ID {
		t.Fatalf("a streamed turn: events %v, final %s, %v", events, completed.RawJSON(), err)
	}
	// the second turn read the first: its prompt is longer by the first
	// turn's items
	if completed.Usage.InputTokens <= first.Usage.InputTokens {
		t.Errorf("second turn's input %d tokens, first's %d: the conversation was not its context", completed.Usage.InputTokens, first.Usage.InputTokens)
	}
	wantItems := func(what string, want ...string) []conversations.ConversationItemUnion {
		t.Helper()
		pager := client.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Limit: openai.Int(2), Order: conversations.ItemListParamsOrderAsc})
		var items []conversations.ConversationItemUnion
		var roles []string
		for pager.Next() {
			it := pager.Current()
			items = append(items, it)
			roles = append(roles, it.Role)
		}
		if err := pager.Err(); err != nil || strings.Join(roles, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: items %v (%v), want %v", what, roles, err, want)
		}
		return items
	}
	items := wantItems("after two turns", "developer", "user", "assistant", "user", "assistant")
	if msg := items[2].AsMessage(); msg.ID != first.Output[0].ID || msg.Content[0].Text != first.OutputText() {
		t.Fatalf("the first turn's output item: %+v, response output %+v", msg, first.Output[0])
	}

	added, err := client.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("A note.", responses.EasyInputMessageRoleUser)}})
	if err != nil || len(added.Data) != 1 || added.Data[0].ID == "" {
		t.Fatalf("add items: %+v %v", added, err)
	}
	item, err := client.Conversations.Items.Get(ctx, conv.ID, added.Data[0].ID, conversations.ItemGetParams{})
	if err != nil || item.AsMessage().Content[0].Text != "A note." {
		t.Fatalf("get item: %+v %v", item, err)
	}
	if _, err := client.Conversations.Items.Delete(ctx, conv.ID, added.Data[0].ID); err != nil {
		t.Fatalf("delete item: %v", err)
	}
	_, err = client.Conversations.Items.Get(ctx, conv.ID, added.Data[0].ID, conversations.ItemGetParams{})
	wantAPIError(t, "a deleted item", err, http.StatusNotFound, "not_found")

	// four turns at once: every one's items land
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := params
			p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("racer %d", i))}
			if _, err := client.Responses.New(ctx, p); err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	items = wantItems("after four racing turns", "developer", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant")
	seen := map[string]bool{}
	for _, it := range items {
		if m := it.AsMessage(); m.Role == "user" {
			seen[m.Content[0].Text] = true
		}
	}
	for i := range 4 {
		if !seen[fmt.Sprintf("racer %d", i)] {
			t.Errorf("racer %d's input is not in the conversation", i)
		}
	}

	params.PreviousResponseID = openai.String(first.ID)
	_, err = client.Responses.New(ctx, params)
	wantAPIError(t, "conversation with previous_response_id", err, http.StatusBadRequest, "mutually_exclusive_parameters")
	deleted, err := client.Conversations.Delete(ctx, conv.ID)
	if err != nil || !deleted.Deleted || deleted.ID != conv.ID {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	_, err = client.Conversations.Get(ctx, conv.ID)
	wantAPIError(t, "a deleted conversation", err, http.StatusNotFound, "not_found")
	params.PreviousResponseID = param.Opt[string]{}
	_, err = client.Responses.New(ctx, params)
	wantAPIError(t, "a turn in a deleted conversation", err, http.StatusNotFound, "not_found")
}
