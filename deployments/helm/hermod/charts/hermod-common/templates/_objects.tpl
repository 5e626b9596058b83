{{/*
The objects around a service's Deployment. "hermod-common.all" renders all
of them; each is also a template of its own.
*/}}

{{- define "hermod-common.all" -}}
{{- $docs := list -}}
{{- range $t := list "serviceAccount" "service" "deployment" "pdb" "hpa" "serviceMonitor" "networkPolicy" "certificate" "grpcAuthzConfigMap" -}}
{{- $doc := include (printf "hermod-common.%s" $t) $ | trim -}}
{{- if $doc -}}{{- $docs = append $docs $doc -}}{{- end -}}
{{- end -}}
{{- join "\n---\n" $docs -}}
{{- end -}}

{{- define "hermod-common.serviceAccount" -}}
{{- $sa := .Values.serviceAccount | default dict -}}
{{- if $sa.create -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "hermod-common.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
  {{- with $sa.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ $spec.kubeAPI | default false }}
{{- end -}}
{{- end -}}

{{- define "hermod-common.service" -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
{{- $ports := index (include "hermod-common.ports" . | fromYaml) .Chart.Name -}}
{{- $svc := .Values.service | default dict -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
  {{- with $svc.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $svc.type | default "ClusterIP" }}
  {{- with $svc.loadBalancerSourceRanges }}
  loadBalancerSourceRanges:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $svc.externalTrafficPolicy }}
  externalTrafficPolicy: {{ . }}
  {{- end }}
  selector:
    {{- include "hermod-common.selectorLabels" . | nindent 4 }}
  ports:
    {{- range $spec.ports }}
    {{- if not .internal }}
    - name: {{ .name }}
      port: {{ .servicePort | default (index $ports .name) }}
      targetPort: {{ .name }}
      protocol: TCP
      {{- with .appProtocol }}
      appProtocol: {{ . }}
      {{- end }}
    {{- end }}
    {{- end }}
{{- /* internal ports (the gateway's ops port) are never on the client-facing Service, which may be a LoadBalancer: a ClusterIP "<name>-ops" Service carries them */ -}}
{{- $internal := list -}}
{{- range $spec.ports -}}{{- if .internal -}}{{- $internal = append $internal . -}}{{- end -}}{{- end -}}
{{- if $internal }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "hermod-common.fullname" . }}-ops
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "hermod-common.selectorLabels" . | nindent 4 }}
  ports:
    {{- range $internal }}
    - name: {{ .name }}
      port: {{ index $ports .name }}
      targetPort: {{ .name }}
      protocol: TCP
      {{- with .appProtocol }}
      appProtocol: {{ . }}
      {{- end }}
    {{- end }}
{{- end }}
{{- /* the headless Service leaves the ops port out: a ServiceMonitor finds it on one Service only */ -}}
{{- $clientPorts := list -}}
{{- range $spec.ports -}}{{- if and (ne .name $spec.opsPort) (not .internal) -}}{{- $clientPorts = append $clientPorts . -}}{{- end -}}{{- end -}}
{{- if and $svc.headless $clientPorts }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "hermod-common.fullname" . }}-headless
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  clusterIP: None
  selector:
    {{- include "hermod-common.selectorLabels" . | nindent 4 }}
  ports:
    {{- range $clientPorts }}
    - name: {{ .name }}
      port: {{ index $ports .name }}
      targetPort: {{ .name }}
      protocol: TCP
      {{- with .appProtocol }}
      appProtocol: {{ . }}
      {{- end }}
    {{- end }}
{{- end }}
{{- end -}}

{{- define "hermod-common.pdb" -}}
{{- $pdb := .Values.pdb | default dict -}}
{{- if $pdb.enabled -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $pdb.minAvailable) }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable | default 1 }}
  {{- end }}
  {{- with $pdb.unhealthyPodEvictionPolicy }}
  unhealthyPodEvictionPolicy: {{ . }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "hermod-common.selectorLabels" . | nindent 6 }}
{{- end -}}
{{- end -}}

