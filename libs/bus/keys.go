package bus

import (
	"fmt"
	"strings"
)

// KV keys may only hold [-/_=.a-zA-Z0-9], so names are escaped differently
// from subject tokens: every other byte, '.' (the key's element separator)
// and the escape byte '=' become "=XX" with two upper-case hex digits.
// "10.0.0.5:8000" becomes "10=2E0=2E0=2E5=3A8000".
func mustEscapeInKey(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return false
	case b == '-' || b == '_' || b == '/':
		return false
	}
	return true
}

func escapeKeyElement(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscapeInKey(c) {
			b.WriteByte('=')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0x0f])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MetricsKey returns the key of an endpoint's latest PodMetrics in the
// HERMOD_METRICS bucket: "<pool>.<endpoint>", each name escaped for a KV key
// (bytes outside [-/_a-zA-Z0-9] become "=XX"). Keys of one pool match the
// watch pattern MetricsKeyFilter(pool).
func MetricsKey(pool, endpoint string) (string, error) {
	if pool == "" {
		return "", fmt.Errorf("metrics key: pool: %w", ErrEmptyName)
	}
	if endpoint == "" {
		return "", fmt.Errorf("metrics key: endpoint: %w", ErrEmptyName)
	}
	return escapeKeyElement(pool) + "." + escapeKeyElement(endpoint), nil
}

// MetricsKeyFilter returns "<pool>.*", the KV watch pattern of a pool's
// metrics keys.
func MetricsKeyFilter(pool string) (string, error) {
	if pool == "" {
		return "", fmt.Errorf("metrics key filter: pool: %w", ErrEmptyName)
	}
	return escapeKeyElement(pool) + ".*", nil
}

// ParseMetricsKey returns the pool and endpoint names of a MetricsKey. It
// fails with ErrInvalidToken for a key that MetricsKey cannot return.
func ParseMetricsKey(key string) (pool, endpoint string, err error) {
	ptok, etok, ok := strings.Cut(key, ".")
	if !ok {
		return "", "", fmt.Errorf("metrics key %q has no endpoint element: %w", key, ErrInvalidToken)
	}
	if pool, err = unescape(ptok, '=', mustEscapeInKey); err != nil {
		return "", "", fmt.Errorf("metrics key %q: pool: %w", key, err)
	}
	if endpoint, err = unescape(etok, '=', mustEscapeInKey); err != nil {
		return "", "", fmt.Errorf("metrics key %q: endpoint: %w", key, err)
	}
	return pool, endpoint, nil
}
