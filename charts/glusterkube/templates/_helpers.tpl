{{/* The chart's name, or nameOverride. */}}
{{- define "glusterkube.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Names: everything is prefixed with the release's full name, so objects say what installed
them; fullnameOverride replaces it. */}}
{{- define "glusterkube.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "glusterkube.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The CSI driver name is compiled into gk-csi and the operator; it is not a value. */}}
{{- define "glusterkube.driverName" -}}gluster.glusterkube.dev{{- end -}}

{{- define "glusterkube.selectorLabels" -}}
app.kubernetes.io/name: {{ include "glusterkube.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "glusterkube.labels" -}}
{{ include "glusterkube.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: glusterkube
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* An image reference: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "glusterkube.image" -}}
{{- $img := index . 0 -}}{{- $root := index . 1 -}}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}

{{/* The mount pods' image: csi.mountPod.image, each part defaulting to the CSI image's. */}}
{{- define "glusterkube.mountImage" -}}
{{- $m := .Values.csi.mountPod.image -}}{{- $c := .Values.csi.image -}}
{{- printf "%s:%s" (default $c.repository $m.repository) (default (default .Chart.AppVersion $c.tag) $m.tag) -}}
{{- end -}}

{{/* The node plugin's directory under the kubelet's plugins directory: its socket and state. */}}
{{- define "glusterkube.pluginDir" -}}
{{- printf "%s/plugins/%s" .Values.csi.node.kubeletDir (include "glusterkube.driverName" .) -}}
{{- end -}}

{{- define "glusterkube.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /* The chart's imagePullSecrets as a comma-separated list of names, for the pods that
the operator and the node plugin make (brick pods, mount pods). */ -}}
{{- define "glusterkube.pullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}{{ $names = append $names .name }}{{ end }}
{{- join "," $names }}
{{- end -}}
