"""The IAM policies of terraform/policies/: rendered as terraform would, linted by
parliament, and enforced by moto against the real binary (programs/iam_scenario.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from .. import pins
from .common import CACHE, ROOT, infra_python, require, tail

# Parliament findings accepted, each with its reason: (policy file, issue) -> why.
PARLIAMENT_ACCEPTED = {
    ("job-trust.json", "UNKNOWN_FEDERATION_SOURCE"): (
        "parliament 1.6.4 knows SAML providers and a fixed list of web identity "
        "providers, not IAM OIDC provider ARNs, which IRSA trust policies must name"
    ),
    ("job-trust.json", "MALFORMED"): (
        "a role trust policy has no Resource by definition; parliament lints every "
        "document as an identity policy"
    ),
}


def render(template: str, values: dict[str, str]) -> str:
    """terraform templatefile() for templates made of plain ${name} placeholders
    (check_terraform enforces that): the same substitution, and an unknown name
    fails as it would in terraform."""

    def sub(m):
        require(m.group(1) in values, f"template placeholder ${{{m.group(1)}}} has no value")
        return values[m.group(1)]

    return re.sub(r"\$\{([a-z_]+)\}", sub, template)


def policy_values(inbox: str, lake: str, lake_prefix: str = "lake", inbox_prefix: str = "inbox") -> dict[str, str]:
    return {
        "partition": "aws",
        "inbox_bucket": inbox,
        "inbox_prefix": inbox_prefix,
        "lake_bucket": lake,
        "lake_prefix": lake_prefix,
        "bucket": lake,
        "kms_key_arn": "arn:aws:kms:eu-west-1:111122223333:key/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
        "region": "eu-west-1",
        "oidc_provider_arn": "arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
        "oidc_issuer": "oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
        "service_account_namespace": "landing",
        "service_account_name": "landing",
    }


def parliament_verdict(findings: dict[str, list]) -> tuple[list[str], list[str]]:
    """parliament's {policy file: [[issue, detail], ...]} split into the findings that
    fail the check and the accepted ones (PARLIAMENT_ACCEPTED), each as text."""
    bad, accepted = [], []
    for name, fs in findings.items():
        for issue, detail in fs:
            if (name, issue) in PARLIAMENT_ACCEPTED:
                accepted.append(f"{name} {issue} ({PARLIAMENT_ACCEPTED[(name, issue)]})")
            else:
                bad.append(f"{name}: {issue} {detail}")
    return bad, accepted


def grant_problems(name: str, policy: dict, prefixes: tuple[str, ...]) -> list[str]:
    """What parliament cannot see in an identity policy: every s3:ListBucket grant
    must carry an s3:prefix condition inside `prefixes` (moto 5.2.5 evaluates only
    StringEquals conditions, so it cannot enforce these either), and no statement
    may use a wildcard action (`*`, `s3:*`, `s3:Get*`) or resource (`*`), or Deny."""

    def listed(v):
        return v if isinstance(v, list) else [v]

    problems = []
    for s in policy["Statement"]:
        actions, resources = listed(s["Action"]), listed(s["Resource"])
        if "s3:ListBucket" in actions:
            pre = s.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
            if not (pre and all(p.startswith(prefixes) for p in pre)):
                problems.append(f"{name} {s.get('Sid')}: s3:ListBucket without an s3:prefix condition inside its prefix")
        if "*" in resources or any("*" in a for a in actions) or s["Effect"] != "Allow":
            problems.append(f"{name} {s.get('Sid')}: no wildcard action/resource, no Deny needed")
    return problems


def check_parliament(ctx) -> str:
    vals = policy_values("example-landing-inbox", "example-landing-lake", "lake", "progress")
    docs = {pf.name: render(pf.read_text(), vals) for pf in sorted((ROOT / "terraform" / "policies").glob("*.json"))}
    findings = json.loads(infra_python("parliament_findings.py", input=json.dumps(docs)).stdout)
    bad, accepted = parliament_verdict(findings)
    require(not bad, "parliament findings: " + "; ".join(bad))
    for name in ("job.json", "reader.json"):
        problems = grant_problems(name, json.loads(docs[name]), ("progress/", "lake/"))
        require(not problems, problems[0] if problems else "")
    return f"{len(docs)} policies: no findings but {len(accepted)} accepted: " + "; ".join(accepted)


# ------------------------------------------------------------------------ moto IAM


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextlib.contextmanager
def moto_server():
    """Our own moto (never the shared one: enabling its auth would break the cargo
    tests' use of it)."""
    port = free_port()
    logf = open(Path(tempfile.gettempdir()) / f"landing-infra-moto-{port}.log", "w+")
    proc = subprocess.Popen([str(CACHE / "moto-venv" / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            require(proc.poll() is None, f"moto exited early:\n{tail(open(logf.name).read())}")
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
                break
            except OSError:
                require(time.monotonic() < deadline, "moto not ready after 60 s")
                time.sleep(0.2)
        yield endpoint
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        logf.close()
        os.unlink(logf.name)


def iam_config(inbox: str, lake: str, other: str) -> dict:
    """What programs/iam_scenario.py reads on stdin: the buckets, the input, and the
    policies of terraform/policies/ rendered for these buckets."""
    pol = ROOT / "terraform" / "policies"
    vals = policy_values(inbox, lake, "lake", "inbox")
    return {
        "inbox": inbox, "lake": lake, "other": other,
        "input": str(ROOT / "examples" / "inbox" / "progress-2026-03-02.jsonl"),
        "job_policy": render((pol / "job.json").read_text(), vals),
        "reader_policy": render((pol / "reader.json").read_text(), vals),
        "admin_policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
    }


def iam_failures(scenario_stdout: str) -> tuple[int, list[str]]:
    """The number of assertions the scenario printed (its last line: [[held, what],
    ...]) and those that did not hold."""
    results = json.loads(scenario_stdout.strip().splitlines()[-1])
    return len(results), [what for held, what in results if not held]


def check_iam(ctx) -> str:
    cfg = iam_config("landing-infra-inbox", "landing-infra-lake", "landing-infra-other")
    with moto_server() as endpoint, tempfile.TemporaryDirectory(prefix="landing-infra-") as work:
        p = infra_python("iam_scenario.py", endpoint, ctx.binary, work, input=json.dumps(cfg), check=False,
                         timeout=900)
        require(p.returncode == 0, f"IAM scenario crashed (exit {p.returncode}):\n{tail(p.stdout + p.stderr)}")
        n, bad = iam_failures(p.stdout)
    require(not bad, "moto IAM: " + "\n  ".join(bad))
    return f"moto {pins.MOTO_VERSION} with IAM enforcement: {n} assertions held"
