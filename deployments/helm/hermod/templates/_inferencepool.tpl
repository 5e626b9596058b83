{{/*
The Gateway API Inference Extension objects of the release: the
InferencePool (global.inferencePool) and an example HTTPRoute (httpRoute).
The umbrella chart's context (.) throughout.
*/}}

{{/* hermod.releaseLabels: the labels of a release-level object. Takes (dict "ctx" . "component" "inferencepool"). */}}
{{- define "hermod.releaseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: hermod-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: hermod
{{- with .ctx.Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- with .ctx.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* hermod.inferencePoolNamespace: the InferencePool's namespace (and its model servers'). */}}
{{- define "hermod.inferencePoolNamespace" -}}
{{- (.Values.global.inferencePool | default dict).namespace | default .Release.Namespace -}}
{{- end -}}

{{/*
hermod.endpointPickerService: the Service of the InferencePool's
endpointPickerRef: global.inferencePool.endpointPicker.service, else this
release's picker Service, which must then be deployed in the pool's
namespace (an endpointPickerRef names a Service of its own namespace).
*/}}
{{- define "hermod.endpointPickerService" -}}
{{- $epp := (.Values.global.inferencePool | default dict).endpointPicker | default dict -}}
{{- if $epp.service -}}
{{- $epp.service -}}
{{- else -}}
{{- if not .Values.picker.enabled -}}
{{- fail "global.inferencePool.endpointPicker.service: required without picker.enabled (the InferencePool's endpointPickerRef names the picker's ext_proc Service)" -}}
{{- end -}}
{{- if ne (include "hermod.inferencePoolNamespace" .) .Release.Namespace -}}
{{- fail "global.inferencePool.namespace differs from the release's: set global.inferencePool.endpointPicker.service to an ext_proc Service of that namespace (an endpointPickerRef cannot name another namespace)" -}}
{{- end -}}
{{- include "hermod-common.componentName" (dict "ctx" . "component" "picker") -}}
{{- end -}}
{{- end -}}
