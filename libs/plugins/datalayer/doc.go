// Package datalayer holds the data-layer plugins of EndpointPickerConfig's
// data section: models-data-source, which fetches an endpoint's OpenAI
// model list (GET <scheme>://<endpoint>/v1/models), and
// model-server-protocol-models (alias models-data-extractor, its newer
// upstream name), which turns that list into the names of the models the
// endpoint serves: base models and LoRA adapters alike. It also holds the
// one parser of /v1/models bodies ([ParseModels]).
//
// Both types need the dataLayer feature gate; without it they are skipped
// with a warning, as the data section is. The sources and extractors are
// wired in the data section:
//
//	featureGates: [dataLayer]
//	plugins:
//	- type: models-data-source
//	  parameters: {scheme: https, path: /v1/models, insecureSkipVerify: true}
//	- type: model-server-protocol-models
//	data:
//	  sources:
//	  - pluginRef: models-data-source
//	    extractors:
//	    - pluginRef: model-server-protocol-models
//
// In Hermod the collector is the data layer: it follows the pool's config
// and polls every endpoint with the configured source and extractor, then
// publishes the served models in PodMetrics.served_models, which the picker
// uses to leave out endpoints that do not serve the requested model. The
// plugins a picker builds are not polled by the picker itself; they hold no
// goroutines and no connections until Fetch is called.
package datalayer