{{- define "hermod-common.hpa" -}}
{{- $a := .Values.autoscaling | default dict -}}
{{- if $a.enabled -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "hermod-common.fullname" . }}
  minReplicas: {{ int ($a.minReplicas | default 1) }}
  maxReplicas: {{ int (required (printf "%s.autoscaling.maxReplicas is required" .Chart.Name) $a.maxReplicas) }}
  metrics:
    {{- with $a.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ int . }}
    {{- end }}
    {{- with $a.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ int . }}
    {{- end }}
    {{- with $a.metrics }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $a.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/*
hermod-common.serviceMonitor: a Prometheus Operator ServiceMonitor on the ops
port, when <service>.serviceMonitor.enabled or global.serviceMonitor.enabled.
*/}}
{{- define "hermod-common.serviceMonitor" -}}
{{- $sm := .Values.serviceMonitor | default dict -}}
{{- $gsm := .Values.global.serviceMonitor | default dict -}}
{{- if or $sm.enabled $gsm.enabled -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
    {{- with mergeOverwrite (deepCopy ($gsm.labels | default dict)) ($sm.labels | default dict) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "hermod-common.selectorLabels" . | nindent 6 }}
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  endpoints:
    - port: {{ $spec.opsPort }}
      path: /metrics
      scheme: http
      interval: {{ $sm.interval | default $gsm.interval | default "30s" }}
      scrapeTimeout: {{ $sm.scrapeTimeout | default $gsm.scrapeTimeout | default "10s" }}
      {{- with ($.Values.global.opsToken | default dict) }}
      {{- if .existingSecret }}
      {{- /* /metrics asks for the ops token (global.opsToken) */}}
      bearerTokenSecret:
        name: {{ .existingSecret | quote }}
        key: {{ .key | default "token" | quote }}
      {{- end }}
      {{- end }}
      {{- with $sm.relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $sm.metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
{{- end -}}

{{/*
hermod-common.rbac: a Role and RoleBinding in each namespace, or a
ClusterRole and ClusterRoleBinding, granting rules to this component's
ServiceAccount. Takes (dict "ctx" . "suffix" "scaler" "scope" "namespace"
"namespaces" (list ...) "rules" (list ...)); scope is namespace or cluster;
no namespaces means the release's.
*/}}
{{- define "hermod-common.rbac" -}}
{{- $ctx := .ctx -}}
{{- $name := printf "%s-%s" (include "hermod-common.fullname" $ctx) .suffix -}}
{{- $subject := dict "kind" "ServiceAccount" "name" (include "hermod-common.serviceAccountName" $ctx) "namespace" $ctx.Release.Namespace -}}
{{- if eq .scope "cluster" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ printf "%s-%s" $ctx.Release.Namespace $name | trunc 63 | trimSuffix "-" }}
  labels:
    {{- include "hermod-common.labels" $ctx | nindent 4 }}
rules:
  {{- toYaml .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ printf "%s-%s" $ctx.Release.Namespace $name | trunc 63 | trimSuffix "-" }}
  labels:
    {{- include "hermod-common.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ printf "%s-%s" $ctx.Release.Namespace $name | trunc 63 | trimSuffix "-" }}
subjects:
  - kind: ServiceAccount
    name: {{ $subject.name }}
    namespace: {{ $subject.namespace }}
{{- else if eq .scope "namespace" -}}
{{- $rules := .rules -}}
{{- range $i, $ns := .namespaces | default (list $ctx.Release.Namespace) | uniq }}
{{- if $i }}
---
{{- end }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "hermod-common.labels" $ctx | nindent 4 }}
rules:
  {{- toYaml $rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "hermod-common.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $subject.name }}
    namespace: {{ $subject.namespace }}
{{- end }}
{{- else -}}
{{- fail (printf "%s: rbac scope %q is not namespace or cluster" $ctx.Chart.Name .scope) -}}
{{- end -}}
{{- end -}}

{{/*
hermod-common.configData: a config given as a YAML object or as a string,
as the text of a file: a string is kept byte for byte; an object is
rendered as YAML.
*/}}
{{- define "hermod-common.configData" -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
hermod-common.networkPolicy: who may reach each of the component's ports
(global.networkPolicy): a gRPC port its Hermod callers (grpcCallers), the
picker's Envoy too (extprocFrom); ops ports opsFrom; the indexer's ZMQ
port zmqFrom; the gateway's API anyone.
*/}}
{{- define "hermod-common.grpcCallers" -}}
picker: [gateway]
indexer: [picker]
responses: [gateway]
{{- end -}}

{{- define "hermod-common.networkPolicy" -}}
{{- $np := (.Values.global | default dict).networkPolicy | default dict -}}
{{- if $np.enabled -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
{{- $callers := index (include "hermod-common.grpcCallers" . | fromYaml) .Chart.Name | default list -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "hermod-common.selectorLabels" . | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
  {{- range $p := $spec.ports }}
    - ports:
        - port: {{ $p.name }}
          protocol: TCP
      {{- if eq $p.name "grpc" }}
      {{- $from := list -}}
      {{- range $c := $callers }}
      {{- $from = append $from (dict "podSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" (printf "hermod-%s" $c) "app.kubernetes.io/instance" $.Release.Name))) -}}
      {{- end }}
      {{- if eq $.Chart.Name "picker" }}
      {{- $from = concat $from ($np.extprocFrom | default list) -}}
      {{- end }}
      {{- if not $from }}
      {{- fail (printf "global.networkPolicy: no caller of %s's gRPC port is known" $.Chart.Name) }}
      {{- end }}
      from:
        {{- toYaml $from | nindent 8 }}
      {{- else if eq $p.name "zmq" }}
      from:
        {{- toYaml ($np.zmqFrom | default list) | nindent 8 }}
      {{- else if eq $p.name $spec.opsPort }}
      from:
        {{- toYaml ($np.opsFrom | default list) | nindent 8 }}
      {{- end }}
  {{- end }}
{{- end -}}
{{- end -}}
