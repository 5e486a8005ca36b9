{{/* Name of the workload and its objects. */}}
{{- define "mc.fullname" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mc.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "mc.fullname" .) -}}
{{- end -}}

{{- define "mc.labels" -}}
app.kubernetes.io/name: {{ include "mc.fullname" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}
