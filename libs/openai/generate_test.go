package openai

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseGenerate(t *testing.T) {
	body := `{"request_id":"r-1","model":"llama","token_ids":[1, 22, 4294967295],"stream":true,
	  "stream_options":{"include_usage":true},"max_tokens":999,"max_completion_tokens":999,"prompt":"not a member",
	  "sampling_params":{"temperature":0,"max_tokens":12,"stop":["x"]},"cache_salt":"s","features":{"mm_hashes":{}}}`
	r, err := Parse(APIGenerate, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "llama" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 12 || !slices.Equal(r.TokenIDs, []uint32{1, 22, 4294967295}) ||
		r.Prompt != "1 22 4294967295" || len(r.Messages) != 0 {
		t.Errorf("parsed %+v", r)
	}
	routed := r // the pick does not carry the stream options
	routed.HasStreamOptions, routed.IncludeUsage = false, false
	if back := FromProto(APIGenerate, r.Proto()); !equalRequests(back, routed) {
		t.Errorf("through the proto: %+v", back)
	}
	if got, ok := APIOfPick(APIGenerate.PickAPI()); !ok || got != APIGenerate {
		t.Errorf("pick api: %v", got)
	}
	if api, ok := APIOfPath("/inference/v1/generate?x=1"); !ok || api != APIGenerate || api.Path() != "/inference/v1/generate" || !api.Generates() || api.Chat() || api.Anthropic() {
		t.Errorf("api of the path: %v %v", api, ok)
	}
	// the model is optional, as vLLM's is; no limit reads 0 (the server's default)
	if r, err := Parse(APIGenerate, []byte(`{"token_ids":[5],"sampling_params":{}}`)); err != nil || r.Model != "" || r.MaxTokens != 0 {
		t.Errorf("minimal body: %+v %v", r, err)
	}
}

func TestParseGenerateRefuses(t *testing.T) {
	for body, param := range map[string]string{
		`{"sampling_params":{}}`:                                 "token_ids",
		`{"token_ids":[],"sampling_params":{}}`:                  "token_ids",
		`{"token_ids":null,"sampling_params":{}}`:                "token_ids",
		`{"token_ids":[1,-2],"sampling_params":{}}`:              "token_ids",
		`{"token_ids":[1.5],"sampling_params":{}}`:               "token_ids",
		`{"token_ids":[4294967296],"sampling_params":{}}`:        "token_ids",
		`{"token_ids":"1 2","sampling_params":{}}`:               "token_ids",
		`{"token_ids":[1]}`:                                      "sampling_params",
		`{"token_ids":[1],"sampling_params":[]}`:                 "sampling_params",
		`{"token_ids":[1],"sampling_params":{"max_tokens":-1}}`:  "sampling_params.max_tokens",
		`{"token_ids":[1],"sampling_params":{"max_tokens":"8"}}`: "sampling_params.max_tokens",
		`{"token_ids":[1],"model":3,"sampling_params":{}}`:       "model",
	} {
		_, err := Parse(APIGenerate, []byte(body))
		var be *BodyError
		if !errors.As(err, &be) || be.Param != param {
			t.Errorf("%s: %v, want an error on %s", body, err, param)
		}
	}
	if _, err := Parse(APIGenerate, []byte(`{"token_ids":[1],"sampling_params":{`)); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("truncated body: %v", err)
	}
}
