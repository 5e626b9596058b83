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

// runScript counts, inside the server, each candidate's run of the
// prompt's keys from the first. KEYS: the keys in order; ARGV: distinct
// candidates. It returns, per candidate in order, {blocks, blocks on
// tier 0, tier 1, tier 2} (each block counted on the best tier the pod
// holds it on).
var runScript = valkey.NewLuaScriptReadOnly(`
local runs, alive, n = {}, {}, 0
for i, p in ipairs(ARGV) do
  runs[p] = {0, 0, 0, 0}
  alive[p] = true
  n = n + 1
end
for i = 1, #KEYS do
  if n == 0 then break end
  local h = redis.call('HGETALL', KEYS[i])
  local best = {}
  for j = 1, #h, 2 do
    local f = h[j]
    local pod = string.sub(f, 2)
    if alive[pod] and tonumber(h[j+1]) > 0 then
      local t = string.byte(f, 1)
      if best[pod] == nil or t < best[pod] then best[pod] = t end
    end
  end
  for pod in pairs(alive) do
    local t = best[pod]
    if t then
      local r = runs[pod]
      r[1] = r[1] + 1
      r[t + 2] = r[t + 2] + 1
    else
      alive[pod] = nil
      n = n - 1
    end
  end
end
local out = {}
for i, p in ipairs(ARGV) do out[i] = runs[p] end
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
	if least == 0 {
		// no speculative entry for a candidate: the server counts the runs
		return x.matchRuns(ctx, names, candidates, slot, alive, out)
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

// matchRuns has the server count the runs (runScript).
func (x *Index) matchRuns(ctx context.Context, names, candidates []string, slot map[string]int, distinct []int, out []index.Match) ([]index.Match, error) {
	args := make([]string, len(distinct))
	for i, c := range distinct {
		args[i] = candidates[c]
	}
	res, err := runScript.Exec(ctx, x.c, names, args).ToArray()
	if err != nil {
		return nil, fmt.Errorf("valkey index: match: %w", err)
	}
	if len(res) != len(distinct) {
		return nil, fmt.Errorf("valkey index: match: %d runs for %d candidates", len(res), len(distinct))
	}
	for i, c := range distinct {
		run, err := res[i].AsIntSlice()
		if err != nil || len(run) != 4 {
			return nil, fmt.Errorf("valkey index: match: run %v: %w", run, err)
		}
		out[c].Blocks = int(run[0])
		for t := range 3 {
			out[c].Score += float64(run[t+1]) * x.w[t]
		}
	}
	for c, name := range candidates {
		if first := slot[name]; first != c {
			out[c] = out[first]
		}
	}
	return out, nil
}
