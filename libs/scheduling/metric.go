package scheduling

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric registers a plugin's collector with h's registerer once per
// process and returns the collector to use: c, or the one registered
// before it under the same name (a plugin built again by a config reload,
// or a second plugin of the type, shares it). A collector that cannot be
// registered (a name taken by another kind of metric) is used
// unregistered, with a warning.
func Metric[C prometheus.Collector](h Handle, c C) C {
	err := h.Registerer().Register(c)
	if err == nil {
		return c
	}
	var taken prometheus.AlreadyRegisteredError
	if errors.As(err, &taken) {
		if existing, ok := taken.ExistingCollector.(C); ok {
			return existing
		}
	}
	h.Warn("metrics not exported: " + err.Error())
	return c
}
