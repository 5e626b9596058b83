// Package attrreport holds request-attribute-reporter: when a response
// ends, it computes a number from the response's token usage with a CEL
// expression and reports it to the data plane as dynamic metadata
// (namespace, name) — for Envoy's rate limits or cost accounting, say. It
// works where a data plane reads metadata: the Envoy ext_proc way in.
package attrreport

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the registered plugin type.
const Type = "request-attribute-reporter"

// DefaultNamespace is the metadata namespace of an attribute that names
// none: Envoy's load-balancing namespace.
const DefaultNamespace = "envoy.lb"

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: New})
}

// Params are the plugin's parameters: exactly one attribute.
type Params struct {
	Attributes []AttributeSpec `json:"attributes"`
}

// AttributeSpec is one reported attribute: where it goes, the CEL
// expression of its value over `usage`, and an optional CEL condition.
type AttributeSpec struct {
	Key struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"key"`
	Expression string `json:"expression"`
	Condition  string `json:"condition,omitempty"`
}

// Reporter is request-attribute-reporter.
type Reporter struct {
	scheduling.Named
	params    Params
	namespace string
	name      string
	value     cel.Program
	when      cel.Program // nil: always
}

// New builds the plugin, compiling its expressions.
func New(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if len(p.Attributes) != 1 {
		return nil, scheduling.ParamErrorf("attributes", "must hold exactly one attribute (got %d)", len(p.Attributes))
	}
	a := &p.Attributes[0]
	if a.Key.Namespace == "" {
		a.Key.Namespace = DefaultNamespace
	}
	if a.Key.Name == "" {
		return nil, scheduling.ParamErrorf("attributes[0].key.name", "required")
	}
	env, err := cel.NewEnv(cel.Variable("usage", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("%s: CEL environment: %w", Type, err)
	}
	value, err := compile(env, a.Expression, "attributes[0].expression", cel.DoubleType, cel.IntType, cel.UintType, cel.DynType)
	if err != nil {
		return nil, err
	}
	r := &Reporter{Named: scheduling.Named{Type: Type, Name: name}, params: p, namespace: a.Key.Namespace, name: a.Key.Name, value: value}
	if a.Condition != "" {
		if r.when, err = compile(env, a.Condition, "attributes[0].condition", cel.BoolType, cel.DynType); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// compile compiles a CEL expression whose result must be of one of types.
func compile(env *cel.Env, expr, field string, types ...*cel.Type) (cel.Program, error) {
	if expr == "" {
		return nil, scheduling.ParamErrorf(field, "required")
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, scheduling.ParamErrorf(field, "%v", iss.Err())
	}
	ok := false
	for _, t := range types {
		ok = ok || ast.OutputType().IsExactType(t)
	}
	if !ok {
		return nil, scheduling.ParamErrorf(field, "%q yields %s, not one of %v", expr, ast.OutputType(), types)
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, scheduling.ParamErrorf(field, "%v", err)
	}
	return prg, nil
}

// Parameters implements scheduling.ParameterReporter.
func (r *Reporter) Parameters() any { return r.params }

// ResponseAttributes implements scheduling.AttributeReporter: the
// attribute's value for a response of usage u, truncated to an integer,
// unless the condition is false, the value is zero or the expressions
// fail (a failure reports nothing).
func (r *Reporter) ResponseAttributes(u scheduling.Usage) []scheduling.Attribute {
	vars := map[string]any{"usage": map[string]any{
		"prompt_tokens":        float64(u.PromptTokens),
		"completion_tokens":    float64(u.CompletionTokens),
		"total_tokens":         float64(u.PromptTokens + u.CompletionTokens),
		"prompt_token_details": map[string]any{"cached_tokens": float64(u.CachedTokens)},
	}}
	if r.when != nil {
		out, _, err := r.when.Eval(vars)
		if err != nil || out != types.True {
			return nil
		}
	}
	out, _, err := r.value.Eval(vars)
	if err != nil {
		return nil
	}
	var v float64
	switch x := out.Value().(type) {
	case float64:
		v = x
	case int64:
		v = float64(x)
	case uint64:
		v = float64(x)
	default:
		return nil
	}
	v = math.Trunc(v)
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return []scheduling.Attribute{{Namespace: r.namespace, Name: r.name, Value: v}}
}

var _ scheduling.AttributeReporter = (*Reporter)(nil)
