"""The IAM policies of terraform/policies/: rendered as terraform would, linted by
parliament, and enforced by moto against the real binary (programs/iam_scenario.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
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
    may use a wildcard action (`*`, `s3:*`, `s3:Get*`) or resource (`*`). A Deny must
    carry a condition: a narrower grant does what an unconditional Deny would, but
    only a Deny can refuse a request for a header it lacks."""

    def listed(v):
        return v if isinstance(v, list) else [v]

    problems = []
    for s in policy["Statement"]:
        actions, resources = listed(s["Action"]), listed(s["Resource"])
        if "s3:ListBucket" in actions:
            pre = s.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
            if not (pre and all(p.startswith(prefixes) for p in pre)):
                problems.append(f"{name} {s.get('Sid')}: s3:ListBucket without an s3:prefix condition inside its prefix")
        if "*" in resources or any("*" in a for a in actions):
            problems.append(f"{name} {s.get('Sid')}: no wildcard action or resource")
        if s["Effect"] != "Allow" and not s.get("Condition"):
            problems.append(f"{name} {s.get('Sid')}: an unconditional Deny; grant less instead")
    return problems


# The lake zones the job never deletes in, each with why (docs/deployment.md, IAM).
# No statement may grant a delete on a resource that covers any key under them.
NO_DELETE_ZONES = {
    "raw": "readers depend on it; nothing in the job removes a published object",
    "checkpoints": "the record of what was published; the job only replaces it, with If-Match",
    "locks": "a lease is released by a conditional overwrite, never deleted",
    "runs": "run history; only a lifecycle rule expires it",
}
# What counts as a delete: DeleteObjects (batch) is authorised as s3:DeleteObject per
# key, and a version delete is worse than a delete (it is not recoverable).
DELETE_ACTIONS = ("s3:DeleteObject", "s3:DeleteObjectVersion")


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def _glob_states(pattern: str, text: str) -> set[int]:
    """The positions of IAM glob `pattern` (`*` any run of characters, `/`
    included; `?` one character; anything else literal) that can be reached after
    reading all of `text`: empty when no string that starts with `text` matches."""

    def closure(states):
        out, todo = set(), list(states)
        while todo:
            i = todo.pop()
            if i in out:
                continue
            out.add(i)
            if i < len(pattern) and pattern[i] == "*":
                todo.append(i + 1)
        return out

    states = closure({0})
    for ch in text:
        step = set()
        for i in states:
            if i < len(pattern):
                if pattern[i] == "*":
                    step.add(i)
                elif pattern[i] == "?" or pattern[i] == ch:
                    step.add(i + 1)
        states = closure(step)
        if not states:
            break
    return states


def glob_matches(pattern: str, text: str) -> bool:
    """IAM glob `pattern` matches all of `text`."""
    return len(pattern) in _glob_states(pattern, text)


def glob_covers_some(pattern: str, prefix: str) -> bool:
    """`pattern` matches at least one key that starts with `prefix`."""
    return bool(_glob_states(pattern, prefix))


def glob_covers_all(pattern: str, prefix: str) -> bool:
    """`pattern` matches every key that starts with `prefix` (a trailing `*` reached)."""
    return any(i < len(pattern) and set(pattern[i:]) == {"*"} for i in _glob_states(pattern, prefix))


def grants_action(statement: dict, action: str) -> bool:
    """Whether an Allow statement's Action (or NotAction) takes in `action`; actions
    are case-insensitive, with `*` and `?` as in resources."""
    if statement.get("Effect") != "Allow":
        return False
    if "NotAction" in statement:
        return not any(glob_matches(a.lower(), action.lower()) for a in _listed(statement["NotAction"]))
    return any(glob_matches(a.lower(), action.lower()) for a in _listed(statement.get("Action", [])))


def covers_zone(statement: dict, zone_prefix: str) -> bool:
    """Whether a statement's Resource (or NotResource) takes in some object key under
    `zone_prefix` (an ARN prefix ending in `/`)."""
    if "NotResource" in statement:
        return not any(glob_covers_all(r, zone_prefix) for r in _listed(statement["NotResource"]))
    return any(glob_covers_some(r, zone_prefix) for r in _listed(statement.get("Resource", [])))


