// Package runner sends a workload to an OpenAI endpoint on its schedule
// and records what every request saw, while sampling every pod's queues.
//
// Times run at a speed factor: with the simulator running simulated time
// S times faster than the wall clock, the schedule is compressed by S and
// every measured time is multiplied by S, so results are in simulated
// seconds and compare across speeds.
package runner

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/tools/loadgen/workload"
)

// Pod is a pod whose queues are sampled.
type Pod struct {
	Name string
	// Address is host:port of the pod's HTTP server (as the gateway
	// reports it in x-decoder-host-port).
	Address string
}

// Options configure a run.
type Options struct {
	// BaseURL is the OpenAI API, e.g. http://127.0.0.1:8080.
	BaseURL string
	// MoreBaseURLs are more replicas of the API: the requests go to
	// BaseURL and these in turn (request i to the (i mod n)th), as a
	// client spreading its load over several gateways does.
	MoreBaseURLs []string
	APIKey       string
	Model        string
	// Stream sends streaming requests (and records TTFT).
	Stream bool
	// Speed is the simulator's speed factor (1: real time).
	Speed float64
	// Timeout bounds each request, in simulated time.
	Timeout time.Duration
	// SendGap is the least time between two sends (simulated; 0: none).
	// Requests due at once leave in workload order, SendGap apart, so that
	// a burst reaches the router in order even when the router handles
	// requests concurrently.
	SendGap time.Duration
	// Pods are sampled every SampleInterval (simulated) for queue lengths.
	Pods           []Pod
	SampleInterval time.Duration
	// Progress, if set, receives a progress bar while the run goes.
	Progress io.Writer
	// Log, if set, receives a line per request sent and finished.
	Log io.Writer
	// KeepText keeps each answer's text in the results.
	KeepText bool
	// Client sends the requests (default: one without connection limits,
	// closed when the run ends).
	Client *http.Client

	ownClient bool
}

func (o *Options) defaults() error {
	if o.BaseURL == "" {
		return errors.New("runner: the OpenAI base URL is required")
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	if o.Speed < 0 {
		return fmt.Errorf("runner: speed must be positive (got %v)", o.Speed)
	}
	if o.Timeout <= 0 {
		o.Timeout = 600 * time.Second
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = time.Second
	}
	if o.Client == nil {
		o.ownClient = true
		o.Client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
	}
	return nil
}

// run is one run in progress.
type run struct {
	o     Options
	urls  []string
	sent  atomic.Uint64 // requests handed a URL, for the rotation
	start time.Time
	done  atomic.Int64
	fail  atomic.Int64
	pods  map[string]string // address -> name
	logMu sync.Mutex
}

// sim converts a wall-clock duration to simulated seconds.
func (r *run) sim(d time.Duration) float64 { return d.Seconds() * r.o.Speed }

// wall converts a simulated duration to wall-clock time.
func (r *run) wall(d time.Duration) time.Duration { return time.Duration(float64(d) / r.o.Speed) }

// Run sends every request of w at its time, waits for all of them and
// returns the results. It fails only when it cannot run at all; failed
// requests are results.
func Run(ctx context.Context, w *workload.Workload, o Options) (*Results, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if o.ownClient {
		defer o.Client.CloseIdleConnections()
	}
	r := &run{o: o, pods: map[string]string{}}
	for _, u := range append([]string{o.BaseURL}, o.MoreBaseURLs...) {
		r.urls = append(r.urls, strings.TrimRight(u, "/")+"/v1/completions")
	}
	for _, p := range o.Pods {
		r.pods[p.Address] = p.Name
	}
	res := &Results{Workload: w.Name, Target: o.BaseURL, Speed: o.Speed, Stream: o.Stream, Requests: make([]Result, len(w.Requests))}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	r.start = time.Now()
	res.Started = r.start
	sampled := make(chan []QueueSeries, 1)
	go func() { sampled <- r.sample(sampleCtx) }()
	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() { defer close(progressDone); r.progress(len(w.Requests), stopProgress) }()

	var wg sync.WaitGroup
	r.dispatch(ctx, w, func(i int, sent time.Time, written chan struct{}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Requests[i] = r.launch(ctx, &w.Requests[i], sent, written)
		}()
	})
	wg.Wait()
	total := r.sim(time.Since(r.start))
	close(stopProgress)
	<-progressDone
	stopSampling()
	res.Queues = <-sampled
	res.Summary = Summarize(res.Requests, total)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("runner: interrupted: %w", err)
	}
	return res, nil
}

// sendOrderWait bounds how long the dispatcher waits for a request to be
// written before it sends the next one due at the same time.
const sendOrderWait = 5 * time.Millisecond

