{{/* The collector's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "collector.spec" -}}
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
kubeAPI: {{ include "collector.discovering" . | eq "true" }}
args: {{ toJson $args }}
env: []
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {}
{{- end -}}

{{/*
collector.followsInferencePool: "true" when the collector follows the
InferencePool named global.pool (--inference-pool): the one the chart
creates (global.inferencePool.create) or one created elsewhere
(discovery.kubernetes.inferencePool).
*/}}
{{- define "collector.followsInferencePool" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- $ip := (.Values.global | default dict).inferencePool | default dict -}}
{{- if or $ip.create $k.inferencePool -}}true{{- end -}}
{{- end -}}

{{/*
collector.discoveryNamespace: the namespace of the model-server pods (and
of the InferencePool): the chart's InferencePool's, else
discovery.kubernetes.namespace, else the release's.
*/}}
{{- define "collector.discoveryNamespace" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- $ip := (.Values.global | default dict).inferencePool | default dict -}}
{{- if $ip.create -}}
{{- $ip.namespace | default .Release.Namespace -}}
{{- else -}}
{{- $k.namespace | default .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
collector.discovering: "true" when the collector discovers pods in
Kubernetes (by label selector or InferencePool).
*/}}
{{- define "collector.discovering" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- if or $k.enabled (include "collector.followsInferencePool" .) -}}true{{- end -}}
{{- end -}}

{{/*
collector.discoveryArgs: the flags of Kubernetes pod discovery
(discovery.kubernetes, or the InferencePool), as a YAML list. The one place
that names them.
*/}}
{{- define "collector.discoveryArgs" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
{{- if include "collector.followsInferencePool" . -}}
- --discovery=kubernetes
- {{ printf "--discovery-namespace=%s" (include "collector.discoveryNamespace" .) | toJson }}
- {{ printf "--inference-pool=%s" .Values.global.pool | toJson }}
{{- else if $k.enabled -}}
- --discovery=kubernetes
- {{ printf "--discovery-namespace=%s" (include "collector.discoveryNamespace" .) | toJson }}
- {{ printf "--discovery-selector=%s" (required "collector.discovery.kubernetes.selector is required (the model-server pods' label selector)" $k.selector) | toJson }}
- {{ printf "--discovery-target-port=%v" (int (required "collector.discovery.kubernetes.targetPort is required" $k.targetPort)) | toJson }}
{{- else -}}
[]
{{- end -}}
{{- end -}}
