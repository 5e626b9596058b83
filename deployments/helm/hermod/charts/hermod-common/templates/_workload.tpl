{{/*
The Deployment every Hermod service runs as.

A service subchart defines "<chart>.spec", which returns YAML:

  opsPort: metrics          # the port serving /health, /ready and /metrics
  ports:                    # names from hermod-common.ports
    - name: grpc
      flag: listen          # the flag that takes ":<port>" (optional)
      appProtocol: grpc     # optional
      servicePort: 8080     # the Service's port, when not the container's (optional)
  nats: true                # pass global.nats (--nats-url or HERMOD_NATS_URL, its TLS and auth)
  etcd: true                # pass global.etcd (--etcd-endpoints, its TLS and auth)
  kubeAPI: false            # the pods call the Kubernetes API: mount a token
  args: []                  # the service's own flags (--name=value)
  env: []                   # the service's own environment (secret variables first)
  volumes: []
  volumeMounts: []
  podAnnotations: {}        # e.g. checksums of mounted configs

and a one-line template that includes "hermod-common.all".
*/}}

{{/* hermod-common.spec: the subchart's spec, parsed. */}}
{{- define "hermod-common.spec" -}}
{{- include (printf "%s.spec" .Chart.Name) . -}}
{{- end -}}

{{/*
hermod-common.flagArgs: .Values.flags (a map of flag name to value) as
--name=value arguments, sorted by name; a null value leaves the flag out,
a list is joined with commas. Returns a YAML list.
*/}}
{{- define "hermod-common.flagArgs" -}}
{{- $flags := .Values.flags | default dict -}}
{{- $args := list -}}
{{- range $k := keys $flags | sortAlpha -}}
{{- $v := index $flags $k -}}
{{- if not (kindIs "invalid" $v) -}}
{{- if kindIs "float64" $v -}}
{{- if eq $v (float64 (int64 $v)) -}}{{- $v = int64 $v -}}{{- end -}}
{{- else if kindIs "slice" $v -}}
{{- $v = join "," $v -}}
{{- end -}}
{{- $args = append $args (printf "--%s=%v" $k $v) -}}
{{- end -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* hermod-common.verbosity: the service's -v, else global.log.verbosity. */}}
{{- define "hermod-common.verbosity" -}}
{{- $v := (.Values.log | default dict).verbosity -}}
{{- if kindIs "invalid" $v -}}{{- $v = ((.Values.global.log | default dict).verbosity | default 0) -}}{{- end -}}
{{- int $v -}}
{{- end -}}

{{/* hermod-common.probe: one probe. Takes (dict "ctx" . "spec" $spec "kind" "liveness"). */}}
{{- define "hermod-common.probe" -}}
{{- $ctx := .ctx -}}
{{- $probes := $ctx.Values.probes | default dict -}}
{{- $defaults := dict
      "liveness" (dict "periodSeconds" 10 "timeoutSeconds" 2 "failureThreshold" 3)
      "readiness" (dict "periodSeconds" 5 "timeoutSeconds" 2 "failureThreshold" 3)
      "startup" (dict "periodSeconds" 5 "timeoutSeconds" 2 "failureThreshold" 60) -}}
{{- $p := mergeOverwrite (deepCopy (index $defaults .kind)) (omit (deepCopy (index $probes .kind | default dict)) "enabled") -}}
{{- $ports := index (include "hermod-common.ports" $ctx | fromYaml) $ctx.Chart.Name -}}
{{- if and (eq ($probes.type | default "http") "grpc") (hasKey $ports "grpc") -}}
{{- $_ := set $p "grpc" (dict "port" (index $ports "grpc")) -}}
{{- else -}}
{{- $_ := set $p "httpGet" (dict "path" (ternary "/ready" "/health" (eq .kind "readiness")) "port" .spec.opsPort) -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}

{{- define "hermod-common.deployment" -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
{{- $g := .Values.global | default dict -}}
{{- $ports := index (include "hermod-common.ports" . | fromYaml) .Chart.Name -}}
{{- $log := $g.log | default dict -}}
{{- /* arguments: common flags, listen addresses, stores, the service's own, flags, extraArgs */ -}}
{{- $args := list (printf "--pool=%s" (required "global.pool is required" $g.pool)) (printf "--v=%s" (include "hermod-common.verbosity" .)) (printf "--log-format=%s" ($log.format | default "json")) -}}
{{- with ($g.otlp | default dict).endpoint -}}{{- $args = append $args (printf "--otlp-endpoint=%s" .) -}}{{- end -}}
{{- range $spec.ports -}}
{{- /* the pod's addresses: the binaries listen on loopback by default */ -}}
{{- if .flag -}}{{- $args = append $args (printf "--%s=0.0.0.0:%v" .flag (index $ports .name)) -}}{{- end -}}
{{- end -}}
{{- $env := list -}}
{{- if $spec.nats -}}
{{- $args = concat $args (include "hermod-common.natsArgs" . | fromYamlArray) -}}
{{- $env = concat $env (include "hermod-common.natsEnv" . | fromYamlArray) -}}
{{- end -}}
{{- if $spec.etcd -}}{{- $args = concat $args (include "hermod-common.etcdArgs" . | fromYamlArray) -}}{{- end -}}
{{- /* TLS and credentials (_security.tpl): files mounted from Secrets, flags naming them */ -}}
{{- $sec := include "hermod-common.security" (dict "ctx" . "spec" $spec) | fromYaml -}}
{{- $args = concat $args $sec.args -}}
{{- $args = concat $args ($spec.args | default list) (include "hermod-common.flagArgs" . | fromYamlArray) (.Values.extraArgs | default list) -}}
{{- /* environment: the stores' secrets, the replica name, the service's own, extraEnv */ -}}
{{- $env = append $env (dict "name" "HERMOD_REPLICA" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) -}}
{{- $env = concat $env ($spec.env | default list) ($g.extraEnv | default list) (.Values.extraEnv | default list) -}}
{{- /* volumes: a writable /tmp (the root file system is read-only), the service's own, extra */ -}}
{{- $volumes := concat (list (dict "name" "tmp" "emptyDir" (dict "sizeLimit" "256Mi"))) $sec.volumes ($spec.volumes | default list) (.Values.extraVolumes | default list) -}}
{{- $mounts := concat (list (dict "name" "tmp" "mountPath" "/tmp")) $sec.mounts ($spec.volumeMounts | default list) (.Values.extraVolumeMounts | default list) -}}
{{- /* security contexts: global defaults, then the service's overrides */ -}}
{{- $podSC := mergeOverwrite (deepCopy ($g.podSecurityContext | default dict)) (deepCopy (.Values.podSecurityContext | default dict)) -}}
{{- $containerSC := mergeOverwrite (deepCopy ($g.containerSecurityContext | default dict)) (deepCopy (.Values.containerSecurityContext | default dict)) -}}
{{- $annotations := mergeOverwrite (deepCopy ($g.podAnnotations | default dict)) (deepCopy (.Values.podAnnotations | default dict)) ($spec.podAnnotations | default dict) $sec.annotations -}}
{{- $tsc := list -}}
{{- range .Values.topologySpreadConstraints -}}
{{- $c := deepCopy . -}}
{{- if not $c.labelSelector -}}{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "hermod-common.selectorLabels" $ | fromYaml)) -}}{{- end -}}
{{- $tsc = append $tsc $c -}}
{{- end -}}
{{- $image := .Values.image | default dict -}}
{{- $probes := .Values.probes | default dict -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "hermod-common.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  {{- if not (.Values.autoscaling | default dict).enabled }}
  replicas: {{ int .Values.replicas }}
  {{- end }}
  revisionHistoryLimit: {{ int (.Values.revisionHistoryLimit | default 5) }}
  {{- with .Values.strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "hermod-common.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "hermod-common.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "hermod-common.serviceAccountName" . }}
      automountServiceAccountToken: {{ $spec.kubeAPI | default false }}
      {{- with (concat ($g.imagePullSecrets | default list) (.Values.imagePullSecrets | default list)) }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName | default $g.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      terminationGracePeriodSeconds: {{ int (.Values.terminationGracePeriodSeconds | default 30) }}
      securityContext:
        {{- toYaml $podSC | nindent 8 }}
      containers:
        - name: {{ .Chart.Name }}
          image: {{ include "hermod-common.image" . | quote }}
          imagePullPolicy: {{ $image.pullPolicy | default ($g.image | default dict).pullPolicy | default "IfNotPresent" }}
          args:
            {{- toYaml $args | nindent 12 }}
          env:
            {{- toYaml $env | nindent 12 }}
          {{- with .Values.extraEnvFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            {{- range $spec.ports }}
            - name: {{ .name }}
              containerPort: {{ index $ports .name }}
              protocol: TCP
            {{- end }}
          livenessProbe:
            {{- include "hermod-common.probe" (dict "ctx" . "spec" $spec "kind" "liveness") | nindent 12 }}
          readinessProbe:
            {{- include "hermod-common.probe" (dict "ctx" . "spec" $spec "kind" "readiness") | nindent 12 }}
          {{- if ($probes.startup | default dict).enabled }}
          startupProbe:
            {{- include "hermod-common.probe" (dict "ctx" . "spec" $spec "kind" "startup") | nindent 12 }}
          {{- end }}
          {{- with .Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $containerSC | nindent 12 }}
          volumeMounts:
            {{- toYaml $mounts | nindent 12 }}
      volumes:
        {{- toYaml $volumes | nindent 8 }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $tsc }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
