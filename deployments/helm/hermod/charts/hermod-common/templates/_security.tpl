{{/*
TLS and credentials: gRPC mTLS between the services (global.tls), TLS and
authentication towards etcd and NATS (global.etcd, global.nats), the ops
port's bearer token (global.opsToken).

Nothing secret is rendered and nothing secret is passed as a flag value: every
certificate, key, password, token, NKey seed or .creds file is a key of the
operator's Secret (or of the Secret cert-manager writes), mounted read-only as
a file in a directory volume (no subPath, so that a rotation reaches the
running pod: the services reload certificates from disk), and the flags name
those files.

Mount points (one directory per concern):
  /etc/hermod/tls/grpc      tls.crt tls.key ca.crt   --grpc-tls-*-file
  /etc/hermod/grpc-authz    policy.yaml              --grpc-authz-file
  /etc/hermod/tls/etcd      ca.crt [tls.crt tls.key] --etcd-*-file
  /etc/hermod/secrets/etcd  password                 --etcd-password-file
  /etc/hermod/tls/nats      ca.crt [tls.crt tls.key] --nats-*-file
  /etc/hermod/secrets/nats  password|token|nkey|creds
  /etc/hermod/secrets/ops   token                    --ops-token-file
*/}}

{{/* hermod-common.secretFileMode: the mode of mounted secret files (0440: the pod's fsGroup reads them). */}}
{{- define "hermod-common.secretFileMode" -}}288{{- end -}}

{{/* hermod-common.grpcTLSEnabled: "true" when global.tls.enabled. */}}
{{- define "hermod-common.grpcTLSEnabled" -}}
{{- if ((.Values.global | default dict).tls | default dict).enabled -}}true{{- end -}}
{{- end -}}

{{/*
hermod-common.grpcTLSSecretName: the Secret of this service's gRPC
certificate (kubernetes.io/tls: tls.crt, tls.key, ca.crt):
<service>.tls.existingSecret, else <fullname>-grpc-tls, the name the
chart's cert-manager Certificate writes.
*/}}
{{- define "hermod-common.grpcTLSSecretName" -}}
{{- (.Values.tls | default dict).existingSecret | default (printf "%s-grpc-tls" (include "hermod-common.fullname" .)) -}}
{{- end -}}