// dispatch starts the requests in launch order (launch time, then
// workload order), each when it is due. Like the reference's single event
// loop, requests due at once leave in order: the next one starts when the
// previous one is written (or after sendOrderWait) and at least SendGap
// after it.
func (r *run) dispatch(ctx context.Context, w *workload.Workload, start func(i int, sent time.Time, written chan struct{})) {
	order := make([]int, len(w.Requests))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(w.Requests[a].At, w.Requests[b].At) })
	var last time.Time
	for n, i := range order {
		if ctx.Err() != nil {
			// the rest fail at once, as cancelled
			for _, j := range order[n:] {
				start(j, time.Time{}, nil)
			}
			return
		}
		due := r.start.Add(r.wall(w.Requests[i].At))
		if !last.IsZero() && r.o.SendGap > 0 {
			due = later(due, last.Add(r.wall(r.o.SendGap)))
		}
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				for _, j := range order[n:] {
					start(j, time.Time{}, nil)
				}
				return
			case <-t.C:
			}
		}
		written := make(chan struct{})
		// the send time is taken here, not in the request's goroutine,
		// so that goroutine start-up does not blur the launch order
		last = time.Now()
		start(i, last, written)
		t := time.NewTimer(sendOrderWait)
		select {
		case <-written:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// launch sends the request (the dispatcher let it go at sent) and closes
// written once the request is on the wire.
func (r *run) launch(ctx context.Context, q *workload.Request, sent time.Time, written chan<- struct{}) Result {
	res := Result{ID: q.ID, Kind: q.Kind, Scheduled: q.At.Seconds()}
	if written == nil || ctx.Err() != nil {
		res.Error = "the run was interrupted before this request was sent"
		r.fail.Add(1)
		r.done.Add(1)
		return res
	}
	res.Sent = r.sim(sent.Sub(r.start))
	r.logf("[SEND] %-15s scheduled=%.3fs actual=%.3fs", q.ID, res.Scheduled, res.Sent)
	r.send(ctx, q, &res, written)
	if !res.OK() {
		r.fail.Add(1)
	}
	r.done.Add(1)
	if res.OK() {
		r.logf("[%s] status=%d latency=%.3fs pod=%s", q.ID, res.Status, res.Latency, res.Pod)
	} else {
		r.logf("[%s] status=%d latency=%.3fs error=%s", q.ID, res.Status, res.Latency, res.Error)
	}
	return res
}

func (r *run) logf(format string, args ...any) {
	if r.o.Log == nil {
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.o.Log, format+"\n", args...)
}

// completionBody is the reference's request body.
type completionBody struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	TopP          float64        `json:"top_p"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// answer is what the runner reads of a completion (or of a stream chunk).
type answer struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// send sends the request and reads its answer to the end.
func (r *run) send(ctx context.Context, q *workload.Request, res *Result, written chan<- struct{}) {
	var once sync.Once
	wrote := func() { once.Do(func() { close(written) }) }
	defer wrote()
	body := completionBody{Model: r.o.Model, Prompt: q.Prompt, MaxTokens: q.MaxTokens, TopP: 1, Stream: r.o.Stream}
	if r.o.Stream {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	b, err := json.Marshal(body)
	if err != nil {
		res.Error = err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.wall(r.o.Timeout))
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }})
	url := r.urls[(r.sent.Add(1)-1)%uint64(len(r.urls))]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		res.Error = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if r.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.APIKey)
	}
	for k, v := range q.Headers {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	defer func() { res.Latency = r.sim(time.Since(t0)) }()
	resp, err := r.o.Client.Do(req)
	if err != nil {
		res.Error = err.Error()
		return
	}
	defer resp.Body.Close()
	res.Status, res.RequestID = resp.StatusCode, resp.Header.Get("X-Request-Id")
	if hp := resp.Header.Get("X-Decoder-Host-Port"); hp != "" {
		res.Pod = hp
		if name, ok := r.pods[hp]; ok {
			res.Pod = name
		}
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		res.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return
	}
	if r.o.Stream {
		r.readStream(resp.Body, t0, res)
		return
	}
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		res.Error = fmt.Sprintf("reading the answer: %v", err)
		return
	}
	r.take(&a, res)
}

// readStream reads SSE events to [DONE], noting the first token's time.
func (r *run) readStream(body io.Reader, t0 time.Time, res *Result) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var text strings.Builder
	sawDone := false
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			sawDone = true
			break
		}
		var a answer
		if err := json.Unmarshal(data, &a); err != nil {
			res.Error = fmt.Sprintf("stream event: %v", err)
			return
		}
		if len(a.Choices) > 0 && res.TTFT == nil {
			ttft := r.sim(time.Since(t0))
			res.TTFT = &ttft
		}
		if r.o.KeepText && len(a.Choices) > 0 {
			text.WriteString(a.Choices[0].Text)
		}
		r.usage(&a, res)
	}
	if err := sc.Err(); err != nil {
		res.Error = fmt.Sprintf("reading the stream: %v", err)
		return
	}
	if !sawDone {
		res.Error = "the stream ended without [DONE]"
	}
	res.Text = text.String()
}

// usage takes the token counts of an answer (or of a stream's usage chunk).
func (r *run) usage(a *answer, res *Result) {
	if u := a.Usage; u != nil {
		res.PromptTokens, res.CompletionTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			res.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
}

func (r *run) take(a *answer, res *Result) {
	r.usage(a, res)
	if r.o.KeepText && len(a.Choices) > 0 {
		res.Text = strings.TrimSpace(a.Choices[0].Text)
	}
}
