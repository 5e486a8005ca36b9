{{/* Name of the workload and its objects. */}}
{{- define "albc.fullname" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "albc.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "albc.fullname" .) -}}
{{- end -}}

{{- define "albc.labels" -}}
app.kubernetes.io/name: {{ include "albc.fullname" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}
