package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// Central ingests in centralized mode (spec/vllm-wire.md §1): the indexer
// binds one SUB socket and the pods connect to it (vLLM with a connecting
// "endpoint", llm-d's simulator with --zmq-endpoint). A batch's pod is
// named by its topic, kv@<pod>@<model>, where <pod> is a registered
// endpoint's name, its address or its address:port. Each pod's batches go
// through a sequencer of their own, replayed from the pod's replay
// endpoint when it registered one.
type Central struct {
	mg     *Manager
	bind   string
	prefix string

	mu      sync.Mutex
	byName  map[string]Target
	byAddr  map[string]string // address or address:port -> pod name
	seqs    map[string]*centralPod
	unknown map[string]bool // topics already logged as unknown
}

type centralPod struct {
	t     Target
	seq   sequencer
	f     *follower // for emit, replay and the metrics
	heard time.Time // the last batch off the socket
}

// NewCentral returns a centralized ingest on bind (e.g. tcp://*:5557).
func (mg *Manager) NewCentral(bind, topicPrefix string) *Central {
	if topicPrefix == "" {
		topicPrefix = DefaultTopicPrefix
	}
	return &Central{mg: mg, bind: bind, prefix: topicPrefix, byName: map[string]Target{}, byAddr: map[string]string{}, seqs: map[string]*centralPod{}, unknown: map[string]bool{}}
}

// SetPods sets the registered pods, with the addresses their topics may
// name them by (address and address:port).
func (c *Central) SetPods(ts []Target, addrs map[string][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byName, c.byAddr = map[string]Target{}, map[string]string{}
	for _, t := range ts {
		c.byName[t.Pod] = t
		for _, a := range addrs[t.Pod] {
			c.byAddr[a] = t.Pod
		}
	}
	for pod, p := range c.seqs {
		if t, ok := c.byName[pod]; !ok || !p.t.sameSource(t) {
			delete(c.seqs, pod) // gone or changed: starts afresh if it returns
		}
	}
}

// podOf resolves a topic's pod. The caller holds c.mu.
func (c *Central) podOf(topic string) (Target, bool) {
	rest, ok := strings.CutPrefix(topic, "kv@")
	if !ok {
		return Target{}, false
	}
	pod, _, _ := strings.Cut(rest, "@")
	if t, ok := c.byName[pod]; ok {
		return t, true
	}
	if name, ok := c.byAddr[pod]; ok {
		return c.byName[name], true
	}
	return Target{}, false
}

// Run binds, reports the outcome on bound (if not nil), and receives
// until ctx ends.
func (c *Central) Run(ctx context.Context, bound chan<- error) error {
	sub, err := kvzmq.Subscribe(c.bind, true, c.prefix, c.mg.cfg.HWM)
	if bound != nil {
		bound <- err
	}
	if err != nil {
		return err
	}
	defer func() { _ = sub.Close() }()
	c.mg.log.Info("receiving KV events from connecting pods", "bind", c.bind)
	lastCheck := time.Now()
	for ctx.Err() == nil {
		m, err := sub.Recv(pollInterval)
		if time.Since(lastCheck) >= idleCheck {
			c.checkQuiet()
			lastCheck = time.Now()
		}
		if errors.Is(err, kvzmq.ErrTimeout) {
			continue
		}
		if err != nil {
			c.mg.m.errors.WithLabelValues("receive").Inc()
			continue
		}
		c.receive(ctx, m)
	}
	return nil
}

func (c *Central) receive(ctx context.Context, m kvzmq.Message) {
	c.mu.Lock()
	t, ok := c.podOf(m.Topic)
	if !ok {
		if !c.unknown[m.Topic] && len(c.unknown) < 1024 {
			c.unknown[m.Topic] = true
			c.mg.log.Warn("KV events from a pod that is not registered; dropped", "topic", m.Topic)
		}
		c.mu.Unlock()
		c.mg.m.errors.WithLabelValues("unknown_pod").Inc()
		return
	}
	p := c.seqs[t.Pod]
	if p == nil {
		f := &follower{mg: c.mg, t: t, log: c.mg.log.With("pod", t.Pod), ctx: ctx}
		p = &centralPod{t: t, f: f}
		p.seq = sequencer{replay: f.replay, emit: f.emit}
		if t.Resume != nil {
			p.seq.started, p.seq.next, p.seq.lastLive = true, *t.Resume+1, *t.Resume
		}
		c.seqs[t.Pod] = p
	}
	p.heard = time.Now()
	c.mu.Unlock()
	p.seq.receive(m)
	p.f.countRepairs(p.seq.stats)
}

// checkQuiet asks the replay socket of every pod that has been quiet a
// while for batches lost at the end of a burst (a gap is otherwise seen
// only when a later batch arrives), as followers do.
func (c *Central) checkQuiet() {
	c.mu.Lock()
	var quiet []*centralPod
	for _, p := range c.seqs {
		if p.seq.started && p.t.Replay != "" && time.Since(p.heard) >= idleCheck {
			quiet = append(quiet, p)
		}
	}
	c.mu.Unlock()
	for _, p := range quiet {
		p.seq.resume()
		p.f.countRepairs(p.seq.stats)
		p.heard = time.Now()
	}
}
