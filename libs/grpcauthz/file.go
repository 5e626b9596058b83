package grpcauthz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// MaxPolicyFileBytes bounds a policy file.
const MaxPolicyFileBytes = 1 << 20

// File is the policy file's shape:
//
//	# true (default): these rules replace the default table's for the
//	# same methods, the other defaults stay; false: only these rules.
//	inheritDefaults: true
//	rules:
//	- methods: ["/hermod.picker.v1.PickerService/Pick"]
//	  allow: [gateway, loadgen]
//	- methods: ["/envoy.service.ext_proc.v3.ExternalProcessor/Process"]
//	  allow: [authenticated]
type File struct {
	InheritDefaults *bool      `yaml:"inheritDefaults"`
	Rules           []FileRule `yaml:"rules"`
}

// FileRule allows callers to call methods.
type FileRule struct {
	Methods []string `yaml:"methods"`
	Allow   []string `yaml:"allow"`
}

// DecodePolicy decodes a policy file strictly (unknown fields, a second
// document and invalid keys or callers are errors) and returns the policy
// it makes with base (the default table) under it.
func DecodePolicy(data []byte, base *Policy) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the policy is empty")
		}
		return nil, fmt.Errorf("decode: %w", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	rules := map[string][]string{}
	for i, r := range f.Rules {
		if len(r.Methods) == 0 {
			return nil, fmt.Errorf("rules[%d]: no methods", i)
		}
		for _, m := range r.Methods {
			if _, dup := rules[m]; dup {
				return nil, fmt.Errorf("rules[%d]: method %s is in more than one rule", i, m)
			}
			rules[m] = r.Allow
		}
	}
	p, err := NewPolicy(rules)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if f.InheritDefaults == nil || *f.InheritDefaults {
		p = base.Merge(p)
	}
	return p, nil
}

// LoadPolicy reads a policy file (DecodePolicy over DefaultPolicy); an
// error names the file.
func LoadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("authz policy: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("authz policy %s: %w", path, err)
	}
	if len(data) > MaxPolicyFileBytes {
		return nil, fmt.Errorf("authz policy %s: larger than %d bytes", path, MaxPolicyFileBytes)
	}
	p, err := DecodePolicy(data, DefaultPolicy())
	if err != nil {
		return nil, fmt.Errorf("authz policy %s: %w", path, err)
	}
	return p, nil
}
