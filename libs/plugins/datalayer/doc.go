// Package datalayer holds the data-layer plugins of EndpointPickerConfig's
// data (or dataLayer) section:
//
//   - models-data-source fetches an endpoint's OpenAI model list (GET
//     <scheme>://<endpoint>/v1/models) and model-server-protocol-models
//     (alias models-data-extractor, its newer upstream name) turns it into
//     the names of the models the endpoint serves, base models and LoRA
//     adapters alike; [ParseModels] is the one parser of such lists;
//   - metrics-data-source fetches an endpoint's Prometheus exposition
//     (GET <scheme>://<endpoint>/metrics) and core-metrics-extractor turns
//     it into the endpoint's load (vLLM's or SGLang's names, through
//     libs/enginemetrics);
//   - endpoint-notification-source stands for upstream's endpoint events,
//     which Hermod delivers itself, and k8s-notification-source (kind Pod
//     only) for upstream's pod notifications, which reach Hermod as the
//     endpoint registry the collector's Kubernetes discovery keeps;
//   - file-discovery (dataLayer.discovery.pluginRef) names an endpoints
//     file, path and watchFile, for pools without Kubernetes: the
//     collector keeps the endpoints it lists registered (pickers only
//     check the parameters).
//   - multicluster-file-discovery, multicluster-metrics-data-source and
//     multicluster-metrics-extractor are the same for a pool whose
//     endpoints are clusters: a file of cluster gateways (host names
//     allowed), each cluster's exporter scraped over verified TLS, and its
//     pool averages set as the attributes the multicluster scorers read.
//
// The data layer is on without a feature gate, as upstream now has it
// (the dataLayer gate is accepted and changes nothing):
//
//	plugins:
//	- type: metrics-data-source
//	- type: core-metrics-extractor
//	- type: models-data-source
//	  parameters: {scheme: https, path: /v1/models, insecureSkipVerify: true}
//	- type: model-server-protocol-models
//	dataLayer:
//	  sources:
//	  - pluginRef: metrics-data-source
//	    extractors: [{pluginRef: core-metrics-extractor}]
//	  - pluginRef: models-data-source
//	    extractors: [{pluginRef: model-server-protocol-models}]
//
// In Hermod the collector is the data layer: it follows the pool's config,
// scrapes every endpoint's metrics where the metrics-data-source says and
// polls its models with the models-data-source and its extractor, then
// publishes both (PodMetrics), which the pickers route by. The plugins a
// picker builds are not polled by the picker itself; they hold no
// goroutines and no connections until Fetch is called.
package datalayer
