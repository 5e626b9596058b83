{{/* The collector's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "collector.spec" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- $args := include "collector.discoveryArgs" . | fromYamlArray -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- /* the endpoints file: a ConfigMap (configmap.yaml) mounted as a
directory, without subPath and without a checksum annotation, so that an
edit reaches the running collectors, which reload it */ -}}
{{- with .Values.endpointsFile -}}
{{- $args = append $args "--endpoints-file=/etc/hermod/collector/endpoints/endpoints.yaml" -}}
{{- $volumes = append $volumes (dict "name" "endpoints" "configMap" (dict "name" (printf "%s-endpoints" (include "hermod-common.fullname" $)))) -}}
{{- $mounts = append $mounts (dict "name" "endpoints" "mountPath" "/etc/hermod/collector/endpoints" "readOnly" true) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: metrics
    flag: metrics-listen
    appProtocol: http
nats: true
etcd: true
kubeAPI: {{ $k.enabled | default false }}
args: {{ toJson $args }}
env: []
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {}
{{- end -}}

{{/*
collector.discoveryArgs: the flags of Kubernetes pod discovery
(discovery.kubernetes), as a YAML list. The one place that names them.
*/}}
{{- define "collector.discoveryArgs" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- if $k.enabled -}}
- --discovery=kubernetes
- {{ printf "--discovery-namespace=%s" ($k.namespace | default .Release.Namespace) | toJson }}
- {{ printf "--discovery-selector=%s" (required "collector.discovery.kubernetes.selector is required (the model-server pods' label selector)" $k.selector) | toJson }}
- {{ printf "--discovery-target-port=%v" (int (required "collector.discovery.kubernetes.targetPort is required" $k.targetPort)) | toJson }}
{{- else -}}
[]
{{- end -}}
{{- end -}}
