package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// hermod-devstack --tls --api-tls serves the OpenAI API over HTTPS: the
// official SDK talks to it trusting the stack's CA (chat, streamed and not,
// and a background response, whose run the responses service sends back
// over HTTPS), HTTP/2 is negotiated, and neither plaintext nor a client
// that does not trust the CA gets an answer.
func TestOpenAISDKOverHTTPS(t *testing.T) {
	args := []string{"--pods", "1", "--speed", "100", "--api-tls"}
	if !e2eTLS {
		args = append(args, "--tls")
	}
	s := startStack(t, args...)
	if s.state.GatewayScheme != "https" || s.state.TLS == nil {
		t.Fatalf("state: scheme %q, tls %+v", s.state.GatewayScheme, s.state.TLS)
	}
	ca, err := os.ReadFile(s.state.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("the stack's CA does not parse")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	base := "https://" + s.state.Gateway
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithHTTPClient(hc), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()

	params := openai.ChatCompletionNewParams{Model: s.state.Model, MaxTokens: openai.Int(8),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Over TLS?")}}
	cc, err := client.Chat.Completions.New(ctx, params)
	if err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" {
		t.Fatalf("chat over https: %+v %v", cc, err)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.Len() == 0 {
		t.Fatalf("streamed chat over https: %q %v", text.String(), err)
	}
	queued, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: s.state.Model, Background: openai.Bool(true), MaxOutputTokens: openai.Int(8),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Run me in the background.")}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the background response run over https", func() bool {
		got, err := client.Responses.Get(ctx, queued.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == responses.ResponseStatusFailed || got.Status == responses.ResponseStatusCancelled {
			t.Fatalf("the background response: %s", got.RawJSON())
		}
		return got.Status == responses.ResponseStatusCompleted || got.Status == responses.ResponseStatusIncomplete
	})

	resp, err := hc.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("models over https: %d %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	// plaintext to the API port gets no API answer
	if resp, err := http.Get("http://" + s.state.Gateway + "/v1/models"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plaintext answered: %s", b)
		}
	}
	// a client that does not trust the stack's CA is refused the handshake
	if resp, err = (&http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}).Get(base + "/v1/models"); err == nil {
		resp.Body.Close()
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("an untrusting client: %v", err)
	}
}
