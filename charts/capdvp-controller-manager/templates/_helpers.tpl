{{- define "capdvp.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- define "capdvp.labels" -}}
app.kubernetes.io/name: capdvp-controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
cluster.x-k8s.io/provider: infrastructure-dvp
{{- end -}}
{{- define "capdvp.webhookCertDir" -}}
/tmp/k8s-webhook-server/serving-certs
{{- end -}}
{{- define "capdvp.webhookSecret" -}}
{{ default "capdvp-webhook-tls" .Values.webhook.tlsSecret }}
{{- end -}}
