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
       store.tiered.mongo.enabled; passwords and TLS files are mounted from the Secrets
       and named by the config (passwordFile, tls); the MongoDB URI reaches it through
       $(SECRET_MONGODB_URI) */ -}}
{{- $t := $store.tiered | default dict -}}
{{- $v := .Values.global.valkey | default dict -}}
{{- $redis := omit (deepCopy ($t.redis | default dict)) "enabled" -}}
{{- if not $redis.addresses -}}
{{- $_ := set $redis "address" (include "hermod-common.valkeyAddress" (dict "ctx" . "for" "responses.store.type=tiered")) -}}
{{- end -}}
{{- with $v.username -}}{{- $_ := set $redis "username" . -}}{{- end -}}
{{- with $v.db -}}{{- $_ := set $redis "db" (int .) -}}{{- end -}}
{{- if $v.existingSecret -}}
{{- $f := include "hermod-common.secretFile" (dict "secret" $v.existingSecret "key" ($v.passwordKey | default "password") "name" "valkey-auth" "dir" "/etc/hermod/secrets/valkey" "file" "password") | fromYaml -}}
{{- $volumes = append $volumes $f.volume -}}
{{- $mounts = append $mounts $f.mount -}}
{{- $_ := set $redis "passwordFile" $f.path -}}
{{- end -}}
{{- $vtls := include "hermod-common.clientTLSVolume" (dict "tls" $v.tlsFiles "what" "global.valkey.tlsFiles" "name" "valkey-tls" "dir" "/etc/hermod/tls/valkey" "flag" "valkey") | fromYaml -}}
{{- if $vtls.volume -}}
{{- if not $v.tls -}}{{- fail "global.valkey.tlsFiles.enabled needs global.valkey.tls true (rediss://)" -}}{{- end -}}
{{- $volumes = append $volumes $vtls.volume -}}
{{- $mounts = append $mounts $vtls.mount -}}
{{- $_ := set $redis "tls" $vtls.files -}}
{{- end -}}
{{- $cfg := dict "redis" $redis -}}
{{- $mongo := $t.mongo | default dict -}}
{{- if $mongo.enabled -}}
{{- $m := .Values.global.mongodb | default dict -}}
{{- $env = concat $env (include "hermod-common.mongoEnv" (dict "ctx" . "for" "responses.store.tiered.mongo") | fromYamlArray) -}}
{{- $mc := omit (deepCopy $mongo) "enabled" -}}
{{- $_ := set $mc "uri" "$(SECRET_MONGODB_URI)" -}}
{{- if $m.username -}}
{{- $f := include "hermod-common.secretFile" (dict "secret" $m.existingSecret "key" (required "global.mongodb.passwordKey is required by global.mongodb.username (the key of existingSecret holding the password)" $m.passwordKey) "name" "mongodb-auth" "dir" "/etc/hermod/secrets/mongodb" "file" "password") | fromYaml -}}
{{- $volumes = append $volumes $f.volume -}}
{{- $mounts = append $mounts $f.mount -}}
{{- $_ := set $mc "username" $m.username -}}
{{- $_ := set $mc "passwordFile" $f.path -}}
{{- end -}}
{{- $mtls := include "hermod-common.clientTLSVolume" (dict "tls" $m.tls "what" "global.mongodb" "name" "mongodb-tls" "dir" "/etc/hermod/tls/mongodb" "flag" "mongodb") | fromYaml -}}
{{- if $mtls.volume -}}
{{- $volumes = append $volumes $mtls.volume -}}
{{- $mounts = append $mounts $mtls.mount -}}
{{- $_ := set $mc "tls" $mtls.files -}}
{{- end -}}
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
