{{/* Names and labels shared by every object of the release. */}}
{{- define "spark.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "spark.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "spark.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "spark.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "spark.secretName" -}}
{{- .Values.existingSecret | default (include "spark.fullname" .) -}}
{{- end -}}

{{- define "spark.redisUrl" -}}
{{- if .Values.redis.enabled -}}
redis://:$(REDIS_PASSWORD)@{{ include "spark.fullname" . }}-redis:6379/0
{{- else -}}
{{- required "redis.external.url is required when redis.enabled is false" .Values.redis.external.url -}}
{{- end -}}
{{- end -}}

{{/* The bundled Redis' password: the one given, else the one already in the cluster, else a new one. */}}
{{- define "spark.redisPassword" -}}
{{- if .Values.redis.password -}}
{{- .Values.redis.password -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (printf "%s-redis" (include "spark.fullname" .)) -}}
{{- if and $existing $existing.data $existing.data.password -}}
{{- $existing.data.password | b64dec -}}
{{- else -}}
{{- randAlphaNum 32 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "spark.redisAddress" -}}
{{- if .Values.redis.enabled -}}
{{ include "spark.fullname" . }}-redis:6379
{{- else -}}
{{- required "redis.external.address is required when redis.enabled is false" .Values.redis.external.address -}}
{{- end -}}
{{- end -}}

{{/* The environment of web and worker pods: settings, secrets, Redis, metrics directory. */}}
{{- define "spark.env" -}}
envFrom:
  - secretRef:
      name: {{ include "spark.secretName" . }}
env:
  {{- if .Values.redis.enabled }}
  # Expanded into REDIS_URL below by Kubernetes ($(REDIS_PASSWORD)); Spark masks it in every output.
  - name: REDIS_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ include "spark.fullname" . }}-redis
        key: password
  {{- end }}
  - name: REDIS_URL
    value: {{ include "spark.redisUrl" . | quote }}
  - name: SPARK_DATA_DIR
    value: /data/.spark
  - name: PROMETHEUS_MULTIPROC_DIR
    value: /run/spark-metrics
  # The setup page then explains how to keep the App's credentials in a Secret of this release.
  - name: SPARK_HELM_RELEASE
    value: {{ .Release.Name | quote }}
  - name: SPARK_HELM_NAMESPACE
    value: {{ .Release.Namespace | quote }}
  {{- range $name, $value := .Values.config }}
  - name: {{ $name }}
    value: {{ $value | quote }}
  {{- end }}
{{- end -}}

{{- define "spark.volumes" -}}
volumes:
  # prometheus-client's multi-process files: fresh on every pod start, in memory.
  - name: metrics
    emptyDir: {medium: Memory}
  # Scratch only: the App's credentials come from the Secret (a first run's /setup writes here, and its page
  # says how to move them into the Secret before this volume goes with the pod).
  - name: data
    emptyDir: {}
  - name: tmp
    emptyDir: {}
{{- end -}}

{{- define "spark.volumeMounts" -}}
volumeMounts:
  - {name: metrics, mountPath: /run/spark-metrics}
  - {name: data, mountPath: /data}
  - {name: tmp, mountPath: /tmp}
{{- end -}}
