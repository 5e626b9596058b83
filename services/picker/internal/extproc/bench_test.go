package extproc

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkExchange runs whole ext_proc exchanges over loopback gRPC with
// a fake picker: request headers, a body in 3 chunks, the routing answer
// and the body back, response headers, an SSE response of 10 events and
// the stream's close (what the picker adds to an Envoy request, the
// scheduling cycle aside).
func BenchmarkExchange(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			e := newTestEnv(b, nil)
			body := []byte(fmt.Sprintf(`{"model":"llama","prompt":%q,"stream":true}`, strings.Repeat("x", size)))
			chunks := split(body, 3)
			events := make([][]byte, 10)
			for i := range events {
				events[i] = []byte(fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"tok%d\"}}]}\n\n", i))
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s := e.open()
				s.send(post(fullDuplex, "/v1/completions"))
				for i, c := range chunks {
					s.send(requestBody(c, i == 2))
				}
				s.recv()
				s.readBody(true, 0, true)
				s.send(responseHeaders(false, ":status", "200", "content-type", "text/event-stream"))
				s.recv()
				for i, ev := range events {
					s.send(responseBody(ev, i == len(events)-1))
					s.readBody(false, len(ev), i == len(events)-1)
				}
				s.close()
				s.cancel()
			}
		})
	}
}
