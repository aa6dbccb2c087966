"""Checks what `mill submit --dry-run --out DIR` wrote, and the scheduling examples in
jobs/examples, against the engines' own schemas: AWS Batch SubmitJob requests (*.json)
against botocore's service model of Batch, EventBridge PutRule/PutTargets requests
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
        elif f.suffix == ".json":
            params = json.loads(f.read_text())
            report = ParamValidator().validate(params, request)
            errors = ([report.generate_report()] if report.has_errors() else []) + enum_errors(
                params, request, "SubmitJob")
            what = f"AWS Batch SubmitJob (botocore {botocore.__version__})"
        elif f.suffix == ".yaml":
            errors = []
            for doc in yaml.safe_load_all(f.read_text()):
                try:
                    kubernetes_validate.validate(doc, k8s_version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    errors.append(f"{'.'.join(str(p) for p in e.path)}: {e.message}")
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
