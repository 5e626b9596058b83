package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// Central ingests in centralized mode (spec/vllm-wire.md §1): the indexer
// binds one SUB socket and the pods connect to it (vLLM with a connecting
// "endpoint", llm-d's simulator with --zmq-endpoint). A batch's pod is
// named by its topic, kv@<pod>@<model>, where <pod> is a registered
// endpoint's name, its address or its address:port. The receive loop only
// hands each batch to its pod's worker (Manager): the pods this replica
// owns were started from the registry, caught up from their replay
// sockets and are watched for silence whether or not they have published
// since; a registered pod owned by another replica that connected here
// anyway gets a worker when its first batch arrives.
type Central struct {
	mg     *Manager
	bind   string
	prefix string

	mu      sync.Mutex
	byName  map[string]Target
	byAddr  map[string]string // address or address:port -> pod name
	unknown map[string]bool   // topics already logged as unknown
}

// NewCentral returns a centralized ingest on bind (e.g. tcp://*:5557).
func (mg *Manager) NewCentral(bind, topicPrefix string) *Central {
	if topicPrefix == "" {
		topicPrefix = DefaultTopicPrefix
	}
	return &Central{mg: mg, bind: bind, prefix: topicPrefix, byName: map[string]Target{}, byAddr: map[string]string{}, unknown: map[string]bool{}}
}

// SetPods sets the registered pods, with the addresses their topics may
// name them by (address and address:port). The pods this replica does not
// own and that are gone or changed are forgotten.
func (c *Central) SetPods(ts []Target, addrs map[string][]string) {
	byName, byAddr := make(map[string]Target, len(ts)), map[string]string{}
	for _, t := range ts {
		if t.Topic == "" {
			t.Topic = DefaultTopicPrefix
		}
		byName[t.Pod] = t
		for _, a := range addrs[t.Pod] {
			byAddr[a] = t.Pod
		}
	}
	c.mu.Lock()
	c.byName, c.byAddr = byName, byAddr
	c.mu.Unlock()
	c.mg.dropVisitors(byName)
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
// until ctx ends (within pollInterval).
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
	for ctx.Err() == nil {
		m, err := sub.Recv(pollInterval)
		if errors.Is(err, kvzmq.ErrTimeout) {
			continue
		}
		if err != nil {
			c.mg.m.errors.WithLabelValues("receive").Inc()
			continue
		}
		c.receive(m)
	}
	return nil
}

func (c *Central) receive(m kvzmq.Message) {
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
	c.mu.Unlock()
	c.mg.deliver(t, m)
}