def delete_problems(name: str, policy: dict, lake_bucket: str, lake_prefix: str,
                    zones=tuple(NO_DELETE_ZONES)) -> list[str]:
    """Every statement of a rendered policy that grants a delete (DELETE_ACTIONS, also
    through `s3:*`, `s3:Delete*`, `*` or NotAction) on a resource covering any key
    under one of `zones` of the lake (a wildcard over the lake prefix, the bucket or
    `*` counts)."""
    problems = []
    for s in policy["Statement"]:
        for zone in zones:
            zone_arn = f"arn:aws:s3:::{lake_bucket}/{lake_prefix}/{zone}/"
            for action in DELETE_ACTIONS:
                if grants_action(s, action) and covers_zone(s, zone_arn):
                    problems.append(f"{name} {s.get('Sid')}: grants {action} under {zone}/ "
                                    f"({NO_DELETE_ZONES.get(zone, 'never deleted by the job')})")
    return problems


def workload_identity_problems(trusted_subjects: list[str], workloads: list[tuple[str, str, str]]) -> list[str]:
    """Each (label, namespace, service account) of a pod template in k8s/ must be one
    the job role's trust policy admits (its `sub` condition), so every workload (the
    CronJob and the backfill Indexed Job) runs with exactly the job's policy."""
    problems = []
    for label, namespace, account in workloads:
        sub = f"system:serviceaccount:{namespace}:{account}"
        if sub not in trusted_subjects:
            problems.append(f"{label} runs as {sub}, which the job role does not trust ({trusted_subjects})")
    return problems


def trusted_subjects(trust: dict) -> list[str]:
    """The service-account subjects a rendered trust policy admits."""
    out = []
    for s in trust["Statement"]:
        for op in ("StringEquals", "StringLike"):
            for key, v in s.get("Condition", {}).get(op, {}).items():
                if key.endswith(":sub"):
                    out.extend(v if isinstance(v, list) else [v])
    return out


