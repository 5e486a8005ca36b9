{{- define "cinder.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- define "cinder.labels" -}}
app.kubernetes.io/name: cinder-csi-plugin
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- /* Port and probes of a sidecar serving `path` on `port` (--http-endpoint): dict "name" "port" "path". */ -}}
{{- define "cinder.sidecarHealth" -}}
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


{{- /* A Stratus sidecar image: dict "image" (repository, tag) "root" $; the tag defaults to the chart's appVersion, as the driver's does. */ -}}
{{- define "cinder.sidecarImage" -}}
{{ .image.repository }}:{{ default .root.Chart.AppVersion .image.tag }}
{{- end -}}

{{- /* The liveness-probe container: it answers the driver container's liveness probe (/healthz on the port named healthz) by calling Identity.Probe over the driver's socket. dict "root" $ "socketDir" (where the socket's volume is mounted, ending in /) "volume" (that volume) "securityContext" (the container's). */ -}}
{{- define "cinder.livenessProbeSidecar" -}}
{{- $lp := .root.Values.sidecars.livenessProbe -}}
- name: liveness-probe
  image: {{ include "cinder.sidecarImage" (dict "image" $lp.image "root" .root) }}
  imagePullPolicy: {{ $lp.image.pullPolicy }}
  args:
    - --csi-address={{ .socketDir }}csi.sock
    - --http-endpoint=:{{ $lp.httpPort }}
    - --v={{ $lp.logLevel }}
  volumeMounts:
    - name: {{ .volume }}
      mountPath: {{ .socketDir }}
  # Its own probes ask /metrics, which answers while its server runs: /healthz reflects the
  # driver, and a driver fault must restart the driver, not this container.
  livenessProbe:
    httpGet:
      path: /metrics
      port: {{ $lp.httpPort }}
    initialDelaySeconds: 10
    periodSeconds: 20
    timeoutSeconds: 5
  readinessProbe:
    httpGet:
      path: /metrics
      port: {{ $lp.httpPort }}
    periodSeconds: 10
    timeoutSeconds: 5
  resources:
    {{- toYaml $lp.resources | nindent 4 }}
  securityContext:
    {{- toYaml .securityContext | nindent 4 }}
{{- end -}}
