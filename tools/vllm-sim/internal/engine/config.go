// Package engine is the simulated vLLM engine of one pod: continuous
// batching with chunked prefill over a KV block pool with prefix caching,
// advanced in simulated time by a cost model. It emits the KV-cache events
// vLLM emits, exactly when its block pool stores, evicts or clears blocks.
package engine

import (
	"errors"
	"fmt"
	"time"
)

// CostModel gives the duration of one engine step. A step that prefills P
// new prompt tokens, decodes D sequences and attends over K context tokens
// in total (every scheduled sequence's context after the step), loading L
// LoRA adapters, takes
//
//	(StepOverhead + P*PrefillPerToken + D*DecodePerSeq + K*AttentionPerKVToken + L*LoRALoad) / podSpeed
//
// The defaults model a Llama-3-8B-class model on one H100: an idle 1k-token
// prompt gets its first token after ~45 ms (10 ms + 1000 x 35 µs + 0.1 ms),
// one decoding sequence produces a token every ~10.3 ms, and 32 sequences
// with 1k-token contexts every ~19.6 ms (10 + 32 x 0.2 + 32,000 x 0.1 µs).
type CostModel struct {
	StepOverhead        time.Duration
	PrefillPerToken     time.Duration
	DecodePerSeq        time.Duration
	AttentionPerKVToken time.Duration
	LoRALoad            time.Duration
}

// DefaultCostModel is the calibration described on CostModel.
func DefaultCostModel() CostModel {
	return CostModel{
		StepOverhead:        10 * time.Millisecond,
		PrefillPerToken:     35 * time.Microsecond,
		DecodePerSeq:        200 * time.Microsecond,
		AttentionPerKVToken: 100 * time.Nanosecond,
		LoRALoad:            20 * time.Millisecond,
	}
}

// Config configures one simulated engine. Names follow vLLM's flags.
type Config struct {
	// Model is the served model name (--served-model-name, else --model).
	Model string
	// BlockSize is --block-size: tokens per KV block.
	BlockSize int
	// NumGPUBlocks is --num-gpu-blocks-override: the KV block pool size.
	NumGPUBlocks int
	// MaxNumSeqs is --max-num-seqs: sequences running at once.
	MaxNumSeqs int
	// MaxNumBatchedTokens is --max-num-batched-tokens: tokens per step.
	MaxNumBatchedTokens int
	// MaxModelLen is --max-model-len: prompt plus output tokens.
	MaxModelLen int
	// Adapters are the LoRA adapters the pod can load (--lora-modules).
	Adapters []string
	// MaxLoRAs is --max-loras: adapters loaded at once.
	MaxLoRAs int
	// Cost is the step cost model.
	Cost CostModel
	// PodSpeed scales this pod's speed (0.5: every step takes twice as long).
	PodSpeed float64
	// HashSeed is the PYTHONHASHSEED the prefix-cache hashes start from.
	HashSeed string
	// DefaultChatOutput caps the output of chat requests that give no
	// max_tokens (they stop at a length drawn per request, 1..this).
	DefaultChatOutput int
}

// DefaultConfig returns vLLM's defaults for an 8B model on an H100.
func DefaultConfig(model string) Config {
	return Config{
		Model:               model,
		BlockSize:           16,
		NumGPUBlocks:        20000,
		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 8192,
		MaxModelLen:         32768,
		MaxLoRAs:            1,
		Cost:                DefaultCostModel(),
		PodSpeed:            1,
		HashSeed:            "0",
		DefaultChatOutput:   256,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Model != "", "model: required")
	check(c.BlockSize > 0, "block size: must be positive (got %d)", c.BlockSize)
	check(c.NumGPUBlocks > 0, "num GPU blocks: must be positive (got %d)", c.NumGPUBlocks)
	check(c.MaxNumSeqs > 0, "max num seqs: must be positive (got %d)", c.MaxNumSeqs)
	check(c.MaxNumBatchedTokens > 0, "max num batched tokens: must be positive (got %d)", c.MaxNumBatchedTokens)
	check(c.MaxModelLen > 0, "max model len: must be positive (got %d)", c.MaxModelLen)
	check(len(c.Adapters) == 0 || c.MaxLoRAs > 0, "max loras: must be positive when LoRA adapters are configured (got %d)", c.MaxLoRAs)
	check(c.PodSpeed > 0, "pod speed: must be positive (got %v)", c.PodSpeed)
	check(c.DefaultChatOutput > 0, "default chat output: must be positive (got %d)", c.DefaultChatOutput)
	// as vLLM refuses to start: one sequence of the maximum length must fit
	check(c.BlockSize <= 0 || c.NumGPUBlocks*c.BlockSize >= c.MaxModelLen,
		"max model len: %d tokens do not fit in the KV cache (%d blocks of %d tokens); lower --max-model-len or raise --num-gpu-blocks-override",
		c.MaxModelLen, c.NumGPUBlocks, c.BlockSize)
	c.Cost.check(check)
	return errors.Join(errs...)
}

func (c CostModel) check(check func(bool, string, ...any)) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"step overhead", c.StepOverhead}, {"prefill per token", c.PrefillPerToken}, {"decode per seq", c.DecodePerSeq},
		{"attention per kv token", c.AttentionPerKVToken}, {"lora load", c.LoRALoad}} {
		check(f.v >= 0, "%s: must not be negative (got %s)", f.name, f.v)
	}
}

// step returns a step's duration.
func (c CostModel) step(prefillTokens, decodeSeqs, kvTokens, loraLoads int, podSpeed float64) time.Duration {
	d := c.StepOverhead +
		time.Duration(prefillTokens)*c.PrefillPerToken +
		time.Duration(decodeSeqs)*c.DecodePerSeq +
		time.Duration(kvTokens)*c.AttentionPerKVToken +
		time.Duration(loraLoads)*c.LoRALoad
	return time.Duration(float64(d) / podSpeed)
}
