{{/* The indexer's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "indexer.spec" -}}
{{- $args := list -}}
{{- $env := list -}}
{{- $zmq := .Values.zmq | default dict -}}
{{- $ports := index (include "hermod-common.ports" . | fromYaml) "indexer" -}}
{{- /* centralized mode: vLLM pods connect their kv event PUB sockets to this port */ -}}
{{- if $zmq.enabled -}}
{{- $args = append $args (printf "--zmq-bind=tcp://*:%v" $ports.zmq) -}}
{{- end -}}
{{- /* the index backend (kvBlockIndexConfig): a Valkey/Redis index shared by the
       replicas (global.valkey), else indexer.index.config, else the flags' in-memory index */ -}}
{{- $index := .Values.index | default dict -}}
{{- if $index.sharedValkey -}}
{{- $env = concat $env (include "hermod-common.valkeyEnv" . | fromYamlArray) -}}
{{- $cfg := dict "valkeyConfig" (dict "address" (include "hermod-common.valkeyURL" (dict "ctx" . "for" "indexer.index.sharedValkey")) "backendType" ($index.backendType | default "valkey")) -}}
{{- $env = append $env (dict "name" "HERMOD_INDEX_CONFIG" "value" (toJson $cfg)) -}}
{{- else if $index.config -}}
{{- $args = append $args (printf "--index-config=%s" (toJson $index.config)) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: grpc
    flag: listen
    appProtocol: grpc
  - name: metrics
    flag: metrics-listen
    appProtocol: http
  {{- if $zmq.enabled }}
  - name: zmq
  {{- end }}
nats: true
etcd: true
kubeAPI: false
args: {{ toJson $args }}
env: {{ toJson $env }}
volumes: []
volumeMounts: []
podAnnotations: {}
{{- end -}}
