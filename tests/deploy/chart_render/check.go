package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	yaml "gopkg.in/yaml.v2"
)

// at follows a dotted path through maps; nil where it ends early.
func at(v interface{}, path string) interface{} {
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]interface{})
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

func text(v interface{}, path string) string {
	s, _ := at(v, path).(string)
	return s
}

func list(v interface{}, path string) []interface{} {
	l, _ := at(v, path).([]interface{})
	return l
}

var quantity = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$`)

// checkObjects: what the gpuguard chart must render, as a list of problems.
func checkObjects(objects []map[string]interface{}) []string {
	var problems []string
	problem := func(format string, args ...interface{}) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	byKind := map[string]map[string]interface{}{}
	for _, object := range objects {
		kind, name := text(object, "kind"), text(object, "metadata.name")
		if text(object, "apiVersion") == "" || kind == "" || name == "" {
			problem("an object without apiVersion, kind or metadata.name: %v", object)
			continue
		}
		if len(name) > 63 {
			problem("%s %s: a name over 63 characters", kind, name)
		}
		if text(object, "metadata.namespace") == "" {
			problem("%s %s: no metadata.namespace", kind, name)
		}
		if byKind[kind] != nil {
			problem("two objects of kind %s", kind)
		}
		byKind[kind] = object
	}
	for kind := range byKind {
		if kind != "DaemonSet" && kind != "ConfigMap" && kind != "ServiceAccount" {
			problem("an unexpected kind %s", kind)
		}
	}
	ds, cm := byKind["DaemonSet"], byKind["ConfigMap"]
	if ds == nil || cm == nil {
		return append(problems, "no DaemonSet or no ConfigMap")
	}
	if text(ds, "apiVersion") != "apps/v1" || text(cm, "apiVersion") != "v1" {
		problem("DaemonSet must be apps/v1 and ConfigMap v1")
	}
	data, _ := at(cm, "data").(map[string]interface{})
	for _, key := range []string{"gpuguard.yaml", "miner-rules.yaml"} {
		var parsed interface{}
		data, _ := data[key].(string) // a dotted key: not for at()
		if err := yaml.Unmarshal([]byte(data), &parsed); err != nil || parsed == nil {
			problem("ConfigMap data %s is not a YAML document: %v", key, err)
		}
	}

	template := at(ds, "spec.template")
	labels, _ := at(template, "metadata.labels").(map[string]interface{})
	selector, _ := at(ds, "spec.selector.matchLabels").(map[string]interface{})
	if len(selector) == 0 {
		problem("DaemonSet: an empty selector")
	}
	for k, v := range selector {
		if labels[k] != v {
			problem("DaemonSet: the selector's %s=%v is not on the pod template", k, v)
		}
	}
	spec := at(template, "spec")
	if at(spec, "hostPID") != true || at(spec, "hostNetwork") != true {
		problem("the pod must have hostPID and hostNetwork")
	}
	if text(spec, "priorityClassName") == "" {
		problem("the pod has no priorityClassName")
	}
	if sa := byKind["ServiceAccount"]; sa != nil {
		if text(spec, "serviceAccountName") != text(sa, "metadata.name") {
			problem("the pod's serviceAccountName is not the ServiceAccount")
		}
		if at(sa, "automountServiceAccountToken") != false {
			problem("the ServiceAccount mounts a token")
		}
	}
	if os.Getenv("CHART_CHECK_GPU_SCHEDULING") != "0" {
		tolerations := fmt.Sprint(list(spec, "tolerations"))
		if !strings.Contains(tolerations, "nvidia.com/gpu") || !strings.Contains(tolerations, "amd.com/gpu") {
			problem("the pod does not tolerate the GPU taints: %s", tolerations)
		}
		affinity := fmt.Sprint(at(spec, "affinity.nodeAffinity"))
		for _, label := range []string{"nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present", "amd.com/gpu"} {
			if !strings.Contains(affinity, label) {
				problem("the node affinity does not name %s", label)
			}
		}
	}
	volumes := map[string]interface{}{}
	for _, volume := range list(spec, "volumes") {
		volumes[text(volume, "name")] = volume
	}
	containers := list(spec, "containers")
	if len(containers) != 1 {
		return append(problems, fmt.Sprintf("the pod has %d containers, not 1", len(containers)))
	}
	c := containers[0]
	if text(c, "image") == "" || strings.HasSuffix(text(c, "image"), ":") {
		problem("the container has no image")
	}
	if at(c, "securityContext.privileged") != true {
		problem("the container is not privileged")
	}
	if text(c, "livenessProbe.httpGet.path") != "/metrics" {
		problem("the liveness probe is not on /metrics")
	}
	if _, ok := at(c, "livenessProbe.httpGet.port").(int); !ok {
		problem("the liveness probe's port is not a number")
	}
	for _, path := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		value := fmt.Sprint(at(c, "resources."+path))
		if !quantity.MatchString(value) {
			problem("resources.%s is %q, not a quantity", path, value)
		}
	}
	mounted := map[string]bool{}
	for _, mount := range list(c, "volumeMounts") {
		name := text(mount, "name")
		mounted[text(mount, "mountPath")] = true
		if volumes[name] == nil {
			problem("the mount %s has no volume", name)
		}
	}
	for _, path := range []string{"/etc/gpuguard", "/var/lib/gpuguard", "/sys/fs/cgroup", "/sys/fs/bpf", "/sys/kernel/btf", "/sys/kernel/tracing"} {
		if !mounted[path] {
			problem("nothing is mounted at %s", path)
		}
	}
	if text(volumes["config"], "configMap.name") != text(cm, "metadata.name") {
		problem("the config volume is not the ConfigMap")
	}
	return problems
}

// printPod prints the ConfigMap and the DaemonSet's pod template as a Pod:
// what `podman kube play` runs (it plays Pods and Deployments, not
// DaemonSets, in Debian 12's podman 4.3).
func printPod(objects []map[string]interface{}) {
	for _, object := range objects {
		switch text(object, "kind") {
		case "ConfigMap":
			fmt.Printf("---\n%s\n", toYAML(object))
		case "DaemonSet":
			template := at(object, "spec.template")
			metadata, _ := at(template, "metadata").(map[string]interface{})
			if metadata == nil {
				metadata = map[string]interface{}{}
			}
			metadata["name"] = text(object, "metadata.name")
			metadata["namespace"] = text(object, "metadata.namespace")
			pod := map[string]interface{}{
				"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": at(template, "spec"),
			}
			fmt.Printf("---\n%s\n", toYAML(pod))
		}
	}
}
