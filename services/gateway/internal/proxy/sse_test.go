package proxy

import (
	"bytes"
	"net/http/httptest"
	"testing"
)

// relayAll feeds stream through a relay in chunks cut at the given sizes
// and returns what reached the client.
func relayAll(stream []byte, cuts []byte, strip bool) ([]byte, *sseRelay) {
	w := httptest.NewRecorder()
	r := newSSERelay(w, strip)
	for len(stream) > 0 {
		n := len(stream)
		if len(cuts) > 0 {
			n = min(n, int(cuts[0])+1)
			cuts = cuts[1:]
		}
		if err := r.feed(stream[:n]); err != nil {
			panic(err)
		}
		stream = stream[n:]
	}
	if err := r.finish(); err != nil {
		panic(err)
	}
	return w.Body.Bytes(), r
}

// FuzzSSERelay holds the relay to its contract: without stripping it
// passes the stream through byte for byte however it is cut into reads;
// with stripping, the output does not depend on the cuts either and only
// usage-only chunks are missing.
func FuzzSSERelay(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n"), []byte{3, 7, 1})
	f.Add([]byte(": ping\r\n\r\ndata: x\r\n\r\ndata: [DONE]\r\n\r\n"), []byte{0, 0, 5})
	f.Add([]byte("data: {\"usage\": {\"completion_tokens\": 4}, \"choices\": []}\n\n"), []byte{})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		whole, _ := relayAll(stream, nil, false)
		cut, _ := relayAll(stream, cuts, false)
		if !bytes.Equal(whole, stream) || !bytes.Equal(cut, stream) {
			t.Fatalf("pass-through changed the stream:\nin   %q\nout  %q\ncut  %q", stream, whole, cut)
		}
		sw, rw := relayAll(stream, nil, true)
		sc, rc := relayAll(stream, cuts, true)
		if !bytes.Equal(sw, sc) || rw.events != rc.events || rw.usage != rc.usage {
			t.Fatalf("stripping depends on the cuts:\n%q\n%q", sw, sc)
		}
		if len(sw) > len(stream) {
			t.Fatalf("stripping added bytes")
		}
	})
}

func TestSSERelayStripsOnlyTheUsageChunk(t *testing.T) {
	in := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n" +
		"data: [DONE]\n\n"
	out, r := relayAll([]byte(in), []byte{5, 40, 3, 90}, true)
	want := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n" +
		"data: [DONE]\n\n"
	if string(out) != want {
		t.Errorf("out:\n%s", out)
	}
	if r.events != 2 || !r.haveUsage || r.usage.CompletionTokens != 2 || r.firstEvent.IsZero() {
		t.Errorf("events %d usage %+v", r.events, r.usage)
	}
}
