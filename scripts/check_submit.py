"""Checks what `mill submit --dry-run --out DIR` wrote against the engines' own schemas:
AWS Batch SubmitJob requests (*.json) against botocore's service model of Batch
(shapes, required members, types, lengths, enums), Kubernetes manifests (*.yaml)
against the Kubernetes OpenAPI schema (kubernetes-validate, strict: unknown fields are
errors). Usage: check_submit.py DIR... Prints a line per file; exits 1 on any error."""
import json
import pathlib
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


def main():
    model = botocore.session.get_session().get_service_model("batch")
    request = model.operation_model("SubmitJob").input_shape
    k8s_version = kubernetes_validate.latest_version()
    failed = 0
    files = sorted(f for d in sys.argv[1:] for f in pathlib.Path(d).iterdir() if f.is_file())
    for f in files:
        if f.suffix == ".json":
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
