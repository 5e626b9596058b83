{{/*
The external stores: NATS, etcd, Valkey/Redis and MongoDB (global values).

Credentials are never rendered: they stay in Secrets the operator created
(existingSecret + key). Where a binary takes a secret from a file (etcd, NATS,
the ops token, the responses store's passwords and TLS files), the Secret's
key is mounted and a --*-file flag or a config's *File key names it
(_security.tpl). Otherwise a secret reaches a container as an environment
variable (valueFrom.secretKeyRef); where a flag needs it inside a larger
value (a URL, a JSON store config), that value is itself an environment
variable HERMOD_<FLAG> whose text names the secret variable as $(NAME),
which the kubelet expands when it starts the container. The helper
variables are named SECRET_*, never HERMOD_*, so that no binary mistakes
them for a flag.
*/}}

{{/*
hermod-common.natsArgs / hermod-common.natsEnv: --nats-url, or
HERMOD_NATS_URL from global.nats.existingSecret (a URL with credentials).
Each returns a YAML list.
*/}}
{{- define "hermod-common.natsArgs" -}}
{{- $n := .Values.global.nats | default dict -}}
{{- if not $n.existingSecret -}}
- {{ printf "--nats-url=%s" (required "global.nats.url is required" $n.url) | toJson }}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{- define "hermod-common.natsEnv" -}}
{{- $n := .Values.global.nats | default dict -}}
{{- if $n.existingSecret -}}
- name: HERMOD_NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $n.existingSecret | quote }}
      key: {{ $n.urlKey | default "url" | quote }}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* hermod-common.etcdArgs: --etcd-endpoints as a YAML list. */}}
{{- define "hermod-common.etcdArgs" -}}
{{- $e := .Values.global.etcd | default dict -}}
{{- $eps := $e.endpoints | default list -}}
{{- if kindIs "string" $eps -}}{{- $eps = splitList "," $eps -}}{{- end -}}
{{- if not $eps -}}{{- fail "global.etcd.endpoints is required" -}}{{- end -}}
- {{ printf "--etcd-endpoints=%s" (join "," $eps) | toJson }}
{{- end -}}

{{/*
hermod-common.valkeyEnv: SECRET_VALKEY_PASSWORD from
global.valkey.existingSecret, as a YAML list (empty without a secret).
*/}}
{{- define "hermod-common.valkeyEnv" -}}
{{- $v := .Values.global.valkey | default dict -}}
{{- if $v.existingSecret -}}
- name: SECRET_VALKEY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $v.existingSecret | quote }}
      key: {{ $v.passwordKey | default "password" | quote }}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/*
hermod-common.valkeyURL: the Valkey/Redis URL of global.valkey,
redis[s]://[user:$(SECRET_VALKEY_PASSWORD)@]host:port[/db]. The password is
substituted into the URL as it is: it must be URL-safe (or percent-encoded
in the Secret). Takes (dict "ctx" . "for" "what needs it").
*/}}
{{- define "hermod-common.valkeyURL" -}}
{{- $v := .ctx.Values.global.valkey | default dict -}}
{{- $addr := required (printf "global.valkey.address is required by %s" .for) $v.address -}}
{{- $userinfo := "" -}}
{{- if $v.existingSecret -}}
{{- $userinfo = printf "%s:$(SECRET_VALKEY_PASSWORD)@" ($v.username | default "") -}}
{{- else if $v.username -}}
{{- $userinfo = printf "%s@" $v.username -}}
{{- end -}}
{{- printf "%s://%s%s" (ternary "rediss" "redis" ($v.tls | default false)) $userinfo $addr -}}
{{- with $v.db -}}{{- printf "/%d" (int .) -}}{{- end -}}
{{- end -}}

{{/*
hermod-common.valkeyAddress: the same server without credentials,
redis[s]://host:port (for configs that take the password separately).
*/}}
{{- define "hermod-common.valkeyAddress" -}}
{{- $v := .ctx.Values.global.valkey | default dict -}}
{{- $addr := required (printf "global.valkey.address is required by %s" .for) $v.address -}}
{{- printf "%s://%s" (ternary "rediss" "redis" ($v.tls | default false)) $addr -}}
{{- end -}}

{{/*
hermod-common.mongoEnv: SECRET_MONGODB_URI from global.mongodb.existingSecret,
as a YAML list. Takes (dict "ctx" . "for" "what needs it").
*/}}
{{- define "hermod-common.mongoEnv" -}}
{{- $m := .ctx.Values.global.mongodb | default dict -}}
- name: SECRET_MONGODB_URI
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "global.mongodb.existingSecret is required by %s" .for) $m.existingSecret | quote }}
      key: {{ $m.uriKey | default "uri" | quote }}
{{- end -}}
