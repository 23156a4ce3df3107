"""The checks of terraform/ (python-hcl2), and checkov over terraform/, k8s/ and the
Dockerfile."""

from __future__ import annotations

import json
import os
import re

from .common import CHECKOV_VENV, ROOT, CheckFailed, infra_python, require, run, tail


def check_terraform(ctx) -> str:
    tdir = ROOT / "terraform"
    files = sorted(tdir.glob("*.tf")) + sorted(tdir.glob("*.tfvars"))
    require(files, "no terraform files")
    parsed = json.loads(infra_python("hcl_json.py", *files).stdout)
    all_blocks: dict[str, list] = {}
    for f, doc in parsed.items():
        if f.endswith(".tfvars"):
            continue  # parsed (above) but holds values, not blocks
        for k, v in doc.items():
            all_blocks.setdefault(k, []).extend(v)
    text = "\n".join(f.read_text() for f in files if f.suffix == ".tf")

    # Provider pins.
    tf = all_blocks.get("terraform", [])
    provs = [p for t in tf for rp in t.get("required_providers", []) for p in [rp]]
    aws = next((p["aws"] for p in provs if "aws" in p), None)
    require(aws and aws.get("source") == "hashicorp/aws" and re.match(r"~> \d+\.\d+", aws.get("version", "")),
            "terraform: pin hashicorp/aws with a ~> MAJOR.MINOR constraint")
    require(any("required_version" in t for t in tf), "terraform: required_version missing")

    # Variables with validation.
    variables = {name: body for v in all_blocks.get("variable", []) for name, body in v.items()}
    for name in ("inbox_bucket", "lake_bucket", "lake_prefix", "inbox_prefix", "oidc_provider_arn",
                 "service_account_name", "service_account_namespace", "kms_key_arn"):
        require(name in variables and variables[name].get("validation"), f"terraform: variable {name} needs a validation")
    require("versioning" in variables, "terraform: versioning must be an input")

    # Resources per bucket (for_each over both buckets, or one per bucket).
    resources: dict[str, dict] = {}
    for r in all_blocks.get("resource", []):
        for rtype, named in r.items():
            for name, body in named.items():
                resources[f"{rtype}.{name}"] = body
    for rtype in ("aws_s3_bucket_public_access_block", "aws_s3_bucket_ownership_controls",
                  "aws_s3_bucket_server_side_encryption_configuration", "aws_s3_bucket_versioning",
                  "aws_s3_bucket_policy"):
        body = next((b for k, b in resources.items() if k.startswith(rtype + ".")), None)
        require(body is not None and "aws_s3_bucket.this" in json.dumps(body.get("for_each", "")),
                f"terraform: {rtype} must cover both buckets (for_each over aws_s3_bucket.this)")
    pab = next(b for k, b in resources.items() if k.startswith("aws_s3_bucket_public_access_block."))
    require(all(pab.get(k) is True for k in ("block_public_acls", "block_public_policy", "ignore_public_acls",
                                             "restrict_public_buckets")), "terraform: public access not fully blocked")
    require('"BucketOwnerEnforced"' in text, "terraform: ownership must be BucketOwnerEnforced")
    require("policies/tls-only.json" in text, "terraform: TLS-only bucket policy missing")
    tls = json.loads((tdir / "policies" / "tls-only.json").read_text())
    require(any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
                for s in tls["Statement"]), "tls-only.json must deny aws:SecureTransport false")

    # Lifecycle: both buckets; abort after 1 day; staging after 7; runs/quarantine optional.
    lc = {k: b for k, b in resources.items() if k.startswith("aws_s3_bucket_lifecycle_configuration.")}
    covered = {re.search(r'this\[\\?"(\w+)\\?"\]', json.dumps(b["bucket"])).group(1) for b in lc.values()}
    require(covered == {"inbox", "lake"}, f"terraform: lifecycle configurations cover {covered}, need inbox and lake")
    for k, b in lc.items():
        rules = b["rule"]
        require(any(r.get("abort_incomplete_multipart_upload", [{}])[0].get("days_after_initiation") == 1
                    and r.get("status") == "Enabled" for r in rules), f"{k}: abort incomplete uploads after 1 day")
    lake_rules = {r["id"]: r for r in lc["aws_s3_bucket_lifecycle_configuration.lake"]["rule"]}
    st = lake_rules.get("expire-staging")
    require(st and st["status"] == "Enabled" and st["expiration"][0]["days"] == 7
            and "/staging/" in json.dumps(st["filter"]), "lake lifecycle: expire staging/ after 7 days")
    for rid, var in (("expire-runs", "expire_runs_days"), ("expire-quarantine", "expire_quarantine_days")):
        require(rid in lake_rules and var in json.dumps(lake_rules[rid]), f"lake lifecycle: optional {rid} from var.{var}")

    # templatefile(): every policy file used, and the placeholders each file uses
    # are exactly plain ${name} (what scripts/test-infra renders) and all passed.
    tf_text = text
    for pf in sorted((tdir / "policies").glob("*.json")):
        body = pf.read_text()
        json.loads(body)
        require(f"policies/{pf.name}" in tf_text, f"terraform never loads policies/{pf.name}")
        require("%{" not in body and not re.search(r"\$\{[^}]*[^a-z_}][^}]*\}", body),
                f"policies/{pf.name}: only plain ${{name}} placeholders (no expressions or directives)")
    locals_ = {n: b for blk in all_blocks.get("locals", []) for n, b in blk.items()}
    pv = set(locals_["policy_vars"].keys())
    for name in ("job.json", "reader.json"):
        used = set(re.findall(r"\$\{([a-z_]+)\}", (tdir / "policies" / name).read_text()))
        require(used <= pv, f"policies/{name} uses {used - pv}, not passed by local.policy_vars")

    outputs = {n for o in all_blocks.get("output", []) for n in o}
    for o in ("job_role_arn", "reader_policy_arn", "inbox_bucket", "lake_bucket"):
        require(o in outputs, f"terraform: output {o} missing")
    return f"{len(files)} files parsed by python-hcl2; pins, validations, bucket controls, lifecycle and templates checked"



