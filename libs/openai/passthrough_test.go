package openai

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"
)

func TestParsePassthrough(t *testing.T) {
	for _, path := range PassthroughPaths {
		if api, ok := APIOfPath(path); !ok || api != APIPassthrough || api.Generates() || api.Chat() || api.Anthropic() {
			t.Errorf("%s: %v %t", path, api, ok)
		}
	}
	r, err := Parse(APIPassthrough, []byte(`{"input":["a",{"x":[1,2]}],"model":"bge","encoding_format":"float","stream":false}`))
	if err != nil || r.Model != "bge" || r.Stream || r.Prompt != "" || len(r.Messages) != 0 {
		t.Errorf("embeddings body: %+v %v", r, err)
	}
	// no model: the pool's scheduler routes it by load alone
	if r, err := Parse(APIPassthrough, []byte(`{"text_1":"a","text_2":["b","c"]}`)); err != nil || r.Model != "" {
		t.Errorf("score body: %+v %v", r, err)
	}
	// a body that is not a JSON object is not read
	if r, err := Parse(APIPassthrough, []byte("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--b--\r\n")); err != nil || r.Model != "" {
		t.Errorf("form body: %+v %v", r, err)
	}
	for _, bad := range []string{`{"model":1}`, `{"model":"m"`, `{"model":"m"} x`, `{"stream":"yes"}`} {
		if _, err := Parse(APIPassthrough, []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestFormModel(t *testing.T) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, _ := w.CreateFormFile("file", "model.wav") // a file part before the field, named like it
	_, _ = fw.Write(bytes.Repeat([]byte{0x52}, 1<<16))
	_ = w.WriteField("language", "en")
	_ = w.WriteField("model", " whisper-large ")
	_ = w.Close()
	if got := FormModel(w.FormDataContentType(), buf.Bytes()); got != "whisper-large" {
		t.Errorf("model %q", got)
	}
	for _, c := range []struct{ ct, body string }{
		{"application/json", `{"model":"m"}`},
		{"multipart/form-data", "--b\r\n"},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"model\"\r\n\r\nx\r\n--b--\r\n"},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + strings.Repeat("m", 2000) + "\r\n--b--\r\n"},
		{"multipart/form-data; boundary=b", "garbage"},
	} {
		if got := FormModel(c.ct, []byte(c.body)); got != "" {
			t.Errorf("%s %.40q: model %q", c.ct, c.body, got)
		}
	}
}

// FuzzFormModel: any body, any boundary: no panic, a bounded answer.
func FuzzFormModel(f *testing.F) {
	f.Add("b", []byte("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--b--\r\n"))
	f.Add("x", []byte("--x\r\n\r\n--x--"))
	f.Fuzz(func(t *testing.T, boundary string, body []byte) {
		if got := FormModel("multipart/form-data; boundary="+boundary, body); len(got) > maxFormModel {
			t.Fatalf("model of %d bytes", len(got))
		}
	})
}
