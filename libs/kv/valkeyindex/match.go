package valkeyindex

import (
	"context"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/index"
)

// matchScript returns the holders of the prompt's keys, in order, up to
// the first key nobody holds, but at least ARGV[1] keys (those a
// speculative entry may carry on).
var matchScript = valkey.NewLuaScriptReadOnly(`
local out = {}
local least = tonumber(ARGV[1])
for i = 1, #KEYS do
  local h = redis.call('HGETALL', KEYS[i])
  if #h == 0 and i > least then break end
  out[i] = h
end
return out
`)

// Speculation is the replica's speculative entries (index.Index keeps
// them).
type Speculation interface {
	EachSpeculative(k blockkey.Key, now int64, fn func(pod string))
}

// Match returns, for each candidate pod (by name, in order), the run of
// the prompt's block keys from the first that it holds and its score, as
// index.Index.Match does; spec, when not nil, adds the replica's
// speculative entries live at now.
func (x *Index) Match(ctx context.Context, keys []blockkey.Key, candidates []string, spec Speculation, now int64) ([]index.Match, error) {
	out := make([]index.Match, len(candidates))
	if len(keys) == 0 || len(candidates) == 0 {
		return out, nil
	}
	slot := make(map[string]int, len(candidates))
	alive := make([]int, 0, len(candidates))
	for c, name := range candidates {
		if _, dup := slot[name]; !dup {
			slot[name] = c
			alive = append(alive, c)
		}
	}
	least := 0
	if spec != nil {
		for i := len(keys) - 1; i >= 0 && least == 0; i-- {
			spec.EachSpeculative(keys[i], now, func(pod string) {
				if _, ok := slot[pod]; ok {
					least = i + 1
				}
			})
		}
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = x.blockKey(k)
	}
	res, err := matchScript.Exec(ctx, x.c, names, []string{strconv.Itoa(least)}).ToArray()
	if err != nil {
		return nil, fmt.Errorf("valkey index: match: %w", err)
	}
	hit := make([]int8, len(candidates)) // best tier + 1 of the current key
	for i, k := range keys {
		if len(alive) == 0 {
			break
		}
		hits := 0
		if i < len(res) {
			fields, err := res[i].AsStrSlice()
			if err != nil {
				return nil, fmt.Errorf("valkey index: match: %w", err)
			}
			for j := 0; j+1 < len(fields); j += 2 {
				f := fields[j]
				if len(f) < 2 || fields[j+1] == "0" {
					continue
				}
				c, ok := slot[f[1:]]
				if !ok {
					continue
				}
				t := int8(f[0]) + 1
				if hit[c] == 0 {
					hits++
				}
				if hit[c] == 0 || t < hit[c] {
					hit[c] = t
				}
			}
		}
		if hits < len(alive) && spec != nil {
			spec.EachSpeculative(k, now, func(pod string) {
				if c, ok := slot[pod]; ok && hit[c] == 0 {
					hit[c] = int8(index.TierGPU) + 1
				}
			})
		}
		kept := alive[:0]
		for _, c := range alive {
			if t := hit[c]; t > 0 {
				out[c].Blocks++
				out[c].Score += x.w[t-1]
				hit[c] = 0
				kept = append(kept, c)
			}
		}
		alive = kept
	}
	for c, name := range candidates {
		if first := slot[name]; first != c {
			out[c] = out[first]
		}
	}
	return out, nil
}