def job_role_wiring() -> str:
    """terraform gives the job one role, trusted by one service account, with
    job.json attached; every CronJob and Job in k8s/ runs as that account."""
    from .k8s import manifests  # the k8s checks' loader (yaml through the infra venv)

    tdir = ROOT / "terraform"
    parsed = json.loads(infra_python("hcl_json.py", tdir / "variables.tf", tdir / "iam.tf").stdout)
    defaults = {n: b.get("default") for doc in parsed.values() for v in doc.get("variable", []) for n, b in v.items()}
    resources = {f"{rtype}.{n}": b for doc in parsed.values() for r in doc.get("resource", [])
                 for rtype, named in r.items() for n, b in named.items()}
    roles = [k for k in resources if k.startswith("aws_iam_role.")]
    require(roles == ["aws_iam_role.job"], f"terraform: one role for every pod of the job, found {roles}")
    require("policies/job-trust.json" in resources["aws_iam_role.job"]["assume_role_policy"],
            "terraform: the job role's trust policy is not policies/job-trust.json")
    attached = [b for k, b in resources.items() if k.startswith("aws_iam_role_policy.")
                and "policies/job.json" in b.get("policy", "")]
    require(len(attached) == 1 and attached[0].get("role") == "${aws_iam_role.job.id}",
            "terraform: policies/job.json must be attached to aws_iam_role.job, once")
    vals = dict(policy_values("in", "lake"), service_account_namespace=defaults["service_account_namespace"],
                service_account_name=defaults["service_account_name"])
    trust = json.loads(render((tdir / "policies" / "job-trust.json").read_text(), vals))
    subjects = trusted_subjects(trust)
    docs = manifests()
    pods = []
    for ds in docs.values():
        for d in ds:
            if d.get("kind") == "CronJob":
                pod = d["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            elif d.get("kind") == "Job":
                pod = d["spec"]["template"]["spec"]
            else:
                continue
            pods.append((f"{d['kind']}/{d['metadata']['name']}", d["metadata"].get("namespace", "default"),
                         pod.get("serviceAccountName", "default")))
    require(any(k.startswith("Job/") for k, _, _ in pods), "k8s/: no Job (the backfill Indexed Job) found")
    problems = workload_identity_problems(subjects, pods)
    require(not problems, "; ".join(problems))
    return f"{', '.join(k for k, _, _ in pods)} run as {', '.join(subjects)}, the job role's only subject"


def check_parliament(ctx) -> str:
    vals = policy_values("example-landing-inbox", "example-landing-lake", "lake", "progress")
    docs = {pf.name: render(pf.read_text(), vals) for pf in sorted((ROOT / "terraform" / "policies").glob("*.json"))}
    findings = json.loads(infra_python("parliament_findings.py", input=json.dumps(docs)).stdout)
    bad, accepted = parliament_verdict(findings)
    require(not bad, "parliament findings: " + "; ".join(bad))
    for name in ("job.json", "reader.json"):
        problems = grant_problems(name, json.loads(docs[name]), ("progress/", "lake/"))
        problems += delete_problems(name, json.loads(docs[name]), vals["lake_bucket"], vals["lake_prefix"])
        require(not problems, "; ".join(problems))
    wiring = job_role_wiring()
    return (f"{len(docs)} policies: no findings but {len(accepted)} accepted: " + "; ".join(accepted)
            + f"; no delete under {', '.join(z + '/' for z in NO_DELETE_ZONES)}; {wiring}")


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


# Condition keys moto's IAM cannot evaluate: it ignores every operator but
# StringEquals (moto/iam/policy_conditions.py), so a Deny conditioned on one of these
# would deny every request, the conditional create it exists to let through included.
MOTO_BLIND_KEYS = ("s3:if-none-match",)


def moto_evaluable(policy: str) -> tuple[str, list[str]]:
    """The rendered `policy` without its Deny statements on MOTO_BLIND_KEYS, and the
    Sids taken out (test_iam checks those statements' shape instead)."""
    doc = json.loads(policy)
    kept, dropped = [], []
    for st in doc["Statement"]:
        keys = {k for cond in st.get("Condition", {}).values() for k in cond}
        if st["Effect"] == "Deny" and keys & set(MOTO_BLIND_KEYS):
            dropped.append(st["Sid"])
        else:
            kept.append(st)
    doc["Statement"] = kept
    return json.dumps(doc), dropped


def iam_config(inbox: str, lake: str, other: str) -> dict:
    """What programs/iam_scenario.py reads on stdin: the buckets, the inputs (one
    that publishes with one rejected line, one that is refused for a prohibited
    field), and the policies of terraform/policies/ rendered for these buckets."""
    pol = ROOT / "terraform" / "policies"
    vals = policy_values(inbox, lake, "lake", "inbox")
    return {
        "inbox": inbox, "lake": lake, "other": other,
        "input": str(ROOT / "examples" / "inbox" / "progress-2026-03-02.jsonl"),
        "refused_input": str(ROOT / "examples" / "inbox" / "progress-2026-03-03.jsonl"),
        "job_policy": moto_evaluable(render((pol / "job.json").read_text(), vals))[0],
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
        # A copy: `landing drill` re-executes its own file for its child runs, which
        # a rebuild of target/ during the scenario would otherwise pull away.
        binary = Path(work) / "landing"
        shutil.copy2(ctx.binary, binary)
        p = infra_python("iam_scenario.py", endpoint, binary, work, input=json.dumps(cfg), check=False,
                         timeout=900)
        require(p.returncode == 0, f"IAM scenario crashed (exit {p.returncode}):\n{tail(p.stdout + p.stderr)}")
        n, bad = iam_failures(p.stdout)
    require(not bad, "moto IAM: " + "\n  ".join(bad))
    return f"moto {pins.MOTO_VERSION} with IAM enforcement: {n} assertions held"
