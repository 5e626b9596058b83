package bus

import (
	"errors"
	"fmt"
	"strings"
)

// Subject prefixes of the event-sourcing contract; a pool (and for kv and
// metrics an endpoint) follows as escaped tokens.
const (
	KVPrefix          = "hermod.kv."
	MetricsPrefix     = "hermod.metrics."
	DecisionsPrefix   = "hermod.decisions."
	CompletionsPrefix = "hermod.completions."
	ScalingPrefix     = "hermod.scaling."
	ConfigPrefix      = "hermod.config."
	FlowControlPrefix = "hermod.flowcontrol."
)

// ErrEmptyName is returned by the subject and key builders for an empty pool
// or endpoint name.
var ErrEmptyName = errors.New("empty name")

// MetricsSubject returns hermod.metrics.<pool>.<endpoint>, on which the
// collector publishes an endpoint's PodMetrics.
func MetricsSubject(pool, endpoint string) (string, error) {
	return endpointSubject(MetricsPrefix, pool, endpoint)
}

// MetricsFilter returns hermod.metrics.<pool>.*, which matches the metrics
// of every endpoint of a pool.
func MetricsFilter(pool string) (string, error) {
	p, err := poolToken(pool)
	if err != nil {
		return "", fmt.Errorf("metrics filter: %w", err)
	}
	return MetricsPrefix + p + ".*", nil
}

// KVSubject returns hermod.kv.<pool>.<pod>, on which the indexer ingest
// publishes a pod's KV-cache events.
func KVSubject(pool, pod string) (string, error) {
	return endpointSubject(KVPrefix, pool, pod)
}

// DecisionsSubject returns hermod.decisions.<pool>, the routing decisions of
// a pool.
func DecisionsSubject(pool string) (string, error) {
	return poolSubject(DecisionsPrefix, pool)
}

// CompletionsSubject returns hermod.completions.<pool>, the completed
// requests of a pool.
func CompletionsSubject(pool string) (string, error) {
	return poolSubject(CompletionsPrefix, pool)
}

// ScalingSubject returns hermod.scaling.<pool>, the scaling decisions of a
// pool.
func ScalingSubject(pool string) (string, error) {
	return poolSubject(ScalingPrefix, pool)
}

// ConfigSubject returns hermod.config.<pool>, on which picker replicas
// publish ConfigStatus events (core NATS, not a stream).
func ConfigSubject(pool string) (string, error) {
	return poolSubject(ConfigPrefix, pool)
}

// FlowControlSubject returns hermod.flowcontrol.<pool>.<replica>, on which
// a gateway replica publishes its FlowControlQueue (core NATS).
func FlowControlSubject(pool, replica string) (string, error) {
	return endpointSubject(FlowControlPrefix, pool, replica)
}

// FlowControlFilter returns hermod.flowcontrol.<pool>.*, every gateway
// replica's queue of a pool.
func FlowControlFilter(pool string) (string, error) {
	p, err := poolToken(pool)
	if err != nil {
		return "", fmt.Errorf("flow control filter: %w", err)
	}
	return FlowControlPrefix + p + ".*", nil
}

// ParseMetricsSubject returns the pool and endpoint names of a
// hermod.metrics.<pool>.<endpoint> subject. It fails with ErrInvalidToken
// for any other subject.
func ParseMetricsSubject(subject string) (pool, endpoint string, err error) {
	return parseEndpointSubject(MetricsPrefix, subject)
}

// ParseKVSubject returns the pool and pod names of a hermod.kv.<pool>.<pod>
// subject. It fails with ErrInvalidToken for any other subject.
func ParseKVSubject(subject string) (pool, pod string, err error) {
	return parseEndpointSubject(KVPrefix, subject)
}

func poolToken(pool string) (string, error) {
	if pool == "" {
		return "", fmt.Errorf("pool: %w", ErrEmptyName)
	}
	return EscapeToken(pool), nil
}

func poolSubject(prefix, pool string) (string, error) {
	p, err := poolToken(pool)
	if err != nil {
		return "", fmt.Errorf("%ssubject: %w", prefix, err)
	}
	return prefix + p, nil
}

func endpointSubject(prefix, pool, endpoint string) (string, error) {
	p, err := poolToken(pool)
	if err != nil {
		return "", fmt.Errorf("%ssubject: %w", prefix, err)
	}
	if endpoint == "" {
		return "", fmt.Errorf("%ssubject: endpoint: %w", prefix, ErrEmptyName)
	}
	return prefix + p + "." + EscapeToken(endpoint), nil
}

func parseEndpointSubject(prefix, subject string) (pool, endpoint string, err error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", fmt.Errorf("subject %q does not start with %q: %w", subject, prefix, ErrInvalidToken)
	}
	ptok, etok, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", fmt.Errorf("subject %q has no endpoint token: %w", subject, ErrInvalidToken)
	}
	if pool, err = UnescapeToken(ptok); err != nil {
		return "", "", fmt.Errorf("subject %q: pool: %w", subject, err)
	}
	// A further '.' in etok is rejected by UnescapeToken.
	if endpoint, err = UnescapeToken(etok); err != nil {
		return "", "", fmt.Errorf("subject %q: endpoint: %w", subject, err)
	}
	return pool, endpoint, nil
}
