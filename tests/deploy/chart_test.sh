#!/usr/bin/env bash
# The Helm chart (deploy/helm/gpuguard) rendered without a cluster or helm
# (tests/deploy/chart_render: text/template, sprig and Helm's functions):
#  - with the documented values it makes a DaemonSet, a ConfigMap and a
#    ServiceAccount that pass chart_render -check (GPU tolerations and node
#    affinity, priority class, resources, liveness on /metrics, host
#    namespaces, every mount a volume, no API token);
#  - that output is deploy/kubernetes/gpuguard.yaml, byte for byte (the
#    plain manifests are the chart's, regenerated with
#    `bash tests/deploy/chart_test.sh --build DIR --write`);
#  - the ConfigMap's gpuguard.yaml and miner-rules.yaml pass the agent's own
#    `config check` and `rules check`, and correlationRules' correlation.yaml,
#    loaded by the config, `rules check --correlation`;
#  - other documented values render too (no ServiceAccount, extra
#    arguments, labels, a nodeSelector instead of the affinity), and the
#    chart refuses an empty image.repository, a probe port that is not the
#    agent's metrics port, and /metrics switched off.
#
#   bash tests/deploy/chart_test.sh --build DIR [--write]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log_prefix="deploy.chart"
source "$repo/tests/deploy/lib.sh"

build="$repo/build"
write=0
while (($#)); do
    case "$1" in
        --build) build="$2"; shift 2 ;;
        --write) write=1; shift ;;
        *) fail "unknown argument $1 (--build DIR, --write)" ;;
    esac
done
command -v go >/dev/null || skip_or_fail "go is missing (bash scripts/install-deps.sh test)"
[[ -d /usr/share/gocode/src/github.com/Masterminds/sprig ]] ||
    skip_or_fail "sprig's sources are missing (golang-github-masterminds-sprig-dev)"
started=$SECONDS
chart="$repo/deploy/helm/gpuguard"
manifests="$repo/deploy/kubernetes/gpuguard.yaml"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

renderer="$(bash "$repo/tests/deploy/build_chart_render.sh" "$build")" || fail "chart_render was not built"
render() { "$renderer" -chart "$chart" -name gpuguard -namespace gpuguard "$@"; }

# The documented values.
header="# gpuguard's Kubernetes objects: the Helm chart deploy/helm/gpuguard rendered
# with its documented values (release gpuguard, namespace gpuguard). Made by
# bash tests/deploy/chart_test.sh --write; do not edit (edit the chart).
# kubectl create namespace gpuguard && kubectl apply -f gpuguard.yaml"
render -check >"$scratch/rendered.yaml" || fail "the documented values do not render and check"
{ echo "$header"; cat "$scratch/rendered.yaml"; } >"$scratch/manifests.yaml"
if ((write)); then
    mkdir -p "$(dirname "$manifests")"
    cp "$scratch/manifests.yaml" "$manifests"
    log "wrote $manifests"
fi
diff -u "$manifests" "$scratch/manifests.yaml" >&2 ||
    fail "deploy/kubernetes/gpuguard.yaml is not the chart's output (rerun with --write)"

# The ConfigMap's files KEY... of the rendered FILE, written into DIR.
extract_configmap() {
    python3 - "$@" <<'EOF'
import sys
# The documents are plain; the ConfigMap's data are literal blocks at a
# 4-space indent: cut them out without a YAML library.
text = open(sys.argv[1]).read()
for doc in text.split("\n---\n"):
    if "\nkind: ConfigMap\n" not in doc:
        continue
    for key in sys.argv[3:]:
        lines, inside = [], False
        for line in doc.split("\n"):
            if line == f"  {key}: |":
                inside = True
                continue
            if inside and line.startswith("    "):
                lines.append(line[4:])
            elif inside:
                break
        assert lines, key
        open(f"{sys.argv[2]}/{key}", "w").write("\n".join(lines) + "\n")
EOF
}

# The ConfigMap's files, checked by the agent itself.
extract_configmap "$scratch/rendered.yaml" "$scratch" gpuguard.yaml miner-rules.yaml ||
    fail "no ConfigMap data in the output"
