package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The chaos tests' client: a steady mixed load (completions and chat,
// streamed and not, and stored Responses-API turns) that retries as
// OpenAI's SDKs do, so that what it counts as errors are the faults'
// unavoidable ones.

// chaosRetries is how many times the client tries a request again, and
// chaosBackoff the first pause (doubling): the SDKs' defaults are 2 and
// 0.5 s; a few more tries ride out a restart.
const (
	chaosRetries = 4
	chaosBackoff = 250 * time.Millisecond
)

// attempt is one try of a request.
type attempt struct {
	requestID string
	status    int
	err       error
	servedBy  string
	// accepted: the gateway answered 200, so the request must get one
	// decision and one completion in the streams.
	accepted bool
}

// call is one request of the load, with every attempt it took.
type call struct {
	index      int
	path       string
	streamed   bool
	began, end time.Time
	attempts   []attempt
	// responseID is the stored response a Responses-API call got
	// acknowledged (a 200 with an id).
	responseID string
}

// final is the attempt the client kept.
func (c *call) final() attempt { return c.attempts[len(c.attempts)-1] }

func (c *call) failed() bool {
	f := c.final()
	return f.err != nil || f.status != http.StatusOK
}

func (c *call) String() string {
	f := c.final()
	return fmt.Sprintf("%s stream=%t attempts=%d status=%d served_by=%s err=%v", c.path, c.streamed, len(c.attempts), f.status, f.servedBy, f.err)
}

// chaosLoad runs conc clients until stopped.
type chaosLoad struct {
	s      *devstack
	conc   int
	client *http.Client

	mu    sync.Mutex
	calls []*call
	next  int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (s *devstack) startChaosLoad(conc int) *chaosLoad {
	ctx, cancel := context.WithCancel(context.Background())
	// One kept-alive connection per client: no churn of connections
	// (and of ports in TIME_WAIT) beyond what the faults cause.
	transport := &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, IdleConnTimeout: time.Minute, DialTLSContext: dialAPI}
	l := &chaosLoad{s: s, conc: conc, cancel: cancel, client: &http.Client{Timeout: 60 * time.Second, Transport: transport}}
	for range conc {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				l.one(ctx)
			}
		}()
	}
	return l
}

// stop ends the load once every client's request in flight is done.
func (l *chaosLoad) stop() {
	l.cancel()
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// since returns the calls that began at or after t.
func (l *chaosLoad) since(t time.Time) []*call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*call
	for _, c := range l.calls {
		if !c.began.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// one sends the next request of the mix, with its retries; a request
// that the end of the load interrupts is not recorded.
func (l *chaosLoad) one(ctx context.Context) {
	l.mu.Lock()
	i := l.next
	l.next++
	l.mu.Unlock()
	c := &call{index: i, began: time.Now()}
	var body string
	if i%5 == 4 {
		c.path = "/v1/responses"
		body = fmt.Sprintf(`{"model":%q,"input":"chaos turn %d: what survives a crash?","max_output_tokens":8,"store":true}`, l.s.state.Model, i)
	} else {
		c.path, body, c.streamed = mixedRequest(l.s.state.Model, i)
	}
	pause := chaosBackoff
	for try := 0; ; try++ {
		a, id := l.try(c, body)
		if ctx.Err() != nil && a.err != nil {
			return // interrupted by the end of the load
		}
		c.attempts = append(c.attempts, a)
		c.responseID = id
		if !retriable(a) || try == chaosRetries {
			break
		}
		time.Sleep(pause)
		pause *= 2
	}
	c.end = time.Now()
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

// retriable is what the SDKs try again: no answer at all (the
// connection refused or dropped before a status), 408, 409, 429 and 5xx.
// A stream that broke after its 200 is not: its tokens were delivered.
func retriable(a attempt) bool {
	if a.status == 0 {
		return a.err != nil
	}
	return a.status == http.StatusRequestTimeout || a.status == http.StatusConflict || a.status == http.StatusTooManyRequests || a.status >= 500
}

// try sends the request once and reads its answer to the end.
func (l *chaosLoad) try(c *call, body string) (attempt, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.s.url(c.path), strings.NewReader(body))
	if err != nil {
		return attempt{err: err}, ""
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return attempt{err: err}, ""
	}
	defer resp.Body.Close()
	a := attempt{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id"), servedBy: resp.Header.Get("X-Decoder-Host-Port")}
	a.accepted = a.status == http.StatusOK
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		a.err = err
	case a.status != http.StatusOK:
		a.err = fmt.Errorf("status %d: %s", a.status, tail(string(b), 2))
	case c.streamed && !strings.HasSuffix(string(b), "data: [DONE]\n\n"):
		a.err = fmt.Errorf("stream did not end with [DONE]: %q", tail(string(b), 3))
	case !c.streamed && !json.Valid(b):
		a.err = fmt.Errorf("body is not JSON: %q", tail(string(b), 2))
	}
	var id string
	if a.err == nil && c.path == "/v1/responses" {
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &r) == nil {
			id = r.ID
		}
	}
	return a, id
}
