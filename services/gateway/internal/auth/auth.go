// Package auth checks the gateway's optional API keys (Authorization:
// Bearer <key>, or x-api-key: <key> as Anthropic's clients send it) and
// applies per-key rate limits.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/telemetry"
)

// Key is one API key and its rate limit.
type Key struct {
	// Name identifies the key in logs and metrics (never the key itself).
	Name string
	// Secret is the bearer token.
	Secret string
	// RPS and Burst limit the key's request rate; RPS 0 = unlimited.
	RPS   float64
	Burst int
}

// ParseKeys reads a keys file: one key per line as
//
//	<name> <secret> [<requests-per-second> [<burst>]]
//
// with blank lines and '#' comments ignored. The burst defaults to the
// rate rounded up (at least 1).
func ParseKeys(data []byte) ([]Key, error) {
	var keys []Key
	names := map[string]bool{}
	secrets := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 4 {
			return nil, fmt.Errorf("line %d: want <name> <secret> [<requests-per-second> [<burst>]]", n)
		}
		k := Key{Name: f[0], Secret: f[1]}
		if names[k.Name] {
			return nil, fmt.Errorf("line %d: key name %q used twice", n, k.Name)
		}
		if secrets[k.Secret] {
			return nil, fmt.Errorf("line %d: key %q has the secret of another key", n, k.Name)
		}
		names[k.Name], secrets[k.Secret] = true, true
		if len(f) >= 3 {
			rps, err := strconv.ParseFloat(f[2], 64)
			if err != nil || rps < 0 || math.IsInf(rps, 0) || math.IsNaN(rps) {
				return nil, fmt.Errorf("line %d: requests-per-second %q: must be a number >= 0", n, f[2])
			}
			k.RPS = rps
			k.Burst = max(1, int(math.Ceil(rps)))
		}
		if len(f) == 4 {
			b, err := strconv.Atoi(f[3])
			if err != nil || b < 1 {
				return nil, fmt.Errorf("line %d: burst %q: must be an integer >= 1", n, f[3])
			}
			k.Burst = b
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys")
	}
	return keys, nil
}

// LoadKeys reads a keys file (see ParseKeys).
func LoadKeys(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read api keys: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("api keys %s: %w", path, err)
	}
	return keys, nil
}

type entry struct {
	name    string
	label   string // the name's KeyLabel
	limiter *rate.Limiter
}

// KeyLabel is how metrics name an API key: the first 8 hex digits of
// the SHA-256 of its name, so that a scrape lists no key names (an
// operator finds a key's label with `printf %s name | sha256sum`).
func KeyLabel(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:4])
}

// Guard admits requests that carry a known key and are within its limit.
type Guard struct {
	keys    map[[32]byte]entry
	limited *prometheus.CounterVec
	refused prometheus.Counter
}

// NewGuard returns a Guard for keys; reg registers its metrics (nil: not).
func NewGuard(keys []Key, reg prometheus.Registerer) *Guard {
	g := &Guard{
		keys:    make(map[[32]byte]entry, len(keys)),
		limited: telemetry.NewCounterVec("hermod_gateway_rate_limited_total", "Requests refused by their API key's rate limit, by key (the first 8 hex digits of the SHA-256 of its name).", "key"),
		refused: telemetry.NewCounter("hermod_gateway_unauthorized_total", "Requests refused for a missing or unknown API key."),
	}
	for _, k := range keys {
		e := entry{name: k.Name, label: KeyLabel(k.Name)}
		if k.RPS > 0 {
			e.limiter = rate.NewLimiter(rate.Limit(k.RPS), k.Burst)
		}
		g.keys[sha256.Sum256([]byte(k.Secret))] = e
	}
	if reg != nil {
		reg.MustRegister(g.limited, g.refused)
	}
	return g
}

// Wrap checks every request before next serves it. The key is removed from
// the request, so it never reaches a model server.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := apiKey(r.Header)
		e, known := g.lookup(token)
		anthropic := openai.AnthropicPath(r.URL.Path)
		if !ok || !known {
			g.refused.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="hermod"`)
			(&openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeAuthentication, Code: "invalid_api_key",
				Message: "Incorrect or missing API key.", Anthropic: anthropic}).Write(w)
			return
		}
		if e.limiter != nil {
			res := e.limiter.Reserve()
			if d := res.Delay(); d > 0 {
				res.Cancel()
				g.limited.WithLabelValues(e.label).Inc()
				(&openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit, Code: "rate_limit_exceeded",
					Message:    fmt.Sprintf("Rate limit of API key %q exceeded; retry in %s.", e.name, d.Round(time.Millisecond)),
					RetryAfter: int(math.Ceil(d.Seconds())), Anthropic: anthropic}).Write(w)
				return
			}
		}
		r.Header.Del("Authorization")
		r.Header.Del(APIKeyHeader)
		r.Header.Del(TenantHeader)
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), e.name)))
	})
}

// APIKeyHeader carries an API key the way Anthropic's clients send it,
// accepted where "Authorization: Bearer" is.
const APIKeyHeader = "X-Api-Key"

// apiKey returns the key a request presents: its Authorization bearer
// token, else its x-api-key; ok is false when it presents none.
func apiKey(h http.Header) (string, bool) {
	if v := h.Get("Authorization"); v != "" {
		return bearer(v)
	}
	if v := strings.TrimSpace(h.Get(APIKeyHeader)); v != "" {
		return v, true
	}
	return "", false
}

// bearer returns the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 9110 11.1).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// lookup finds a key by its secret. The map is keyed by the secret's
// SHA-256, so a lookup's timing says nothing about the secrets.
func (g *Guard) lookup(secret string) (entry, bool) {
	if secret == "" {
		return entry{}, false
	}
	e, ok := g.keys[sha256.Sum256([]byte(secret))]
	return e, ok
}
