package disaggrollout

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// selector is a Kubernetes label selector in its string form
// ("app=x,tier!=cache,role in (prefill,decode),!canary,gen>3"): every
// requirement must hold. The empty selector holds for every label set.
type selector []requirement

type operator uint8

const (
	opEquals operator = iota
	opNotEquals
	opIn
	opNotIn
	opExists
	opDoesNotExist
	opGreaterThan
	opLessThan
)

// requirement is one clause of a selector. != and notin hold when the
// label is absent; > and < compare the label as an integer and fail when
// it is absent or not one.
type requirement struct {
	key    string
	op     operator
	values []string // sorted for in and notin; one for =, !=, >, <
}

// maxSelectorLen bounds the selector text.
const maxSelectorLen = 4096

// parseSelector parses the string form of a label selector, as kubectl's
// -l flag and the Kubernetes API's labelSelector parameter take it.
func parseSelector(s string) (selector, error) {
	if len(s) > maxSelectorLen {
		return nil, fmt.Errorf("longer than %d bytes", maxSelectorLen)
	}
	var sel selector
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return nil, errors.New("unbalanced ')'")
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth > 0 {
			return nil, errors.New("unbalanced '('")
		}
		clause := strings.TrimSpace(s[start:i])
		start = i + 1
		if clause == "" {
			if i == len(s) && len(sel) == 0 && strings.TrimSpace(s) == "" {
				break // the empty selector
			}
			return nil, fmt.Errorf("empty requirement at byte %d", i)
		}
		r, err := parseRequirement(clause)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", clause, err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func parseRequirement(c string) (requirement, error) {
	if rest, ok := strings.CutPrefix(c, "!"); ok {
		key := strings.TrimSpace(rest)
		if err := validKey(key); err != nil {
			return requirement{}, err
		}
		return requirement{key: key, op: opDoesNotExist}, nil
	}
	n := 0
	for n < len(c) && isKeyByte(c[n]) {
		n++
	}
	key, rest := c[:n], strings.TrimSpace(c[n:])
	if err := validKey(key); err != nil {
		return requirement{}, err
	}
	var op operator
	switch {
	case rest == "":
		return requirement{key: key, op: opExists}, nil
	case strings.HasPrefix(rest, "!="):
		op, rest = opNotEquals, rest[2:]
	case strings.HasPrefix(rest, "=="):
		op, rest = opEquals, rest[2:]
	case strings.HasPrefix(rest, "="):
		op, rest = opEquals, rest[1:]
	case strings.HasPrefix(rest, ">"):
		op, rest = opGreaterThan, rest[1:]
	case strings.HasPrefix(rest, "<"):
		op, rest = opLessThan, rest[1:]
	default:
		word := rest
		if i := strings.IndexAny(rest, " \t("); i >= 0 {
			word = rest[:i]
		}
		switch word {
		case "in":
			op = opIn
		case "notin":
			op = opNotIn
		default:
			return requirement{}, fmt.Errorf("expected an operator (=, ==, !=, in, notin, >, <) after the key, found %q", rest)
		}
		values, err := parseSet(strings.TrimSpace(rest[len(word):]))
		if err != nil {
			return requirement{}, err
		}
		return requirement{key: key, op: op, values: values}, nil
	}
	value := strings.TrimSpace(rest)
	if op == opGreaterThan || op == opLessThan {
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return requirement{}, fmt.Errorf("%q is not an integer", value)
		}
	} else if err := validValue(value); err != nil {
		return requirement{}, err
	}
	return requirement{key: key, op: op, values: []string{value}}, nil
}

// parseSet parses "(v1, v2, ...)".
func parseSet(s string) ([]string, error) {
	inner, ok := strings.CutPrefix(s, "(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return nil, fmt.Errorf("expected a parenthesised list of values, found %q", s)
	}
	inner = strings.TrimSuffix(inner, ")")
	if strings.TrimSpace(inner) == "" {
		return nil, errors.New("the list of values is empty")
	}
	var values []string
	for v := range strings.SplitSeq(inner, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, errors.New("an empty value in the list")
		}
		if err := validValue(v); err != nil {
			return nil, err
		}
		if !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	return values, nil
}

func isKeyByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' || b == '/'
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// validName checks a label name or value: at most 63 bytes of
// alphanumerics, '-', '_' and '.', beginning and ending with an
// alphanumeric (empty is allowed when empty is true).
func validName(s string, empty bool) error {
	switch {
	case s == "" && empty:
		return nil
	case s == "":
		return errors.New("empty name")
	case len(s) > 63:
		return fmt.Errorf("%q is longer than 63 bytes", s)
	case !isAlnum(s[0]) || !isAlnum(s[len(s)-1]):
		return fmt.Errorf("%q must begin and end with a letter or digit", s)
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '-' && b != '_' && b != '.' {
			return fmt.Errorf("%q holds %q: only letters, digits, '-', '_' and '.' are allowed", s, b)
		}
	}
	return nil
}

// validKey checks a label key: a name, optionally after a DNS subdomain
// prefix and '/'.
func validKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if err := validName(name, false); err != nil {
		return fmt.Errorf("label key %q: %w", k, err)
	}
	if !hasPrefix {
		return nil
	}
	if prefix == "" || len(prefix) > 253 {
		return fmt.Errorf("label key %q: the prefix must be a DNS subdomain of 1 to 253 bytes", k)
	}
	for part := range strings.SplitSeq(prefix, ".") {
		if part == "" || !isAlnum(part[0]) || !isAlnum(part[len(part)-1]) || strings.ToLower(part) != part {
			return fmt.Errorf("label key %q: the prefix %q is not a DNS subdomain", k, prefix)
		}
		for i := 0; i < len(part); i++ {
			if b := part[i]; !isAlnum(b) && b != '-' {
				return fmt.Errorf("label key %q: the prefix %q is not a DNS subdomain", k, prefix)
			}
		}
	}
	return nil
}

func validValue(v string) error {
	if err := validName(v, true); err != nil {
		return fmt.Errorf("label value: %w", err)
	}
	return nil
}

// matches reports whether labels satisfy every requirement.
func (sel selector) matches(labels map[string]string) bool {
	for _, r := range sel {
		if !r.matches(labels) {
			return false
		}
	}
	return true
}

func (r requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.key]
	switch r.op {
	case opEquals:
		return ok && v == r.values[0]
	case opNotEquals:
		return !ok || v != r.values[0]
	case opIn:
		return ok && slices.Contains(r.values, v)
	case opNotIn:
		return !ok || !slices.Contains(r.values, v)
	case opExists:
		return ok
	case opDoesNotExist:
		return !ok
	case opGreaterThan, opLessThan:
		if !ok {
			return false
		}
		have, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		want, _ := strconv.ParseInt(r.values[0], 10, 64)
		if r.op == opGreaterThan {
			return have > want
		}
		return have < want
	}
	return false
}

// String is the selector's canonical string form, which parseSelector
// reads back to the same selector.
func (sel selector) String() string {
	var b strings.Builder
	for i, r := range sel {
		if i > 0 {
			b.WriteByte(',')
		}
		switch r.op {
		case opEquals:
			b.WriteString(r.key + "=" + r.values[0])
		case opNotEquals:
			b.WriteString(r.key + "!=" + r.values[0])
		case opIn:
			b.WriteString(r.key + " in (" + strings.Join(r.values, ",") + ")")
		case opNotIn:
			b.WriteString(r.key + " notin (" + strings.Join(r.values, ",") + ")")
		case opExists:
			b.WriteString(r.key)
		case opDoesNotExist:
			b.WriteString("!" + r.key)
		case opGreaterThan:
			b.WriteString(r.key + ">" + r.values[0])
		case opLessThan:
			b.WriteString(r.key + "<" + r.values[0])
		}
	}
	return b.String()
}