{{/* hermod-common.grpcClientAuth: <service>.tls.clientAuth, else global.tls.clientAuth, else require. */}}
{{- define "hermod-common.grpcClientAuth" -}}
{{- $t := (.Values.global | default dict).tls | default dict -}}
{{- $mode := (.Values.tls | default dict).clientAuth | default $t.clientAuth | default "require" -}}
{{- if not (has $mode (list "none" "optional" "require")) -}}
{{- fail (printf "%s: tls clientAuth %q is not none, optional or require" .Chart.Name $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* hermod-common.hasGRPCPort: "true" when this service serves gRPC (a port named grpc). Takes (dict "spec" $spec). */}}
{{- define "hermod-common.hasGRPCPort" -}}
{{- range .spec.ports -}}{{- if eq .name "grpc" -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/* hermod-common.grpcAuthzEnabled: "true" when this service gets --grpc-authz-file. */}}
{{- define "hermod-common.grpcAuthzEnabled" -}}
{{- $t := (.Values.global | default dict).tls | default dict -}}
{{- $spec := include "hermod-common.spec" . | fromYaml -}}
{{- if and $t.enabled (not (kindIs "invalid" $t.authzPolicy)) $t.authzPolicy (include "hermod-common.hasGRPCPort" (dict "spec" $spec)) (ne (include "hermod-common.grpcClientAuth" .) "none") -}}true{{- end -}}
{{- end -}}

{{/*
hermod-common.clientTLSVolume: a Secret volume of a backend's TLS files
(caKey -> ca.crt, certKey -> tls.crt, keyKey -> tls.key, each when set) and
the flags naming them. Takes (dict "tls" $block "what" "global.etcd"
"name" "etcd-tls" "dir" "/etc/hermod/tls/etcd" "flag" "etcd"); returns
{volume, mount, args, files} or {} when the block is off; files is the
config block {caFile, certFile, keyFile, serverName} of the same files.
*/}}
{{- define "hermod-common.clientTLSVolume" -}}
{{- $t := .tls | default dict -}}
{{- if $t.enabled -}}
{{- $secret := required (printf "%s.tls.existingSecret is required by %s.tls.enabled (a Secret with the CA and, for client certificates, tls.crt and tls.key)" .what .what) $t.existingSecret -}}
{{- $items := list -}}
{{- $args := list -}}
{{- $files := dict -}}
{{- with $t.serverName -}}{{- $_ := set $files "serverName" . -}}{{- end -}}
{{- $caKey := ternary "ca.crt" $t.caKey (kindIs "invalid" $t.caKey) -}}
{{- $certKey := ternary "tls.crt" $t.certKey (kindIs "invalid" $t.certKey) -}}
{{- $keyKey := ternary "tls.key" $t.keyKey (kindIs "invalid" $t.keyKey) -}}
{{- if and (not $certKey) $keyKey -}}{{- $keyKey = "" -}}{{- end -}}
{{- if and $certKey (not $keyKey) -}}{{- fail (printf "%s.tls: certKey %q needs keyKey" .what $certKey) -}}{{- end -}}
{{- with $caKey -}}
{{- $items = append $items (dict "key" . "path" "ca.crt") -}}
{{- $args = append $args (printf "--%s-ca-file=%s/ca.crt" $.flag $.dir) -}}
{{- $_ := set $files "caFile" (printf "%s/ca.crt" $.dir) -}}
{{- end -}}
{{- if $certKey -}}
{{- $items = concat $items (list (dict "key" $certKey "path" "tls.crt") (dict "key" $keyKey "path" "tls.key")) -}}
{{- $args = concat $args (list (printf "--%s-cert-file=%s/tls.crt" .flag .dir) (printf "--%s-key-file=%s/tls.key" .flag .dir)) -}}
{{- $_ := set $files "certFile" (printf "%s/tls.crt" .dir) -}}
{{- $_ := set $files "keyFile" (printf "%s/tls.key" .dir) -}}
{{- end -}}
{{- if not $items -}}{{- fail (printf "%s.tls: caKey and certKey are both empty: nothing to mount" .what) -}}{{- end -}}
{{- $out := dict
      "volume" (dict "name" .name "secret" (dict "secretName" $secret "defaultMode" (include "hermod-common.secretFileMode" . | int) "items" $items))
      "mount" (dict "name" .name "mountPath" .dir "readOnly" true)
      "args" $args
      "files" $files -}}
{{- toYaml $out -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/*
hermod-common.secretFile: one key of a Secret mounted as the file <dir>/<file>.
Takes (dict "secret" "name" "key" "password" "name" "etcd-auth" "dir"
"/etc/hermod/secrets/etcd" "file" "password"); returns {volume, mount, path}.
*/}}
{{- define "hermod-common.secretFile" -}}
{{- $out := dict
      "volume" (dict "name" .name "secret" (dict "secretName" .secret "defaultMode" (include "hermod-common.secretFileMode" . | int) "items" (list (dict "key" .key "path" .file))))
      "mount" (dict "name" .name "mountPath" .dir "readOnly" true)
      "path" (printf "%s/%s" .dir .file) -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
hermod-common.security: the arguments, volumes, mounts and pod annotations of
TLS and credentials for this service. Takes (dict "ctx" . "spec" $spec);
returns {args, volumes, mounts, annotations}.
*/}}
{{- define "hermod-common.security" -}}
{{- $ctx := .ctx -}}
{{- $spec := .spec -}}
{{- $g := $ctx.Values.global | default dict -}}
{{- $args := list -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- $annotations := dict -}}

{{- /* gRPC: this service's certificate (server and client), the CA, client auth, the policy */ -}}
{{- $t := $g.tls | default dict -}}
{{- if $t.enabled -}}
{{- $probes := $ctx.Values.probes | default dict -}}
{{- if and (eq ($probes.type | default "http") "grpc") (include "hermod-common.hasGRPCPort" (dict "spec" $spec)) -}}
{{- fail (printf "%s.probes.type grpc: the kubelet's gRPC probe speaks plaintext, which the TLS port (global.tls.enabled) refuses: use probes.type http" $ctx.Chart.Name) -}}
{{- end -}}
{{- $dir := "/etc/hermod/tls/grpc" -}}
{{- $ca := $t.ca | default dict -}}
{{- $caKey := $ca.key | default "ca.crt" -}}
{{- $own := list (dict "key" "tls.crt" "path" "tls.crt") (dict "key" "tls.key" "path" "tls.key") -}}
{{- $sources := list -}}
{{- if and $ca.existingSecret $ca.configMap -}}
{{- fail "global.tls.ca: set existingSecret or configMap, not both" -}}
{{- else if $ca.existingSecret -}}
{{- $sources = list (dict "secret" (dict "name" (include "hermod-common.grpcTLSSecretName" $ctx) "items" $own)) (dict "secret" (dict "name" $ca.existingSecret "items" (list (dict "key" $caKey "path" "ca.crt")))) -}}
{{- else if $ca.configMap -}}
{{- $sources = list (dict "secret" (dict "name" (include "hermod-common.grpcTLSSecretName" $ctx) "items" $own)) (dict "configMap" (dict "name" $ca.configMap "items" (list (dict "key" $caKey "path" "ca.crt")))) -}}
{{- else -}}
{{- $sources = list (dict "secret" (dict "name" (include "hermod-common.grpcTLSSecretName" $ctx) "items" (append $own (dict "key" "ca.crt" "path" "ca.crt")))) -}}
{{- end -}}
{{- $volumes = append $volumes (dict "name" "grpc-tls" "projected" (dict "defaultMode" (include "hermod-common.secretFileMode" . | int) "sources" $sources)) -}}
{{- $mounts = append $mounts (dict "name" "grpc-tls" "mountPath" $dir "readOnly" true) -}}
{{- $args = concat $args (list (printf "--grpc-tls-ca-file=%s/ca.crt" $dir) (printf "--grpc-tls-cert-file=%s/tls.crt" $dir) (printf "--grpc-tls-key-file=%s/tls.key" $dir) (printf "--grpc-tls-client-auth=%s" (include "hermod-common.grpcClientAuth" $ctx))) -}}
{{- with $t.serverName -}}{{- $args = append $args (printf "--grpc-tls-server-name=%s" .) -}}{{- end -}}
{{- if include "hermod-common.grpcAuthzEnabled" $ctx -}}
{{- /* the policy is read at start: a change rolls the pods (checksum) */ -}}
{{- $volumes = append $volumes (dict "name" "grpc-authz" "configMap" (dict "name" (printf "%s-grpc-authz" (include "hermod-common.fullname" $ctx)))) -}}
{{- $mounts = append $mounts (dict "name" "grpc-authz" "mountPath" "/etc/hermod/grpc-authz" "readOnly" true) -}}
{{- $args = append $args "--grpc-authz-file=/etc/hermod/grpc-authz/policy.yaml" -}}
{{- $_ := set $annotations "checksum/grpc-authz" (include "hermod-common.configData" $t.authzPolicy | sha256sum) -}}
{{- end -}}
{{- end -}}

{{- /* etcd: TLS files, an RBAC user with its password file */ -}}
{{- if $spec.etcd -}}
{{- $e := $g.etcd | default dict -}}
{{- $tls := include "hermod-common.clientTLSVolume" (dict "tls" $e.tls "what" "global.etcd" "name" "etcd-tls" "dir" "/etc/hermod/tls/etcd" "flag" "etcd") | fromYaml -}}
{{- if $tls.volume -}}
{{- $volumes = append $volumes $tls.volume -}}
{{- $mounts = append $mounts $tls.mount -}}
{{- $args = concat $args $tls.args -}}
{{- end -}}
{{- with ($e.tls | default dict) -}}{{- if and .enabled .serverName -}}{{- $args = append $args (printf "--etcd-server-name=%s" .serverName) -}}{{- end -}}{{- end -}}
{{- $a := $e.auth | default dict -}}
{{- if $a.username -}}
{{- $f := include "hermod-common.secretFile" (dict "secret" (required "global.etcd.auth.existingSecret is required by global.etcd.auth.username (the user's password)" $a.existingSecret) "key" ($a.passwordKey | default "password") "name" "etcd-auth" "dir" "/etc/hermod/secrets/etcd" "file" "password") | fromYaml -}}
{{- $volumes = append $volumes $f.volume -}}
{{- $mounts = append $mounts $f.mount -}}
{{- $args = concat $args (list (printf "--etcd-username=%s" $a.username) (printf "--etcd-password-file=%s" $f.path)) -}}
{{- else if $a.existingSecret -}}
{{- fail "global.etcd.auth.existingSecret is set without global.etcd.auth.username" -}}
{{- end -}}
{{- end -}}

{{- /* NATS: TLS files and one way to authenticate */ -}}
{{- if $spec.nats -}}
{{- $n := $g.nats | default dict -}}
{{- $tls := include "hermod-common.clientTLSVolume" (dict "tls" $n.tls "what" "global.nats" "name" "nats-tls" "dir" "/etc/hermod/tls/nats" "flag" "nats") | fromYaml -}}
{{- if $tls.volume -}}
{{- $volumes = append $volumes $tls.volume -}}
{{- $mounts = append $mounts $tls.mount -}}
{{- $args = concat $args $tls.args -}}
{{- end -}}
{{- $a := $n.auth | default dict -}}
{{- $type := $a.type | default "none" -}}
{{- $files := dict "user" "password" "token" "token" "nkey" "nkey.seed" "creds" "user.creds" -}}
{{- if eq $type "none" -}}
{{- if or $a.user $a.existingSecret -}}{{- fail "global.nats.auth: user or existingSecret set with type none (user, token, nkey or creds)" -}}{{- end -}}
{{- else if hasKey $files $type -}}
{{- $file := index $files $type -}}
{{- $f := include "hermod-common.secretFile" (dict "secret" (required (printf "global.nats.auth.existingSecret is required by global.nats.auth.type=%s" $type) $a.existingSecret) "key" ($a.key | default $file) "name" "nats-auth" "dir" "/etc/hermod/secrets/nats" "file" $file) | fromYaml -}}
{{- $volumes = append $volumes $f.volume -}}
{{- $mounts = append $mounts $f.mount -}}
{{- if eq $type "user" -}}
{{- $args = concat $args (list (printf "--nats-user=%s" (required "global.nats.auth.user is required by global.nats.auth.type=user" $a.user)) (printf "--nats-password-file=%s" $f.path)) -}}
{{- else -}}
{{- if $a.user -}}{{- fail (printf "global.nats.auth.user is only for type user (type is %s)" $type) -}}{{- end -}}
{{- $args = append $args (printf "--nats-%s-file=%s" $type $f.path) -}}
{{- end -}}
{{- else -}}
{{- fail (printf "global.nats.auth.type %q is not none, user, token, nkey or creds" $type) -}}
{{- end -}}
{{- end -}}

{{- /* the ops port: /metrics and /debug behind a bearer token (/health and /ready stay open) */ -}}
{{- $o := $g.opsToken | default dict -}}
{{- if $o.existingSecret -}}
{{- $f := include "hermod-common.secretFile" (dict "secret" $o.existingSecret "key" ($o.key | default "token") "name" "ops-token" "dir" "/etc/hermod/secrets/ops" "file" "token") | fromYaml -}}
{{- $volumes = append $volumes $f.volume -}}
{{- $mounts = append $mounts $f.mount -}}
{{- $args = append $args (printf "--ops-token-file=%s" $f.path) -}}
{{- end -}}
{{- toYaml (dict "args" $args "volumes" $volumes "mounts" $mounts "annotations" $annotations) -}}
{{- end -}}

{{/*
hermod-common.certificate: the cert-manager Certificate of this service's
gRPC identity, spiffe://hermod/<service>, for the names of its Services,
usable as server and as client certificate, when global.tls.enabled and
global.tls.certManager.enabled.
*/}}
{{- define "hermod-common.certificate" -}}
{{- $t := (.Values.global | default dict).tls | default dict -}}
{{- $cm := $t.certManager | default dict -}}
{{- if and $t.enabled $cm.enabled -}}
{{- $issuer := $cm.issuerRef | default dict -}}
{{- $fn := include "hermod-common.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $fn -}}
{{- if (.Values.service | default dict).headless -}}{{- $hosts = append $hosts (printf "%s-headless" $fn) -}}{{- end -}}
{{- $dns := list -}}
{{- range $hosts -}}
{{- $dns = concat $dns (list . (printf "%s.%s" . $ns) (printf "%s.%s.svc" . $ns) (printf "%s.%s.svc.%s" . $ns ($cm.clusterDomain | default "cluster.local"))) -}}
{{- end -}}
{{- $dns = concat $dns ((.Values.tls | default dict).extraDnsNames | default list) -}}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ $fn }}-grpc
  namespace: {{ $ns }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
spec:
  secretName: {{ include "hermod-common.grpcTLSSecretName" . }}
  {{- include "hermod-common.certificateSpec" (dict "cm" $cm "uri" (printf "spiffe://hermod/%s" .Chart.Name) "usages" (list "server auth" "client auth")) | nindent 2 }}
  dnsNames:
    {{- toYaml $dns | nindent 4 }}
{{- end -}}
{{- end -}}

{{/*
hermod-common.certificateSpec: the fields every Certificate of the chart
shares: the identity URI, the usages, lifetime, key and issuer. Takes (dict
"cm" global.tls.certManager "uri" "spiffe://hermod/<name>" "usages" (list ...)).
*/}}
{{- define "hermod-common.certificateSpec" -}}
{{- $cm := .cm -}}
{{- $issuer := $cm.issuerRef | default dict -}}
{{- $key := $cm.privateKey | default dict -}}
duration: {{ $cm.duration | default "2160h" }}
renewBefore: {{ $cm.renewBefore | default "360h" }}
uris:
  - {{ .uri }}
usages:
  - digital signature
  - key encipherment
  {{- range .usages }}
  - {{ . }}
  {{- end }}
privateKey:
  algorithm: {{ $key.algorithm | default "ECDSA" }}
  size: {{ int ($key.size | default 256) }}
  rotationPolicy: {{ $key.rotationPolicy | default "Always" }}
issuerRef:
  name: {{ required "global.tls.certManager.issuerRef.name is required by global.tls.certManager.enabled" $issuer.name }}
  kind: {{ $issuer.kind | default "Issuer" }}
  group: {{ $issuer.group | default "cert-manager.io" }}
{{- end -}}

{{/* hermod-common.grpcAuthzConfigMap: the --grpc-authz-file policy (global.tls.authzPolicy), for the services that serve gRPC. */}}
{{- define "hermod-common.grpcAuthzConfigMap" -}}
{{- if include "hermod-common.grpcAuthzEnabled" . -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "hermod-common.fullname" . }}-grpc-authz
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "hermod-common.labels" . | nindent 4 }}
data:
  {{- toYaml (dict "policy.yaml" (include "hermod-common.configData" .Values.global.tls.authzPolicy)) | nindent 2 }}
{{- end -}}
{{- end -}}
