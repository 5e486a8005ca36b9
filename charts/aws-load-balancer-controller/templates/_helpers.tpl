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

{{/* Upstream's prefix of the webhook objects (aws-load-balancer-webhook, -webhook-service, -tls). */}}
{{- define "albc.namePrefix" -}}
aws-load-balancer
{{- end -}}

{{/* Where the webhook serving certificate is mounted (upstream's --webhook-cert-dir default). */}}
{{- define "albc.webhookCertDir" -}}
/tmp/k8s-webhook-server/serving-certs
{{- end -}}
