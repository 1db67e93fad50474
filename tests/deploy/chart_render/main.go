// chart_render renders a Helm chart's templates without Helm or a cluster
// (helm is not packaged in Debian 12): text/template with sprig's functions
// and Helm's own (include, tpl, required, toYaml, fromYaml, lookup), the
// chart's values.yaml merged with -f files and --set values, and
// .Release/.Chart/.Capabilities as `helm template` gives them. With
// -check it also checks the output is the Kubernetes objects the gpuguard
// chart must make (docs/deployment.md#the-helm-chart); with -pod it prints
// the DaemonSet's pod template as a Pod, with the ConfigMap, for
// `podman kube play`.
//
// Differences from Helm: no subcharts, no schema, no hooks, no .Files;
// objects come out in template file order, not Helm's kind order.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart_render: "+format+"\n", args...)
	os.Exit(1)
}

// normalise turns yaml.v2's map[interface{}]interface{} into
// map[string]interface{} all the way down, as Helm's values are.
func normalise(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		out := map[string]interface{}{}
		for k, e := range t {
			out[fmt.Sprint(k)] = normalise(e)
		}
		return out
	case map[string]interface{}:
		for k, e := range t {
			t[k] = normalise(e)
		}
		return t
	case []interface{}:
		for i, e := range t {
			t[i] = normalise(e)
		}
		return t
	}
	return v
}

func readYAML(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	var v interface{}
	if err := yaml.Unmarshal(data, &v); err != nil {
		die("%s: %v", path, err)
	}
	if v == nil {
		return map[string]interface{}{}
	}
	m, ok := normalise(v).(map[string]interface{})
	if !ok {
		die("%s: not a mapping", path)
	}
	return m
}

// merge puts over onto base: maps merge key by key, anything else replaces
// (a null removes the key), as Helm merges values files.
func merge(base, over map[string]interface{}) map[string]interface{} {
	for k, v := range over {
		if v == nil {
			delete(base, k)
			continue
		}
		if vm, ok := v.(map[string]interface{}); ok {
			if bm, ok := base[k].(map[string]interface{}); ok {
				base[k] = merge(bm, vm)
				continue
			}
		}
		base[k] = v
	}
	return base
}

// setValue applies one --set a.b.c=value: true/false, null and integers
// are typed, as Helm's strvals types them; anything else is a string.
func setValue(values map[string]interface{}, assignment string) {
	eq := strings.IndexByte(assignment, '=')
	if eq < 0 {
		die("--set %q: no '='", assignment)
	}
	keys := strings.Split(assignment[:eq], ".")
	raw := assignment[eq+1:]
	var value interface{} = raw
	switch {
	case raw == "true" || raw == "false":
		value = raw == "true"
	case raw == "null":
		value = nil
	default:
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			value = n
		}
	}
	m := values
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = value
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// render returns each template's output by file name (partials, named
// _*, and NOTES.txt make none).
func render(chartDir string, values map[string]interface{}, release map[string]interface{}) ([]string, map[string]string) {
	meta := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	chart := map[string]interface{}{}
	for k, v := range meta { // Helm's chart.Metadata: Name, Version, AppVersion, ...
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	if v, ok := meta["appVersion"]; ok {
		chart["AppVersion"] = fmt.Sprint(v)
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		die("%v", err)
	}
	sort.Strings(files)
	root := template.New("gotpl").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env") // Helm leaves out what reads the renderer's host
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		var v interface{}
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			return map[string]interface{}{"Error": err.Error()}
		}
		m, _ := normalise(v).(map[string]interface{})
		return m
	}
	funcs["required"] = func(warning string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, fmt.Errorf(warning)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, fmt.Errorf(warning)
		}
		return v, nil
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil // no cluster, as `helm template`
	}
	funcs["include"] = func(string, interface{}) (string, error) { return "", nil }
	funcs["tpl"] = func(string, interface{}) (string, error) { return "", nil }
	root.Funcs(funcs)
	// include and tpl need the parsed set itself.
	root.Funcs(template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		"tpl": func(text string, data interface{}) (string, error) {
			clone, err := root.Clone()
			if err != nil {
				return "", err
			}
			t, err := clone.New("tpl").Parse(text)
			if err != nil {
				return "", err
			}
			var buf bytes.Buffer
			err = t.Execute(&buf, data)
			return strings.ReplaceAll(buf.String(), "<no value>", ""), err
		},
	})
	var names []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			die("%v", err)
		}
		name := filepath.Join(fmt.Sprint(meta["name"]), "templates", filepath.Base(file))
		if _, err := root.New(name).Parse(string(data)); err != nil {
			die("%v", err)
		}
		base := filepath.Base(file)
		if !strings.HasPrefix(base, "_") && base != "NOTES.txt" {
			names = append(names, name)
		}
	}
	out := map[string]string{}
	for _, name := range names {
		data := map[string]interface{}{
			"Values":  values,
			"Release": release,
			"Chart":   chart,
			"Capabilities": map[string]interface{}{
				"KubeVersion": map[string]interface{}{"Version": "v1.28.0", "Major": "1", "Minor": "28"},
			},
			"Template": map[string]interface{}{"Name": name, "BasePath": filepath.Dir(name)},
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			die("%v", err)
		}
		out[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return names, out
}

func main() {
	chartDir := flag.String("chart", "", "the chart's directory")
	releaseName := flag.String("name", "gpuguard", "the release name")
	namespace := flag.String("namespace", "gpuguard", "the release namespace")
	check := flag.Bool("check", false, "check the objects (the gpuguard chart's)")
	pod := flag.Bool("pod", false, "print the DaemonSet's pod as a Pod, and the ConfigMap")
	var valueFiles, sets listFlag
	flag.Var(&valueFiles, "f", "a values file merged over values.yaml (repeatable)")
	flag.Var(&sets, "set", "a.b=value over the values (repeatable)")
	flag.Parse()
	if *chartDir == "" {
		die("-chart DIR is required")
	}
	values := readYAML(filepath.Join(*chartDir, "values.yaml"))
	for _, f := range valueFiles {
		values = merge(values, readYAML(f))
	}
	for _, s := range sets {
		setValue(values, s)
	}
	release := map[string]interface{}{
		"Name": *releaseName, "Namespace": *namespace, "Service": "Helm",
		"IsInstall": true, "IsUpgrade": false, "Revision": 1,
	}
	names, rendered := render(*chartDir, values, release)

	var objects []map[string]interface{}
	var text strings.Builder
	for _, name := range names {
		body := rendered[name]
		if strings.TrimSpace(body) == "" {
			continue
		}
		fmt.Fprintf(&text, "---\n# Source: %s\n%s", name, strings.TrimLeft(body, "\n"))
		if !strings.HasSuffix(body, "\n") {
			text.WriteString("\n")
		}
		decoder := yaml.NewDecoder(strings.NewReader(body))
		for {
			var v interface{}
			if err := decoder.Decode(&v); err != nil {
				if err.Error() == "EOF" {
					break
				}
				die("%s: the output is not YAML: %v\n%s", name, err, body)
			}
			if v == nil {
				continue
			}
			object, ok := normalise(v).(map[string]interface{})
			if !ok {
				die("%s: a document that is not a mapping", name)
			}
			objects = append(objects, object)
		}
	}
	if *check {
		if problems := checkObjects(objects); len(problems) > 0 {
			die("the rendered chart:\n  %s", strings.Join(problems, "\n  "))
		}
	}
	if *pod {
		printPod(objects)
		return
	}
	fmt.Print(text.String())
}
