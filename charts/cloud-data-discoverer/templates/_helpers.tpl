{{/* Name of the workload and its objects. */}}
{{- define "cdd.fullname" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cdd.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "cdd.fullname" .) -}}
{{- end -}}

{{- define "cdd.labels" -}}
app.kubernetes.io/name: {{ include "cdd.fullname" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}
