{{/* The collector's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "collector.spec" -}}
{{- $k := (.Values.discovery | default dict).kubernetes | default dict -}}
opsPort: metrics
ports:
  - name: metrics
    flag: metrics-listen
    appProtocol: http
nats: true
etcd: true
kubeAPI: {{ $k.enabled | default false }}
args: {{ include "collector.discoveryArgs" . | fromYamlArray | toJson }}
env: []
volumes: []
volumeMounts: []
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
