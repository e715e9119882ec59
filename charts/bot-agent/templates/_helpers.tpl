{{- define "bot-agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "bot-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bot-agent.labels" -}}
{{ include "bot-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "bot-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bot-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* How many agents run: replicaCount, else 2 with a database and 1 without. */ -}}
{{- define "bot-agent.replicas" -}}
{{- if kindIs "invalid" .Values.replicaCount -}}
{{- if .Values.database.existingSecret }}2{{ else }}1{{ end -}}
{{- else -}}
{{- .Values.replicaCount -}}
{{- end -}}
{{- end -}}

{{- /* Whether history lives in a PersistentVolumeClaim (no database, persistence on). */ -}}
{{- define "bot-agent.claimed" -}}
{{- if and .Values.persistence.enabled (not .Values.database.existingSecret) }}true{{ end -}}
{{- end -}}

{{- /*
The preStop pause: the old pod keeps answering while the Service sends calls to the other pods.
Under Recreate (one pod and its claim) there are none, so it is kept short (at most 2 s): a pod
deleted is replaced at once, and the old one answers while the new one starts. That the Service
lets the old address go before it vanishes is the agent's own doing, on SIGTERM (docs/api.md §7).
*/ -}}
{{- define "bot-agent.preStopSeconds" -}}
{{- if include "bot-agent.claimed" . }}{{ min (.Values.preStopSeconds | int) 2 }}{{ else }}{{ .Values.preStopSeconds | int }}{{ end -}}
{{- end -}}