def check_checkov(ctx) -> str:
    ck = CHECKOV_VENV / "bin" / "checkov"
    results = []
    for target in (["-d", ROOT / "terraform"], ["-d", ROOT / "k8s"], ["-f", ROOT / "Dockerfile"]):
        # --skip-download: no network (no policy download, no guideline look-up).
        p = run([ck, *target, "-o", "json", "--compact", "--skip-download"], check=False,
                env={**os.environ, "BC_SKIP_MAPPING": "TRUE"}, timeout=900)
        out = p.stdout[p.stdout.find("[") if p.stdout.lstrip().startswith("[") else p.stdout.find("{"):]
        try:
            reports = json.loads(out)
        except json.JSONDecodeError:
            raise CheckFailed(f"checkov {target[1]}: exit {p.returncode}, output is not JSON:\n{tail(p.stdout + p.stderr)}")
        reports = reports if isinstance(reports, list) else [reports]
        for rep in reports:
            if "results" not in rep:  # an empty report: {"passed": 0, "failed": 0, ...}
                continue
            res = rep["results"]
            failed = res.get("failed_checks", [])
            require(not failed, f"checkov {target[1].name} ({rep.get('check_type')}): " + "; ".join(
                f"{f['check_id']} {f['resource']} {f['file_path']}" for f in failed))
            for s in res.get("skipped_checks", []):
                reason = (s.get("check_result") or {}).get("suppress_comment", "")
                require(len(reason.strip()) >= 20, f"checkov skip {s['check_id']} in {s['file_path']} has no reason")
            summ = rep.get("summary", {})
            require(summ.get("failed") == 0 and summ.get("parsing_errors", 0) == 0,
                    f"checkov {target[1].name}: summary {summ}")
            results.append(f"{target[1].name}/{rep.get('check_type')}: {summ.get('passed')} passed, "
                           f"0 failed, {summ.get('skipped')} skipped with reasons")
        require(p.returncode == 0, f"checkov {target[1]} exited {p.returncode}:\n{tail(p.stderr)}")
    return "; ".join(results)

