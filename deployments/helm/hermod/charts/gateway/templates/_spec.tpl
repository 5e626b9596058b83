{{/* The gateway's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "gateway.spec" -}}
{{- $args := list -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- $annotations := dict -}}
{{- /* the pickers: the values' list, else this release's picker Service */ -}}
{{- $pickers := .Values.pickerAddrs | default list -}}
{{- if and (not $pickers) (include "hermod-common.deployed" (dict "ctx" . "component" "picker")) -}}
{{- $pickers = list (include "hermod-common.address" (dict "ctx" . "component" "picker" "port" "grpc")) -}}
{{- end -}}
{{- with $pickers -}}
{{- $args = append $args (printf "--picker-addrs=%s" (join "," .)) -}}
{{- end -}}
{{- /* /v1/responses: the values' address, else this release's responses Service */ -}}
{{- $responses := .Values.responsesAddress -}}
{{- if and (not $responses) (include "hermod-common.deployed" (dict "ctx" . "component" "responses")) -}}
{{- $responses = include "hermod-common.address" (dict "ctx" . "component" "responses" "port" "grpc") -}}
{{- end -}}
{{- with $responses -}}
{{- $args = append $args (printf "--responses-address=%s" .) -}}
{{- end -}}
{{- /* flow control: a ConfigMap (configmap.yaml) mounted as a file */ -}}
{{- with .Values.flowControl -}}
{{- $args = append $args "--flow-control=/etc/hermod/gateway/flow-control/flow-control.yaml" -}}
{{- $volumes = append $volumes (dict "name" "flow-control" "configMap" (dict "name" (printf "%s-flow-control" (include "hermod-common.fullname" $)))) -}}
{{- $mounts = append $mounts (dict "name" "flow-control" "mountPath" "/etc/hermod/gateway/flow-control" "readOnly" true) -}}
{{- $_ := set $annotations "checksum/flow-control" (include "hermod-common.configData" . | sha256sum) -}}
{{- end -}}
{{- /* API keys: the operator's Secret mounted as a file */ -}}
{{- $keys := .Values.apiKeys | default dict -}}
{{- if $keys.existingSecret -}}
{{- $key := $keys.key | default "api-keys" -}}
{{- $args = append $args (printf "--api-keys-file=/etc/hermod/gateway/api-keys/%s" $key) -}}
{{- $volumes = append $volumes (dict "name" "api-keys" "secret" (dict "secretName" $keys.existingSecret "items" (list (dict "key" $key "path" $key)))) -}}
{{- $mounts = append $mounts (dict "name" "api-keys" "mountPath" "/etc/hermod/gateway/api-keys" "readOnly" true) -}}
{{- end -}}
{{- /* HTTPS on the API: a kubernetes.io/tls Secret (cert-manager's), read again when it rotates */ -}}
{{- $apiTLS := .Values.apiTLS | default dict -}}
{{- if $apiTLS.existingSecret -}}
{{- $args = append $args "--api-tls-cert-file=/etc/hermod/gateway/api-tls/tls.crt" -}}
{{- $args = append $args "--api-tls-key-file=/etc/hermod/gateway/api-tls/tls.key" -}}
{{- if $apiTLS.clientAuth -}}
{{- $args = append $args "--api-tls-ca-file=/etc/hermod/gateway/api-tls/ca.crt" -}}
{{- $args = append $args (printf "--api-tls-client-auth=%s" $apiTLS.clientAuth) -}}
{{- end -}}
{{- $volumes = append $volumes (dict "name" "api-tls" "secret" (dict "secretName" $apiTLS.existingSecret)) -}}
{{- $mounts = append $mounts (dict "name" "api-tls" "mountPath" "/etc/hermod/gateway/api-tls" "readOnly" true) -}}
{{- end -}}
{{- /* without keys: the proxies whose tenant header is believed */ -}}
{{- with .Values.trustedProxies -}}
{{- $args = append $args (printf "--trusted-proxies=%s" (join "," .)) -}}
{{- end -}}
{{- with .Values.tenantHeader -}}
{{- $args = append $args (printf "--tenant-header=%s" .) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: http
    flag: listen
    appProtocol: http
    servicePort: {{ (.Values.service | default dict).port | default 8080 }}
  - name: metrics
    flag: metrics-listen
    appProtocol: http
    internal: true
nats: true
etcd: true
kubeAPI: false
args: {{ toJson $args }}
env: []
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {{ toJson $annotations }}
{{- end -}}
