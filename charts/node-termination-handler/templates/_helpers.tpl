{{/* Name of the workload and its objects. */}}
{{- define "nth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nth.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "nth.fullname" .) -}}
{{- end -}}

{{- define "nth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/name: {{ include "nth.fullname" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "nth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nth.fullname" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: {{ if .Values.enableSqsTerminationDraining }}queue{{ else }}imds{{ end }}
{{- end -}}

{{- define "nth.image" -}}
{{- /* `make images` tags the image with the bare version (0.1.0, no "v"), as the chart's appVersion. */ -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Environment shared by both modes (upstream variable names). */}}
{{- define "nth.commonEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: ENABLE_PROBES_SERVER
  value: {{ or .Values.enableSqsTerminationDraining .Values.enableProbesServer | quote }}
- name: PROBES_SERVER_PORT
  value: {{ .Values.probes.httpGet.port | quote }}
- name: PROBES_SERVER_ENDPOINT
  value: {{ .Values.probes.httpGet.path | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: JSON_LOGGING
  value: {{ .Values.jsonLogging | quote }}
- name: LOG_FORMAT_VERSION
  value: {{ .Values.logFormatVersion | quote }}
- name: ENABLE_PROMETHEUS_SERVER
  value: {{ .Values.enablePrometheusServer | quote }}
- name: PROMETHEUS_SERVER_PORT
  value: {{ .Values.prometheusServerPort | quote }}
- name: DRY_RUN
  value: {{ .Values.dryRun | quote }}
- name: CORDON_ONLY
  value: {{ .Values.cordonOnly | quote }}
- name: TAINT_NODE
  value: {{ .Values.taintNode | quote }}
- name: ENABLE_OUT_OF_SERVICE_TAINT
  value: {{ .Values.enableOutOfServiceTaint | quote }}
- name: EXCLUDE_FROM_LOAD_BALANCERS
  value: {{ .Values.excludeFromLoadBalancers | quote }}
- name: DELETE_LOCAL_DATA
  value: {{ .Values.deleteLocalData | quote }}
- name: IGNORE_DAEMON_SETS
  value: {{ .Values.ignoreDaemonSets | quote }}
- name: POD_TERMINATION_GRACE_PERIOD
  value: {{ .Values.podTerminationGracePeriod | quote }}
- name: NODE_TERMINATION_GRACE_PERIOD
  value: {{ .Values.nodeTerminationGracePeriod | quote }}
- name: EMIT_KUBERNETES_EVENTS
  value: {{ .Values.emitKubernetesEvents | quote }}
{{- with .Values.kubernetesEventsExtraAnnotations }}
- name: KUBERNETES_EVENTS_EXTRA_ANNOTATIONS
  value: {{ . | quote }}
{{- end }}
{{- if or .Values.webhookURL .Values.webhookURLSecretName }}
- name: WEBHOOK_URL
{{- if .Values.webhookURLSecretName }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.webhookURLSecretName }}
      key: webhookurl
{{- else }}
  value: {{ .Values.webhookURL | quote }}
{{- end }}
{{- end }}
{{- with .Values.webhookHeaders }}
- name: WEBHOOK_HEADERS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.webhookProxy }}
- name: WEBHOOK_PROXY
  value: {{ . | quote }}
{{- end }}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: WEBHOOK_TEMPLATE_FILE
  value: {{ print "/config/" .Values.webhookTemplateConfigMapKey | quote }}
{{- else if .Values.webhookTemplate }}
- name: WEBHOOK_TEMPLATE
  value: {{ .Values.webhookTemplate | quote }}
{{- end }}
{{- end -}}

{{- define "nth.webhookVolumeMounts" -}}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: webhook-template
  mountPath: /config/
{{- end }}
{{- end -}}

{{- define "nth.webhookVolumes" -}}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: webhook-template
  configMap:
    name: {{ .Values.webhookTemplateConfigMapName }}
{{- end }}
{{- end -}}
