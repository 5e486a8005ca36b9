{{/* Name of the DaemonSet, its pods and the cloud-config object. */}}
{{- define "ccm.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The ServiceAccount the CCM runs as (upstream's serviceAccountName wins when set). */}}
{{- define "ccm.serviceAccountName" -}}
{{- .Values.serviceAccountName | default .Values.serviceAccount.name -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "ccm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/name: {{ include "ccm.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/* Pod selector labels (immutable once installed). */}}
{{- define "ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ccm.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{/* The subject every binding grants to. */}}
{{- define "ccm.subject" -}}
- kind: ServiceAccount
  name: {{ include "ccm.serviceAccountName" . | quote }}
  namespace: {{ .Values.namespace | quote }}
{{- end -}}

{{/* The cloud config file the container reads. */}}
{{- define "ccm.cloudConfigFile" -}}
{{- printf "%s/cloud.conf" (.Values.cloudConfig.mountPath | trimSuffix "/") -}}
{{- end -}}

{{/* The node selector: the user's, or control-plane nodes when none is given. */}}
{{- define "ccm.nodeSelector" -}}
{{- toYaml (.Values.nodeSelector | default (dict "node-role.kubernetes.io/control-plane" "")) -}}
{{- end -}}
