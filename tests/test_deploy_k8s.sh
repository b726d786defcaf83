#!/usr/bin/env bash
# deploy/k8s/ linted, not run: yamllint (its default rules), every core object against the
# Kubernetes OpenAPI schemas kubernetes-validate ships (strict: an unknown field fails), the
# InferencePool against deploy/k8s/schema/inferencepool-v1.json; and the metric names the
# endpoint picker is pointed at are ones lumen exports (docs/server.md's table).
# LM_TEST_LABELS: unit
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="$ROOT/.venv/bin/python"
"$PY" -c 'import yamllint, kubernetes_validate, jsonschema' 2>/dev/null ||
    { echo "FAIL: yamllint / kubernetes-validate missing from .venv (bash scripts/setup.sh)" >&2; exit 1; }
cd "$ROOT" || exit 1
"$PY" -m yamllint -s -d '{extends: default, rules: {line-length: {max: 110}}}' deploy/k8s/ || exit 1
exec "$PY" - <<'PY'
import json, re, sys
import jsonschema, kubernetes_validate, yaml

K8S = "1.33.0"  # a release the package ships schemas for; the objects used are stable across
fails = 0
docs = [d for d in yaml.safe_load_all(open("deploy/k8s/lumen.yaml")) if d]
schema = json.load(open("deploy/k8s/schema/inferencepool-v1.json"))
for d in docs:
    what = "%s/%s" % (d.get("kind"), d.get("metadata", {}).get("name"))
    try:
        if d.get("kind") == "InferencePool":
            jsonschema.validate(d, schema)
        else:
            kubernetes_validate.validate(d, K8S, strict=True)
        print("ok   %s" % what)
    except (jsonschema.ValidationError, kubernetes_validate.ValidationError,
            kubernetes_validate.SchemaNotFoundError) as e:
        fails += 1
        print("FAIL %s: %s" % (what, str(e).splitlines()[0]))
kinds = sorted(d["kind"] for d in docs)
if kinds != ["Deployment", "Deployment", "InferencePool", "Service"]:
    fails += 1
    print("FAIL: expected 2 Deployments, an InferencePool and a Service, got %s" % kinds)
documented = set(re.findall(r"^\| `(lumen_[a-z_]+)`", open("docs/server.md").read(), re.M))
named = set(re.findall(r"-metric=(\S+)", open("deploy/k8s/lumen.yaml").read()))
if not named or not named <= documented:
    fails += 1
    print("FAIL: the picker's metric names %s are not all lumen's %s" % (sorted(named), sorted(documented)))
print("%d passed, %d failed" % (len(docs) + 2 - fails, fails))
sys.exit(1 if fails else 0)
PY
