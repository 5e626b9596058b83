package extproc

import (
	"bytes"
	"encoding/json"
)

// inspectBody reads the top-level "model" and "stream" members of a
// request body the picker accepted (so one valid JSON object; the last of
// duplicate members wins, as encoding/json has it). It skips the other
// members' values without decoding them: a long prompt costs a scan for
// quotes, not a decode. A member of another type reads as absent.
func inspectBody(b []byte) (model string, stream bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return "", false
	}
	rest := b[1:]
	for {
		rest = skipSpace(rest)
		if len(rest) == 0 || rest[0] != '"' {
			return model, stream
		}
		n := stringLen(rest)
		if n < 0 {
			return model, stream
		}
		key := rest[1 : n-1]
		if bytes.IndexByte(key, '\\') >= 0 { // an escaped name (rare): decoded
			var k string
			_ = json.Unmarshal(rest[:n], &k)
			key = []byte(k)
		}
		rest = skipSpace(rest[n:])
		if len(rest) == 0 || rest[0] != ':' {
			return model, stream
		}
		rest = skipSpace(rest[1:])
		n = valueLen(rest)
		if n < 0 {
			return model, stream
		}
		switch val := rest[:n]; string(key) {
		case "model":
			model = ""
			_ = json.Unmarshal(val, &model)
		case "stream":
			stream = string(val) == "true"
		}
		rest = skipSpace(rest[n:])
		if len(rest) == 0 || rest[0] != ',' {
			return model, stream
		}
		rest = rest[1:]
	}
}

// stringLen returns the length of the JSON string at the start of b
// (quotes included), or -1 when it does not end.
func stringLen(b []byte) int {
	for j := 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		esc := 0
		for p := j - 1; p > 0 && b[p] == '\\'; p-- {
			esc++
		}
		j++
		if esc%2 == 0 {
			return j
		}
	}
}

// valueLen returns the length of the JSON value at the start of b, or -1
// when it does not end. Objects and arrays are matched by depth, strings
// skipped whole.
func valueLen(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	switch b[0] {
	case '"':
		return stringLen(b)
	case '{', '[':
		depth := 0
		for j := 0; j < len(b); j++ {
			switch b[j] {
			case '"':
				n := stringLen(b[j:])
				if n < 0 {
					return -1
				}
				j += n - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j, c := range b { // a number or a literal
		switch c {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}
