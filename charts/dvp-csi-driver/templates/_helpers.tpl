{{- define "dvp.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- define "dvp.labels" -}}
app.kubernetes.io/name: dvp-csi-driver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- /* Port and probes of a sidecar serving `path` on `port` (--http-endpoint): dict "name" "port" "path". */ -}}
{{- define "dvp.sidecarHealth" -}}
ports:
  - name: {{ .name }}
    containerPort: {{ .port }}
livenessProbe:
  httpGet:
    path: {{ .path }}
    port: {{ .name }}
  initialDelaySeconds: 10
  periodSeconds: 20
  timeoutSeconds: 5
readinessProbe:
  httpGet:
    path: {{ .path }}
    port: {{ .name }}
  periodSeconds: 10
  timeoutSeconds: 5
{{- end -}}
