// Package local is the autoscaler's "local" actuator: it writes each
// variant's replica target to etcd (/hermod/autoscaler/<pool>/replicas/
// <variant>), where the devstack's fleet follows it by starting and
// stopping vllm-sim pods.
package local

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// ErrFenced is returned by Scale when the fence no longer holds: the
// caller is not the leader any more, and nothing was written.
var ErrFenced = errors.New("fenced: not the leader")

// Actuator writes replica targets to etcd.
type Actuator struct {
	cli  *clientv3.Client
	pool string

	mu    sync.Mutex
	fence []clientv3.Cmp
}

// New returns the local actuator of pool.
func New(cli *clientv3.Client, pool string) *Actuator {
	return &Actuator{cli: cli, pool: pool}
}

// Fence makes every write conditional on cmps (the leader's election key
// still being its own), so a deposed leader cannot scale.
func (a *Actuator) Fence(cmps ...clientv3.Cmp) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fence = cmps
}

// Name implements actuator.Actuator.
func (a *Actuator) Name() string { return "local" }

// State implements actuator.Actuator: the target written (0 when none
// was); the fleet's readiness is not known here (Ready -1).
func (a *Actuator) State(ctx context.Context, t actuator.Target) (actuator.State, error) {
	data, err := store.Get(ctx, a.cli, store.ReplicasKey(a.pool, t.Variant))
	if errors.Is(err, store.ErrNotFound) {
		return actuator.State{Desired: 0, Ready: -1}, nil
	}
	if err != nil {
		return actuator.State{}, fmt.Errorf("local actuator: %w", err)
	}
	n, err := store.ParseReplicas(data)
	if err != nil {
		return actuator.State{}, fmt.Errorf("local actuator: variant %s: %w", t.Variant, err)
	}
	return actuator.State{Desired: n, Ready: -1}, nil
}

// Scale implements actuator.Actuator.
func (a *Actuator) Scale(ctx context.Context, t actuator.Target, replicas int) error {
	if replicas < 0 {
		return fmt.Errorf("local actuator: variant %s: negative replicas %d", t.Variant, replicas)
	}
	a.mu.Lock()
	fence := a.fence
	a.mu.Unlock()
	ok, err := store.PutGuarded(ctx, a.cli, store.ReplicasKey(a.pool, t.Variant), []byte(strconv.Itoa(replicas)), fence...)
	if err != nil {
		return fmt.Errorf("local actuator: variant %s: %w", t.Variant, err)
	}
	if !ok {
		return fmt.Errorf("local actuator: variant %s: %w", t.Variant, ErrFenced)
	}
	return nil
}
