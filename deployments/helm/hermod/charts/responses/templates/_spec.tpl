{{/* The responses store's part of the Deployment (see hermod-common/_workload.tpl). */}}
{{- define "responses.spec" -}}
{{- $args := list -}}
{{- $env := list -}}
{{- $volumes := list -}}
{{- $mounts := list -}}
{{- $store := .Values.store | default dict -}}
{{- $type := $store.type | default "memory" -}}
{{- if eq $type "memory" -}}
{{- /* one replica's memory: conversations do not survive a restart nor span replicas */ -}}
{{- $args = append $args (printf "--store-config=%s" (toJson (dict "inMemoryConfig" ($store.memory | default dict)))) -}}
{{- else if eq $type "tiered" -}}
{{- /* Valkey/Redis (global.valkey) as tier 1, MongoDB (global.mongodb) as tier 2 when
       store.tiered.mongo.enabled; the secrets reach the config through $(SECRET_*) */ -}}
{{- $t := $store.tiered | default dict -}}
{{- $v := .Values.global.valkey | default dict -}}
{{- $redis := omit (deepCopy ($t.redis | default dict)) "enabled" -}}
{{- if not $redis.addresses -}}
{{- $_ := set $redis "address" (include "hermod-common.valkeyAddress" (dict "ctx" . "for" "responses.store.type=tiered")) -}}
{{- end -}}
{{- with $v.username -}}{{- $_ := set $redis "username" . -}}{{- end -}}
{{- with $v.db -}}{{- $_ := set $redis "db" (int .) -}}{{- end -}}
{{- if $v.existingSecret -}}
{{- $env = concat $env (include "hermod-common.valkeyEnv" . | fromYamlArray) -}}
{{- $_ := set $redis "password" "$(SECRET_VALKEY_PASSWORD)" -}}
{{- end -}}
{{- $cfg := dict "redis" $redis -}}
{{- $mongo := $t.mongo | default dict -}}
{{- if $mongo.enabled -}}
{{- $m := .Values.global.mongodb | default dict -}}
{{- $env = concat $env (include "hermod-common.mongoEnv" (dict "ctx" . "for" "responses.store.tiered.mongo") | fromYamlArray) -}}
{{- $mc := omit (deepCopy $mongo) "enabled" -}}
{{- $_ := set $mc "uri" "$(SECRET_MONGODB_URI)" -}}
{{- $_ := set $mc "database" ($mc.database | default $m.database | default "hermod") -}}
{{- $_ := set $mc "collection" ($mc.collection | default $m.collection | default "responses") -}}
{{- $_ := set $cfg "mongo" $mc -}}
{{- with $t.stream -}}{{- $_ := set $cfg "stream" . -}}{{- end -}}
{{- end -}}
{{- $env = append $env (dict "name" "HERMOD_STORE_CONFIG" "value" (toJson (dict "tieredConfig" $cfg))) -}}
{{- else if eq $type "secret" -}}
{{- /* the whole storeConfig from the operator's Secret, mounted as a file */ -}}
{{- $s := $store.existingSecret | default dict -}}
{{- $key := $s.key | default "store-config.yaml" -}}
{{- $args = append $args (printf "--store-config=@/etc/hermod/responses/store/%s" $key) -}}
{{- $volumes = append $volumes (dict "name" "store-config" "secret" (dict "secretName" (required "responses.store.existingSecret.name is required by responses.store.type=secret" $s.name) "items" (list (dict "key" $key "path" $key)))) -}}
{{- $mounts = append $mounts (dict "name" "store-config" "mountPath" "/etc/hermod/responses/store" "readOnly" true) -}}
{{- else if ne $type "pool" -}}
{{- fail (printf "responses.store.type: %q is not memory, tiered, secret or pool" $type) -}}
{{- end -}}
opsPort: metrics
ports:
  - name: grpc
    flag: listen
    appProtocol: grpc
  - name: metrics
    flag: metrics-listen
    appProtocol: http
nats: false
{{- /* the pool's EndpointPickerConfig in etcd names the store only with type pool */}}
etcd: {{ eq $type "pool" }}
kubeAPI: false
args: {{ toJson $args }}
env: {{ toJson $env }}
volumes: {{ toJson $volumes }}
volumeMounts: {{ toJson $mounts }}
podAnnotations: {}
{{- end -}}
