{{/* The picker's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "picker.spec" -}}
{{- $args := list -}}
{{- $env := list -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- /* the EndpointPickerConfig: a ConfigMap (configmap.yaml) mounted as the --config file,
       polled by the picker (a change reloads it live, no restart); without it, the pool's
       config in etcd */ -}}
{{- if .Values.endpointPickerConfig -}}
{{- $args = append $args "--config=/etc/hermod/picker/config.yaml" -}}
{{- $volumes = append $volumes (dict "name" "config" "configMap" (dict "name" (printf "%s-config" (include "hermod-common.fullname" .)))) -}}
{{- $mounts = append $mounts (dict "name" "config" "mountPath" "/etc/hermod/picker" "readOnly" true) -}}
{{- end -}}
{{- /* precise-prefix-cache-scorer asks the indexer: the values' address, else this release's indexer */ -}}
{{- $indexer := .Values.indexerAddress -}}
{{- if and (not $indexer) (include "hermod-common.deployed" (dict "ctx" . "component" "indexer")) -}}
{{- $indexer = include "hermod-common.address" (dict "ctx" . "component" "indexer" "port" "grpc") -}}
{{- end -}}
{{- with $indexer -}}
{{- $args = append $args (printf "--indexer-address=%s" .) -}}
{{- end -}}
{{- /* valkey-least-request-picker: the pool's in-flight counts in global.valkey */ -}}
{{- if (.Values.inflightValkey | default dict).enabled -}}
{{- $env = concat $env (include "hermod-common.valkeyEnv" . | fromYamlArray) -}}
{{- $env = append $env (dict "name" "HERMOD_INFLIGHT_VALKEY_ADDRESS" "value" (include "hermod-common.valkeyURL" (dict "ctx" . "for" "picker.inflightValkey"))) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: grpc
    flag: listen
    appProtocol: grpc
  - name: metrics
    flag: metrics-listen
    appProtocol: http
nats: true
etcd: true
kubeAPI: false
args: {{ toJson $args }}
env: {{ toJson $env }}
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {}
{{- end -}}

{{/*
picker.endpointPickerConfig: the text of the --config file. The value is an
EndpointPickerConfig as an object or a string (kept byte for byte). A
Heimdall values file, or its config: block with the key, may be pasted as
it is: an object (or a string that parses as one) with a config key and no
plugins key stands for its config.
*/}}
{{- define "picker.endpointPickerConfig" -}}
{{- $c := .Values.endpointPickerConfig -}}
{{- if kindIs "string" $c -}}
{{- $parsed := fromYaml $c -}}
{{- if and (hasKey $parsed "config") (not (hasKey $parsed "plugins")) -}}{{- $c = $parsed.config -}}{{- end -}}
{{- else if kindIs "map" $c -}}
{{- if and (hasKey $c "config") (not (hasKey $c "plugins")) -}}{{- $c = $c.config -}}{{- end -}}
{{- if and (kindIs "map" $c) (not (hasKey $c "plugins")) -}}
{{- fail "picker.endpointPickerConfig: an EndpointPickerConfig needs plugins (paste the Heimdall config: block, or give a string)" -}}
{{- end -}}
{{- else -}}
{{- fail (printf "picker.endpointPickerConfig: want an EndpointPickerConfig object or string, got %s" (kindOf $c)) -}}
{{- end -}}
{{- include "hermod-common.configData" $c -}}
{{- end -}}
