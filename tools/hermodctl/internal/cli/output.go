package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// writeStructured writes v (or a JSON document already encoded) as
// indented JSON or, for yaml, as a YAML document; a stream of them (events
// one by one) separates YAML documents with "---".
func writeStructured(w io.Writer, format string, v any, stream bool) error {
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	switch format {
	case "yaml":
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		if stream {
			_, _ = io.WriteString(w, "---\n")
		}
		_, err = w.Write(y)
		return err
	case "json":
		if stream {
			_, err := fmt.Fprintf(w, "%s\n", b)
			return err
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			return err
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return fmt.Errorf("unknown output %q", format)
}
