{{/* The name of every object: the release name, so a shadow release beside kvc never collides. */}}
{{- define "kvc.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The selector of kvc's pods (Deployment, Service, PDB, NetworkPolicy, spread). It never changes
between releases: a Deployment's selector is immutable. */}}
{{- define "kvc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvc.fullname" . }}
{{- end -}}

{{- define "kvc.labels" -}}
{{ include "kvc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "kvc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}

{{/* The ServiceAccount as an RBAC subject. */}}
{{- define "kvc.subject" -}}
- kind: ServiceAccount
  name: {{ include "kvc.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
