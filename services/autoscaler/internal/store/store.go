// Package store keeps the autoscaler's objects in etcd under
// /hermod/autoscaler/<pool>/: the VariantAutoscaling objects and the
// analyzer ConfigMaps (as the YAML they were applied with), each variant's
// status, the leader's persisted state (learned queueing-model parameters,
// the models' last activity) and the local actuator's replica targets.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/coord"
)

// Key elements under a pool.
const (
	statusDir = "status/"
	stateKey  = "state"
)

// PoolPrefix returns /hermod/autoscaler/<pool>/.
func PoolPrefix(pool string) string { return coord.AutoscalerPrefix(pool) }

// VariantsPrefix returns the prefix of a pool's VariantAutoscaling keys.
func VariantsPrefix(pool string) string { return coord.AutoscalerVariantsPrefix(pool) }

// ConfigMapsPrefix returns the prefix of a pool's ConfigMaps' keys.
func ConfigMapsPrefix(pool string) string { return coord.AutoscalerConfigMapsPrefix(pool) }

// VariantKey returns /hermod/autoscaler/<pool>/variants/<name>.
func VariantKey(pool, name string) string { return VariantsPrefix(pool) + name }

// ConfigMapKey returns /hermod/autoscaler/<pool>/configmaps/<name>.
func ConfigMapKey(pool, name string) string { return ConfigMapsPrefix(pool) + name }

// StatusPrefix returns the prefix of a pool's variant statuses.
func StatusPrefix(pool string) string { return PoolPrefix(pool) + statusDir }

// StatusKey returns /hermod/autoscaler/<pool>/status/<variant>.
func StatusKey(pool, variant string) string { return StatusPrefix(pool) + variant }

// ReplicasPrefix returns the prefix of the local actuator's targets.
func ReplicasPrefix(pool string) string { return coord.ReplicaTargetsPrefix(pool) }

// ReplicasKey returns /hermod/autoscaler/<pool>/replicas/<variant>, the
// local actuator's replica target for a variant (a decimal count).
func ReplicasKey(pool, variant string) string { return coord.ReplicaTargetKey(pool, variant) }

// StateKey returns /hermod/autoscaler/<pool>/state, the leader's persisted
// state.
func StateKey(pool string) string { return PoolPrefix(pool) + stateKey }

// ErrNotFound is returned for a missing key.
var ErrNotFound = errors.New("not found")

// Object is one applied object: its key's last element and its YAML.
type Object struct {
	Name string
	Data []byte
	// Revision is the object's etcd mod revision.
	Revision int64
}

// Put writes a key's value.
func Put(ctx context.Context, cli *clientv3.Client, key string, data []byte) error {
	if _, err := cli.Put(ctx, key, string(data)); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Delete removes a key; it reports whether it existed.
func Delete(ctx context.Context, cli *clientv3.Client, key string) (bool, error) {
	resp, err := cli.Delete(ctx, key)
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", key, err)
	}
	return resp.Deleted > 0, nil
}

// List returns the objects under prefix, sorted by name.
func List(ctx context.Context, cli *clientv3.Client, prefix string) ([]Object, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := make([]Object, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, Object{Name: strings.TrimPrefix(string(kv.Key), prefix), Data: kv.Value, Revision: kv.ModRevision})
	}
	return out, nil
}

// Get returns one key's value.
func Get(ctx context.Context, cli *clientv3.Client, key string) ([]byte, error) {
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return resp.Kvs[0].Value, nil
}

// PutJSON writes v as JSON, only while every guard holds (a leader's
// fence); ok is false when a guard failed.
func PutJSON(ctx context.Context, cli *clientv3.Client, key string, v any, guards ...clientv3.Cmp) (ok bool, err error) {
	data, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("put %s: %w", key, err)
	}
	return PutGuarded(ctx, cli, key, data, guards...)
}

// PutGuarded writes data only while every guard holds; ok is false when a
// guard failed.
func PutGuarded(ctx context.Context, cli *clientv3.Client, key string, data []byte, guards ...clientv3.Cmp) (bool, error) {
	resp, err := cli.Txn(ctx).If(guards...).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return false, fmt.Errorf("put %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

// GetJSON reads a JSON value into v.
func GetJSON(ctx context.Context, cli *clientv3.Client, key string, v any) error {
	data, err := Get(ctx, cli, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// ParseReplicas parses a ReplicasKey value.
func ParseReplicas(data []byte) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("replicas %q: not a count", data)
	}
	return n, nil
}
