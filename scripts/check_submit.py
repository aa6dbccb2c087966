"""Checks what `mill submit --dry-run --out DIR` wrote, and the scheduling examples in
jobs/examples, against the engines' own schemas: AWS Batch SubmitJob requests (*.json)
and RegisterJobDefinition requests (*.jobdef.json) against botocore's service model of
Batch, plus the limits the model does not hold (arrays of 2 to 10,000, 20 dependencies),
Kubernetes objects (*.k8s.json, a List each; *.yaml) against the Kubernetes OpenAPI
schema plus the enums and limits it misses (completionMode, restartPolicy, 100,000
indexes), EventBridge PutRule/PutTargets requests
(*.events.json) against botocore's model of EventBridge (shapes, required members,
types, lengths, enums), Kubernetes manifests (*.yaml) against the Kubernetes OpenAPI
schema (kubernetes-validate, strict: unknown fields are errors), crontab lines
(*.crontab: five fields in their ranges) and systemd units (*.timer, *.service: sections
and the keys a timer and a oneshot service need). Usage: check_submit.py DIR...
Prints a line per file; exits 1 on any error."""
import configparser
import json
import pathlib
import re
import sys

import botocore.session
import kubernetes_validate
import yaml
from botocore.validate import ParamValidator


def enum_errors(value, shape, path):
    """botocore's validator checks types and required members, not enums: walk them."""
    errors = []
    if shape.type_name == "structure" and isinstance(value, dict):
        for k, v in value.items():
            if k in shape.members:
                errors += enum_errors(v, shape.members[k], f"{path}.{k}")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, v in enumerate(value):
            errors += enum_errors(v, shape.member, f"{path}[{i}]")
    elif shape.type_name == "map" and isinstance(value, dict):
        for k, v in value.items():
            errors += enum_errors(v, shape.value, f"{path}.{k}")
    elif getattr(shape, "enum", None) and value not in shape.enum:
        errors.append(f"{path}: {value!r} is not one of {shape.enum}")
    return errors


def batch_limits(params):
    """What botocore's model of SubmitJob leaves out."""
    errors = []
    size = params.get("arrayProperties", {}).get("size")
    if size is not None and not 2 <= size <= 10000:
        errors.append(f"arrayProperties.size: {size} is not in 2..10000")
    if len(params.get("dependsOn", [])) > 20:
        errors.append(f"dependsOn: {len(params['dependsOn'])} jobs, at most 20")
    return errors


def k8s_semantics(doc):
    """What the OpenAPI schema leaves out, for the objects mill submit writes."""
    errors = []
    if doc.get("kind") == "Job":
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec", {})
        if spec.get("completionMode", "NonIndexed") not in ("NonIndexed", "Indexed"):
            errors.append(f"completionMode: {spec['completionMode']!r}")
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            errors.append(f"restartPolicy: {pod.get('restartPolicy')!r} (a Job's pods: Never or OnFailure)")
        if spec.get("completionMode") == "Indexed" and (
                spec.get("completions", 0) > 100000 or spec.get("parallelism", 0) > 100000):
            errors.append("an Indexed Job has at most 100,000 completions and parallelism")
        if "backoffLimitPerIndex" in spec and pod.get("restartPolicy") != "Never":
            errors.append("backoffLimitPerIndex needs restartPolicy Never")
        for c in pod.get("containers", []):
            res = c.get("resources", {})
            for k, v in res.get("limits", {}).items():
                if "/" in k and res.get("requests", {}).get(k, v) != v:
                    errors.append(f"{c['name']}: extended resource {k}: requests must equal limits")
    return errors


