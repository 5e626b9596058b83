{{/*
Names, labels and addresses.

Every template here takes the subchart's context (.) unless it says
otherwise. The component is the subchart's name (gateway, picker, ...); its
binary is hermod-<component>.
*/}}

{{/*
hermod-common.prefix: the prefix of every object name. global.fullnameOverride,
else the release name when it already says "hermod", else <release>-hermod.
Kept to 40 characters so that "<prefix>-<component>-<suffix>" fits in 63.
*/}}
{{- define "hermod-common.prefix" -}}
{{- $g := .Values.global | default dict -}}
{{- $p := "" -}}
{{- if $g.fullnameOverride -}}
{{- $p = $g.fullnameOverride -}}
{{- else if contains "hermod" .Release.Name -}}
{{- $p = .Release.Name -}}
{{- else -}}
{{- $p = printf "%s-hermod" .Release.Name -}}
{{- end -}}
{{- $p | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* hermod-common.fullname: this component's object name, <prefix>-<component>. */}}
{{- define "hermod-common.fullname" -}}
{{- printf "%s-%s" (include "hermod-common.prefix" .) .Chart.Name -}}
{{- end -}}

{{/*
hermod-common.componentName: another component's object name.
Takes (dict "ctx" . "component" "picker").
*/}}
{{- define "hermod-common.componentName" -}}
{{- printf "%s-%s" (include "hermod-common.prefix" .ctx) .component -}}
{{- end -}}

{{/*
hermod-common.ports: the ports of every component, by name. They are the
binaries' default ports; the Services expose the same numbers, so that one
component can address another without reading its values (a subchart sees
only its own values and global).
*/}}
{{- define "hermod-common.ports" -}}
gateway: {http: 8080, metrics: 9092}
picker: {grpc: 9002, metrics: 9090}
indexer: {grpc: 9095, metrics: 9096, zmq: 5557}
collector: {metrics: 9091}
responses: {grpc: 9097, metrics: 9098}
autoscaler: {metrics: 9099}
{{- end -}}

{{/*
hermod-common.address: host:port of another component's Service.
Takes (dict "ctx" . "component" "picker" "port" "grpc").
*/}}
{{- define "hermod-common.address" -}}
{{- $ports := include "hermod-common.ports" . | fromYaml -}}
{{- printf "%s.%s.svc:%v" (include "hermod-common.componentName" .) .ctx.Release.Namespace (index $ports .component .port) -}}
{{- end -}}

{{/*
hermod-common.deployed: "true" when the component's subchart is enabled in
this release, else "". Each subchart exports exports.component into
global.hermodComponents.<name> (import-values in the umbrella Chart.yaml);
a disabled subchart exports nothing.
Takes (dict "ctx" . "component" "picker").
*/}}
{{- define "hermod-common.deployed" -}}
{{- if dig "hermodComponents" .component "deployed" false (.ctx.Values.global | default dict) -}}true{{- end -}}
{{- end -}}

{{/* hermod-common.selectorLabels: the labels that select this component's pods. */}}
{{- define "hermod-common.selectorLabels" -}}
app.kubernetes.io/name: hermod-{{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* hermod-common.labels: the labels of every object of this component. */}}
{{- define "hermod-common.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hermod-common.selectorLabels" . }}
app.kubernetes.io/component: {{ .Chart.Name }}
app.kubernetes.io/part-of: hermod
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with (.Values.global | default dict).commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* hermod-common.serviceAccountName: the ServiceAccount the pods run as. */}}
{{- define "hermod-common.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount | default dict -}}
{{- if $sa.create | default false -}}
{{- $sa.name | default (include "hermod-common.fullname" .) -}}
{{- else -}}
{{- $sa.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
hermod-common.image: registry/repository:tag or @digest. The repository
defaults to hermod-<component>; registry, tag and pull policy fall back to
global.image, the tag last to the chart's appVersion.
*/}}
{{- define "hermod-common.image" -}}
{{- $g := (.Values.global | default dict).image | default dict -}}
{{- $i := .Values.image | default dict -}}
{{- $repo := $i.repository | default (printf "hermod-%s" .Chart.Name) -}}
{{- $registry := $i.registry | default $g.registry -}}
{{- if $registry -}}{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}{{- end -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $repo $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (toString ($i.tag | default $g.tag | default .Chart.AppVersion)) -}}
{{- end -}}
{{- end -}}