if [[ -x $build/agent/gpuguard ]]; then
    "$build/agent/gpuguard" config check "$scratch/gpuguard.yaml" >&2 ||
        fail "the ConfigMap's gpuguard.yaml fails gpuguard config check"
    "$build/agent/gpuguard" rules check "$scratch/miner-rules.yaml" >&2 ||
        fail "the ConfigMap's miner-rules.yaml fails gpuguard rules check"
else
    fail "$build/agent/gpuguard is missing: build the agent first"
fi

# Other documented values.
cat >"$scratch/other.yaml" <<'EOF'
image: {repository: registry.example/security/gpuguard, tag: "0.1.0-1"}
serviceAccount: {create: false}
nodeAffinity: null
nodeSelector: {gpu: "true"}
extraArgs: [--log-level, debug]
podLabels: {team: security}
minerRules:
  process_name: "miner*"
  default_action: kill
correlationRules:
  rules:
    - id: GG-CORR-0034
      override: {scope: {not_pod_namespaces: [monitoring]}}
EOF
CHART_CHECK_GPU_SCHEDULING=0 render -check -f "$scratch/other.yaml" >"$scratch/other-rendered.yaml" ||
    fail "the other documented values do not render and check"
grep -q 'kind: ServiceAccount' "$scratch/other-rendered.yaml" && fail "serviceAccount.create: false made one"
for expected in 'image: registry.example/security/gpuguard:0.1.0-1' '- "--log-level"' 'team: security' \
    'serviceAccountName: default' 'gpu: "true"'; do
    grep -qF -- "$expected" "$scratch/other-rendered.yaml" || fail "no '$expected' in the output"
done
grep -q "nodeAffinity" "$scratch/other-rendered.yaml" && fail "nodeAffinity: null left an affinity"
# correlationRules: a correlation.yaml beside the config, which loads it,
# and both pass the agent's checks.
mkdir "$scratch/other"
extract_configmap "$scratch/other-rendered.yaml" "$scratch/other" gpuguard.yaml correlation.yaml ||
    fail "correlationRules made no correlation.yaml in the ConfigMap"
grep -qF 'correlation_files:' "$scratch/other/gpuguard.yaml" &&
    grep -qF -- '- /etc/gpuguard/correlation.yaml' "$scratch/other/gpuguard.yaml" ||
    fail "correlationRules did not set rules.correlation_files: $(cat "$scratch/other/gpuguard.yaml")"
grep -qF 'main_file: /etc/gpuguard/miner-rules.yaml' "$scratch/other/gpuguard.yaml" ||
    fail "correlationRules lost the other rules keys"
"$build/agent/gpuguard" rules check --correlation "$scratch/other/correlation.yaml" >&2 ||
    fail "the ConfigMap's correlation.yaml fails gpuguard rules check --correlation"
grep -q 'correlation' "$scratch/rendered.yaml" && fail "the documented values made correlation rules"

# Refusals, each with its message.
if render --set image.repository= >/dev/null 2>"$scratch/err"; then fail "an empty image.repository rendered"; fi
grep -q 'image.repository is required' "$scratch/err" || fail "no message for image.repository: $(cat "$scratch/err")"
if render --set metrics.port=9000 >/dev/null 2>"$scratch/err"; then fail "a probe port off the agent's rendered"; fi
grep -q 'config.metrics.port must equal metrics.port' "$scratch/err" || fail "no message for the port: $(cat "$scratch/err")"
if render --set config.metrics.enabled=false >/dev/null 2>"$scratch/err"; then fail "metrics off rendered"; fi
grep -q 'config.metrics.enabled must be true' "$scratch/err" || fail "no message for metrics off: $(cat "$scratch/err")"
# The checks catch what they check: values that break the pod's promises.
if render -check --set priorityClassName= >/dev/null 2>"$scratch/err"; then fail "-check passed no priority class"; fi
grep -q 'no priorityClassName' "$scratch/err" || fail "-check: $(cat "$scratch/err")"
if render -check --set tolerations=null >/dev/null 2>"$scratch/err"; then fail "-check passed no tolerations"; fi
grep -q 'does not tolerate the GPU taints' "$scratch/err" || fail "-check: $(cat "$scratch/err")"
if render -check --set resources.limits.memory=lots >/dev/null 2>"$scratch/err"; then fail "-check passed a bad quantity"; fi
grep -q 'resources.limits.memory is "lots", not a quantity' "$scratch/err" || fail "-check: $(cat "$scratch/err")"
log "PASS in $((SECONDS - started)) s"
