package scheduling

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Quantity is a count or a size written as Kubernetes writes quantities
// (flowControl.maxBytes: 10Gi, maxRequests: "1k"): a decimal number, an
// optional exponent (1e3) or suffix, binary (Ki Mi Gi Ti Pi Ei) or decimal
// (m k M G T P E). Value rounds a fraction up, as resource.Quantity.Value
// does.
type Quantity struct {
	Text  string // as written
	Value int64
}

// quantitySuffixes are the multipliers of Kubernetes quantity suffixes.
var quantitySuffixes = map[string]*big.Rat{
	"Ki": pow(2, 10), "Mi": pow(2, 20), "Gi": pow(2, 30), "Ti": pow(2, 40), "Pi": pow(2, 50), "Ei": pow(2, 60),
	"m": big.NewRat(1, 1000), "": big.NewRat(1, 1),
	"k": pow(10, 3), "M": pow(10, 6), "G": pow(10, 9), "T": pow(10, 12), "P": pow(10, 15), "E": pow(10, 18),
}

func pow(base, exp int64) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil))
}

// maxQuantityLen bounds what ParseQuantity reads: an exponent like 1e999999
// must not make it build a huge number.
const maxQuantityLen = 64

// ParseQuantity reads a non-negative quantity.
func ParseQuantity(s string) (Quantity, error) {
	text := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Quantity{}, errors.New("empty quantity")
	}
	if len(s) > maxQuantityLen {
		return Quantity{}, fmt.Errorf("%q is not a quantity (longer than %d characters)", s, maxQuantityLen)
	}
	num, suffix := splitQuantity(s)
	mult, ok := quantitySuffixes[suffix]
	exp := int64(0)
	if !ok {
		// 1e3, 2E6: an exponent where a suffix would be.
		if len(suffix) < 2 || (suffix[0] != 'e' && suffix[0] != 'E') {
			return Quantity{}, fmt.Errorf("%q is not a quantity (unknown suffix %q; use Ki, Mi, Gi, k, M, G ...)", s, suffix)
		}
		e, err := parseSmallInt(suffix[1:])
		if err != nil {
			return Quantity{}, fmt.Errorf("%q is not a quantity (bad exponent %q)", s, suffix[1:])
		}
		exp, mult = e, big.NewRat(1, 1)
	}
	if num == "" || num == "+" || num == "." || strings.HasPrefix(num, "-") {
		return Quantity{}, fmt.Errorf("%q is not a non-negative quantity", s)
	}
	r, ok := new(big.Rat).SetString(strings.TrimPrefix(num, "+"))
	if !ok {
		return Quantity{}, fmt.Errorf("%q is not a quantity", s)
	}
	r.Mul(r, mult)
	if exp != 0 {
		if exp > 30 || exp < -30 {
			return Quantity{}, fmt.Errorf("%q is out of range", s)
		}
		if exp > 0 {
			r.Mul(r, pow(10, exp))
		} else {
			r.Quo(r, pow(10, -exp))
		}
	}
	// Round a fraction up (1500m is 2).
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return Quantity{}, fmt.Errorf("%q is out of range", s)
	}
	return Quantity{Text: text, Value: q.Int64()}, nil
}

// splitQuantity splits "10Gi" into "10" and "Gi".
func splitQuantity(s string) (num, suffix string) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '+' || s[i] == '-') {
		i++
	}
	return s[:i], s[i:]
}

func parseSmallInt(s string) (int64, error) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	if s == "" || len(s) > 4 {
		return 0, errors.New("bad integer")
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad integer")
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}
