{{/* The autoscaler's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "autoscaler.spec" -}}
{{- $args := list (printf "--actuator=%s" (.Values.actuator | default "metrics")) -}}
{{- $vas := .Values.variantAutoscalings | default dict -}}
{{- $vaSource := $vas.source | default "etcd" -}}
{{- if ne $vaSource "etcd" -}}
{{- $args = append $args (printf "--va-source=%s" $vaSource) -}}
{{- $args = append $args (printf "--va-namespace=%s" ($vas.namespace | default .Release.Namespace)) -}}
{{- with $vas.selector -}}
{{- $args = append $args (printf "--va-selector=%s" .) -}}
{{- end -}}
{{- end -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- $annotations := dict -}}
{{- if not (has (.Values.actuator | default "metrics") (list "kubernetes" "metrics")) -}}
{{- fail (printf "autoscaler.actuator: %q is not kubernetes or metrics (local is the devstack's)" .Values.actuator) -}}
{{- end -}}
{{- with .Values.config -}}
{{- $args = append $args "--config=/etc/hermod/autoscaler/config.yaml" -}}
{{- $volumes = append $volumes (dict "name" "config" "configMap" (dict "name" (printf "%s-config" (include "hermod-common.fullname" $)))) -}}
{{- $mounts = append $mounts (dict "name" "config" "mountPath" "/etc/hermod/autoscaler" "readOnly" true) -}}
{{- $_ := set $annotations "checksum/config" (include "autoscaler.config" $ | sha256sum) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: metrics
    flag: metrics-listen
    appProtocol: http
nats: true
etcd: true
kubeAPI: {{ or (eq (.Values.actuator | default "metrics") "kubernetes") (ne $vaSource "etcd") }}
args: {{ toJson $args }}
env: []
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {{ toJson $annotations }}
{{- end -}}

{{/*
autoscaler.config: the text of the --config file: a string as it is, a list
of objects (VariantAutoscaling, ConfigMap) as a multi-document YAML file, an
object as YAML.
*/}}
{{- define "autoscaler.config" -}}
{{- $c := .Values.config -}}
{{- if kindIs "slice" $c -}}
{{- range $i, $o := $c -}}
{{- if $i }}
---
{{ end -}}
{{- toYaml $o -}}
{{- end -}}
{{- else -}}
{{- include "hermod-common.configData" $c -}}
{{- end -}}
{{- end -}}