def k8s_errors(docs, version):
    errors = []
    for doc in docs:
        items = doc.get("items", []) if doc.get("kind") == "List" else [doc]
        for item in items:
            try:
                kubernetes_validate.validate(item, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                errors.append(f"{item.get('kind')} {'.'.join(str(p) for p in e.path)}: {e.message}")
            errors += k8s_semantics(item)
    return errors


CRON_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def cron_errors(text):
    """A crontab's job lines: five time fields (numbers, *, ranges, lists, steps) in
    range, then a command; comments, blank lines and VAR=value lines pass."""
    errors = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line):
            continue
        fields = line.split(None, 5)
        if len(fields) < 6:
            errors.append(f"line {n}: five time fields and a command expected")
            continue
        for field, (lo, hi) in zip(fields[:5], CRON_RANGES):
            for part in field.split(","):
                m = re.fullmatch(r"(\*|(\d+)(?:-(\d+))?)(?:/(\d+))?", part)
                nums = [int(x) for x in (m.groups()[1:] if m else []) if x is not None]
                if not m or any(x < lo or x > hi for x in nums[:2]) or (m.group(4) and int(m.group(4)) == 0):
                    errors.append(f"line {n}: {part!r} is not a cron field in {lo}-{hi}")
    return errors


def systemd_errors(path):
    """A unit file: parsable (no duplicate sections), with what its kind needs."""
    parser = configparser.ConfigParser(strict=True, interpolation=None, comment_prefixes=("#", ";"))
    parser.optionxform = str
    try:
        parser.read_string(path.read_text())
    except configparser.Error as e:
        return [str(e)]
    need = {".timer": {"Unit": ["Description"], "Timer": ["OnCalendar"], "Install": ["WantedBy"]},
            ".service": {"Unit": ["Description"], "Service": ["Type", "ExecStart"]}}[path.suffix]
    errors = [f"[{sec}] {key} missing" for sec, keys in need.items() for key in keys
              if not parser.has_option(sec, key)]
    if path.suffix == ".service" and parser.has_option("Service", "ExecStart") and \
            not parser.get("Service", "ExecStart").startswith("/"):
        errors.append("ExecStart must name its program by an absolute path")
    return errors


def main():
    model = botocore.session.get_session().get_service_model("batch")
    events = botocore.session.get_session().get_service_model("events")
    request = model.operation_model("SubmitJob").input_shape
    register = model.operation_model("RegisterJobDefinition").input_shape
    k8s_version = kubernetes_validate.latest_version()
    failed = 0
    files = sorted(f for d in sys.argv[1:] for f in pathlib.Path(d).iterdir() if f.is_file())
    for f in files:
        if f.name.endswith(".events.json"):
            params = json.loads(f.read_text())
            op = "PutTargets" if "Targets" in params else "PutRule"
            shape = events.operation_model(op).input_shape
            report = ParamValidator().validate(params, shape)
            errors = ([report.generate_report()] if report.has_errors() else []) + enum_errors(
                params, shape, op)
            what = f"EventBridge {op} (botocore {botocore.__version__})"
        elif f.suffix == ".crontab":
            errors = cron_errors(f.read_text())
            what = "crontab(5)"
        elif f.suffix in (".timer", ".service"):
            errors = systemd_errors(f)
            what = f"systemd {f.suffix[1:]} unit"
        elif f.name.endswith(".k8s.json"):
            errors = k8s_errors([json.loads(f.read_text())], k8s_version)
            what = f"Kubernetes {k8s_version} (strict)"
        elif f.name.endswith(".jobdef.json"):
            params = json.loads(f.read_text())
            report = ParamValidator().validate(params, register)
            errors = ([report.generate_report()] if report.has_errors() else []) + enum_errors(
                params, register, "RegisterJobDefinition")
            what = f"AWS Batch RegisterJobDefinition (botocore {botocore.__version__})"
        elif f.suffix == ".json":
            params = json.loads(f.read_text())
            report = ParamValidator().validate(params, request)
            errors = ([report.generate_report()] if report.has_errors() else []) + enum_errors(
                params, request, "SubmitJob") + batch_limits(params)
            what = f"AWS Batch SubmitJob (botocore {botocore.__version__})"
        elif f.suffix == ".yaml":
            errors = k8s_errors(list(yaml.safe_load_all(f.read_text())), k8s_version)
            what = f"Kubernetes {k8s_version} (strict)"
        else:
            continue
        failed += bool(errors)
        print(f"{'FAIL' if errors else 'ok  '} {f.name}: {what}")
        for e in errors:
            print(f"     {e}")
    if not files:
        print("no files to check")
        failed = 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
