"""The checks of k8s/ and of the binary against README: exit-codes, k8s-schema,
k8s-policy (resources and deadlines against BENCHMARKS.md) and k8s-args."""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from pathlib import Path

from .. import pins
from .common import INFRA_VENV, ROOT, CheckFailed, infra_python, require, run, tail


def load_yaml_docs(path: Path) -> list[dict]:
    return json.loads(infra_python("yaml_docs.py", path).stdout)


def manifests() -> dict[Path, list[dict]]:
    files = sorted((ROOT / "k8s").rglob("*.yaml")) + sorted((ROOT / "k8s").rglob("*.yml"))
    require(files, "no manifests under k8s/")
    return {f: load_yaml_docs(f) for f in files}


def by_kind(docs: dict[Path, list[dict]], kind: str) -> list[dict]:
    return [d for ds in docs.values() for d in ds if d.get("kind") == kind]


def workloads(docs) -> list[tuple[str, dict, dict]]:
    """(label, job spec, pod spec) for the CronJob's job template and each Job."""
    out = []
    for cj in by_kind(docs, "CronJob"):
        js = cj["spec"]["jobTemplate"]["spec"]
        out.append((f"CronJob/{cj['metadata']['name']}", js, js["template"]["spec"]))
    for job in by_kind(docs, "Job"):
        out.append((f"Job/{job['metadata']['name']}", job["spec"], job["spec"]["template"]["spec"]))
    require(out, "no CronJob or Job in k8s/")
    return out


def readme_exit_codes() -> dict[int, str]:
    """README's exit-code table (section Outputs): code -> meaning."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"\| code \| meaning \|\n\|[-| ]+\|\n((?:\| *\d+ *\|.*\n)+)", text)
    require(m is not None, "README.md has no '| code | meaning |' exit-code table")
    codes = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        codes[int(cells[0])] = cells[1]
    return codes


def parse_quantity(q: str) -> float:
    """Kubernetes quantity -> bytes (memory) or cores (cpu)."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q))
    require(m is not None and (m.group(2) in units or m.group(2) == ""), f"cannot parse quantity {q!r}")
    return float(m.group(1)) * units.get(m.group(2), 1)


def benchmarks() -> dict[str, float]:
    text = (ROOT / "BENCHMARKS.md").read_text()
    peak = re.search(r"\| peak day: ([0-9,]+) events[^|]*\| ([0-9.]+) s", text)
    # The peak RSS: in a row of its own (`peak day: peak RSS`), or in the peak day's row.
    rss = re.search(r"\| peak day:[^|]*\|[^|]*?([0-9.]+) GiB", text)
    s3 = re.search(r"\| SeaweedFS run, ([0-9,]+) lines \| ([0-9.]+) s", text)
    require(peak is not None, "BENCHMARKS.md: no 'peak day: N events … | T s' row")
    require(rss is not None, "BENCHMARKS.md: no peak day row with its peak RSS in GiB")
    require(s3 is not None, "BENCHMARKS.md: no 'SeaweedFS run, N lines | T s' row")
    return {
        "peak_events": float(peak.group(1).replace(",", "")),
        "peak_local_s": float(peak.group(2)),
        "peak_rss": float(rss.group(1)) * 2**30,
        "s3_lines": float(s3.group(1).replace(",", "")),
        "s3_s": float(s3.group(2)),
    }


def binary_help(binary: Path, sub: str) -> str:
    return run([binary, sub, "--help"]).stdout


def documented_env(help_text: str) -> set[str]:
    return set(re.findall(r"\[env: ([A-Z0-9_]+)=", help_text))


# ------------------------------------------------------------------------ checks


def check_exit_codes(ctx) -> str:
    codes = readme_exit_codes()
    binary = ctx.binary
    with tempfile.TemporaryDirectory(prefix="landing-infra-") as tmp:
        lake = Path(tmp) / "lake"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDING_", "AWS_"))}
        base = [binary, "run", "--lake", lake, "--progress", "never"]
        p = run([*base, "--no-such-option"], check=False, env=env)
        require(p.returncode == 2 and 2 in codes, f"unknown option: exit {p.returncode}, README says 2")
        p = run([*base, "--input", ROOT / "examples/inbox/progress-2026-03-03.jsonl"], check=False, env=env)
        require(p.returncode == 65 and "refused" in codes.get(65, ""),
                f"prohibited field: exit {p.returncode} (want 65 'refused'):\n{tail(p.stdout + p.stderr)}")
        p = run([*base, "--input", ROOT / "examples/inbox/progress-2026-03-02.jsonl",
                 "--max-rejected-lines", "1"], check=False, env=env)
        require(p.returncode == 0, f"clean publish: exit {p.returncode}:\n{tail(p.stdout + p.stderr)}")
    return f"README codes {sorted(codes)}; binary: usage 2, refusal 65, publish 0"


def check_k8s_schema(ctx) -> str:
    files = sorted(str(f) for f in manifests())
    kv = INFRA_VENV / "bin" / "kubernetes-validate"
    p = run([kv, "--strict", "-k", pins.K8S_VERSION, *files], check=False)
    require(p.returncode == 0 and "ERROR" not in p.stdout + p.stderr,
            f"kubernetes-validate --strict -k {pins.K8S_VERSION} failed:\n{tail(p.stdout + p.stderr)}")
    # Negative control: strict mode must reject an unknown field, or the pass above
    # means nothing.
    with tempfile.TemporaryDirectory(prefix="landing-infra-") as tmp:
        bad = Path(tmp) / "bad.yaml"
        cron = (ROOT / "k8s" / "30-cronjob.yaml").read_text()
        bad.write_text(cron.replace("  concurrencyPolicy: Forbid", "  concurrencyPolicy: Forbid\n  concurencyPolicy: Forbid", 1))
        p = run([kv, "--strict", "-k", pins.K8S_VERSION, bad], check=False)
        require(p.returncode != 0, "negative control: a misspelt field was accepted by kubernetes-validate --strict")
    return f"{len(files)} files valid against Kubernetes {pins.K8S_VERSION} (strict); misspelt field rejected"


def check_k8s_policy(ctx) -> str:
    docs = manifests()
    summary = k8s_policy(docs)
    # Negative controls: each mutant breaks one rule and must be caught.
    cron_file = next(f for f, ds in docs.items() if any(d.get("kind") == "CronJob" for d in ds))

    def jt(d):
        return next(x for x in d[cron_file] if x["kind"] == "CronJob")["spec"]["jobTemplate"]["spec"]

    mutants = {
        "concurrencyPolicy Allow": lambda d: next(x for x in d[cron_file] if x["kind"] == "CronJob")["spec"]
        .update(concurrencyPolicy="Allow"),
        "65 counted instead of failing": lambda d: jt(d)["podFailurePolicy"]["rules"][1]["onExitCodes"]
        .update(values=[2]),
        "memory request below the peak day": lambda d: jt(d)["template"]["spec"]["containers"][0]["resources"]
        ["requests"].update(memory="1Gi"),
        "writable root filesystem": lambda d: jt(d)["template"]["spec"]["containers"][0]["securityContext"]
        .update(readOnlyRootFilesystem=False),
        "deadline shorter than the peak day": lambda d: jt(d).update(activeDeadlineSeconds=600),
        "a scratch volume with no size limit": lambda d: next(
            v for v in jt(d)["template"]["spec"]["volumes"] if "emptyDir" in v)["emptyDir"].pop("sizeLimit"),
        "a hostPath volume": lambda d: jt(d)["template"]["spec"]["volumes"].append(
            {"name": "host", "hostPath": {"path": "/var"}}),
        "four inputs sharing one input's memory": lambda d: jt(d)["template"]["spec"]["containers"][0]
        .setdefault("env", []).append({"name": "LANDING_JOBS", "value": "4"}),
    }
    for what, mutate in mutants.items():
        bad = copy.deepcopy(docs)
        mutate(bad)
        try:
            k8s_policy(bad)
        except CheckFailed:
            continue
        raise CheckFailed(f"negative control: a CronJob with {what} passed the policy check")
    return f"{summary}; {len(mutants)} broken variants rejected"


def scratch_volume(label, pod, c, env, bench) -> None:
    """The one writable volume is the spill scratch: an emptyDir with a size limit that holds
    40 bytes per event of a day twice the planning peak, mounted where
    LANDING_SCRATCH_DIR points (docs/design.md "Memory and spill")."""
    all_vols = pod.get("volumes") or []
    require(all(set(v) in ({"name", "emptyDir"}, {"name", "configMap"}) for v in all_vols),
            f"{label}: volumes are the spill scratch (emptyDir) and the contracts (configMap) only")
    vols = [v for v in all_vols if "emptyDir" in v]
    require(len(vols) == 1, f"{label}: one emptyDir, the spill scratch (read-only root otherwise)")
    limit = vols[0]["emptyDir"].get("sizeLimit")
    require(limit and parse_quantity(limit) >= 40 * 2 * bench["peak_events"],
            f"{label}: scratch sizeLimit {limit} below 40 B x twice the peak day's events")
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    require(mounts.get(vols[0]["name"]) == env.get("LANDING_SCRATCH_DIR") is not None,
            f"{label}: the scratch volume must be mounted at LANDING_SCRATCH_DIR ({env.get('LANDING_SCRATCH_DIR')})")


def k8s_policy(docs) -> str:
    codes = readme_exit_codes()
    bench = benchmarks()
    notes = []

    # CronJob scheduling.
    crons = by_kind(docs, "CronJob")
    require(len(crons) == 1, f"expected one CronJob, found {len(crons)}")
    cs = crons[0]["spec"]
    require(cs.get("concurrencyPolicy") == "Forbid", "CronJob: concurrencyPolicy must be Forbid")
    require(isinstance(cs.get("startingDeadlineSeconds"), int), "CronJob: startingDeadlineSeconds missing")
    require(cs.get("timeZone"), "CronJob: timeZone missing")
    for k in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        require(isinstance(cs.get(k), int), f"CronJob: {k} missing")

    # Exit-code classes from README's table (the binary's documented codes).
    final = {c for c, meaning in codes.items() if re.match(r"(refused|usage)", meaning)}
    retried = {c for c, meaning in codes.items() if re.match(r"(operational|busy)", meaning)}
    require(final == {2, 65} and retried == {1, 75},
            f"README exit-code table changed (final {final}, retried {retried}): review the podFailurePolicy")

    cms = {c["metadata"]["name"]: c for c in by_kind(docs, "ConfigMap")}
    sas = {s["metadata"]["name"]: s for s in by_kind(docs, "ServiceAccount")}
    images = set()
    for label, js, pod in workloads(docs):
        rules = js.get("podFailurePolicy", {}).get("rules", [])
        require(rules, f"{label}: no podFailurePolicy")
        require(pod.get("restartPolicy") == "Never", f"{label}: podFailurePolicy needs restartPolicy Never")
        first = rules[0]
        require(first.get("action") == "Ignore"
                and {"type": "DisruptionTarget", "status": "True"} in first.get("onPodConditions", []),
                f"{label}: the first rule must Ignore the DisruptionTarget condition")
        by_action: dict[str, set[int]] = {}
        for r in rules:
            oe = r.get("onExitCodes")
            if oe:
                require(oe.get("operator") == "In", f"{label}: use operator In for exit codes")
                require(oe.get("containerName") == "landing", f"{label}: exit-code rules must name the container")
                by_action.setdefault(r["action"], set()).update(oe["values"])
        used = set().union(*by_action.values()) if by_action else set()
        require(used <= set(codes), f"{label}: exit codes {sorted(used - set(codes))} are not documented in README")
        require(used >= final | retried, f"{label}: exit codes {sorted((final | retried) - used)} have no rule")
        stop = by_action.get("FailJob", set()) | by_action.get("FailIndex", set())
        require(stop == final, f"{label}: FailJob/FailIndex codes {sorted(stop)} != refused+usage {sorted(final)}")
        require(by_action.get("Count", set()) == retried, f"{label}: Count codes != {sorted(retried)}")
        require(2 in by_action.get("FailJob", set()), f"{label}: a usage error (2) must fail the whole Job")
        bl = js.get("backoffLimitPerIndex", js.get("backoffLimit"))
        require(isinstance(bl, int) and 1 <= bl <= 3, f"{label}: backoff limit {bl} is not small (1-3)")

        # Pod: identity and hardening.
        require(pod.get("serviceAccountName") in sas, f"{label}: serviceAccountName not defined in k8s/")
        sa = sas[pod["serviceAccountName"]]
        require(re.match(r"^arn:aws[a-z-]*:iam::\d{12}:role/", sa["metadata"].get("annotations", {}).get("eks.amazonaws.com/role-arn", "")),
                "ServiceAccount: eks.amazonaws.com/role-arn annotation missing")
        require(pod.get("automountServiceAccountToken") is False and sa.get("automountServiceAccountToken") is False,
                f"{label}: the Kubernetes API token must not be mounted (the job never calls the API)")
        psc = pod.get("securityContext", {})
        require(psc.get("runAsNonRoot") is True and isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
                f"{label}: pod must run as a numeric non-root user")
        require(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{label}: seccompProfile RuntimeDefault")
        tgps = pod.get("terminationGracePeriodSeconds")
        require(isinstance(tgps, int) and 30 <= tgps <= 300,
                f"{label}: terminationGracePeriodSeconds {tgps} must leave time to abort staging/release the lease (30-300 s)")
        require(len(pod["containers"]) == 1 and pod["containers"][0]["name"] == "landing", f"{label}: one container 'landing'")
        c = pod["containers"][0]
        images.add(c["image"])
        sc = c.get("securityContext", {})
        require(sc.get("readOnlyRootFilesystem") is True, f"{label}: readOnlyRootFilesystem")
        require(sc.get("allowPrivilegeEscalation") is False, f"{label}: allowPrivilegeEscalation false")
        require(sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("capabilities", {}).get("add"),
                f"{label}: drop ALL capabilities, add none")
        require(sc.get("privileged") in (None, False), f"{label}: not privileged")
        for ef in c.get("envFrom", []):
            require(ef.get("configMapRef", {}).get("name") in cms, f"{label}: envFrom names a ConfigMap not in k8s/")
        require(not any(e.get("valueFrom", {}).get("secretKeyRef") for e in c.get("env", [])),
                f"{label}: no secrets in env (credentials come from IRSA)")

        # Resources vs BENCHMARKS.md: peak-day RSS plus S3 parts in flight
        # ((concurrency 4 + 1) x 16 MiB) must fit under the request, and the limit
        # must leave 2x the measured peak (the design's 3.5 GiB budget).
        res = c.get("resources", {})
        req_mem = parse_quantity(res["requests"]["memory"])
        lim_mem = parse_quantity(res["limits"]["memory"])
        need = bench["peak_rss"] + 5 * 16 * 2**20
        require(req_mem >= need, f"{label}: memory request {req_mem / 2**30:.2f} GiB < peak day on S3 {need / 2**30:.2f} GiB")
        require(lim_mem >= 2 * bench["peak_rss"], f"{label}: memory limit {lim_mem / 2**30:.2f} GiB < 2x peak RSS")
        require(lim_mem <= 3.5 * 2**30, f"{label}: memory limit above the design's 3.5 GiB budget")
        require(parse_quantity(res["requests"]["cpu"]) >= 1 and "cpu" in res.get("limits", {}),
                f"{label}: CPU request >= 1 core (the run uses 1.4) and a CPU limit")
        env = {**{k: v for ef in c.get("envFrom", []) for k, v in cms[ef["configMapRef"]["name"]]["data"].items()},
               **{e["name"]: e.get("value") for e in c.get("env", [])}}
        # Unset: in flight bounded by memory (a peak-day input alone); 1: one at a time.
        # Any other count divides the budget the sizing above gives one input.
        require(env.get("LANDING_JOBS") in (None, "1"),
                f"{label}: the memory sizing assumes a peak-day input alone (LANDING_JOBS unset or 1)")
        scratch_volume(label, pod, c, env, bench)

        # Deadline vs BENCHMARKS.md: attempts x peak day on S3 + backoff + one lease
        # wait. The wait must cover a takeover, so that the retry after a killed
        # attempt lands the input instead of answering busy into the backoff: a run
        # takes a dead holder's lease over once its record stayed unchanged for the
        # TTL plus the margin (the S3 attempt timeout) of its own clock, polling at
        # most every 5 s (docs/design.md, the lease).
        s3_peak = bench["s3_s"] / bench["s3_lines"] * bench["peak_events"]
        ttl = int(env.get("LANDING_LEASE_TTL", "180"))
        attempt = int(env.get("LANDING_S3_ATTEMPT_TIMEOUT", "120"))
        wait = int(env.get("LANDING_LEASE_WAIT", "0"))
        takeover = ttl + attempt + 5
        require(wait >= takeover,
                f"{label}: LANDING_LEASE_WAIT {wait} s must cover a takeover: LANDING_LEASE_TTL ({ttl} s) "
                f"+ LANDING_S3_ATTEMPT_TIMEOUT ({attempt} s) + a 5 s poll = {takeover} s")
        ads = js.get("activeDeadlineSeconds")
        if label.startswith("CronJob"):
            need_s = (js["backoffLimit"] + 1) * s3_peak + 10 * (2 ** js["backoffLimit"] - 1) + wait
            require(isinstance(ads, int) and need_s <= ads < 86400,
                    f"{label}: activeDeadlineSeconds {ads} must be >= {need_s:.0f} s (peak day on S3 "
                    f"{s3_peak:.0f} s x attempts + backoff + lease wait) and < 24 h")
            notes.append(f"deadline {ads} s >= {need_s:.0f} s needed")
        else:
            require(isinstance(ads, int) and ads >= s3_peak + wait, f"{label}: activeDeadlineSeconds too short")
        if js.get("completionMode") == "Indexed":
            args = c.get("args", [])
            require("--shards" in args, f"{label}: an Indexed Job must pass --shards N")
            n = int(args[args.index("--shards") + 1])
            require(js.get("completions") == n, f"{label}: completions {js.get('completions')} != --shards {n}")
            require(1 <= js.get("parallelism", 1) <= n, f"{label}: parallelism must be 1..{n}")
        notes.append(f"{label}: request {req_mem / 2**30:.2f} GiB >= {need / 2**30:.2f} GiB, limit {lim_mem / 2**30:.2f} GiB")
    require(len(images) == 1, f"CronJob and backfill must run the same image, found {images}")
    ns = by_kind(docs, "Namespace")
    require(ns and ns[0]["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted",
            "Namespace must enforce the restricted Pod Security Standard")
    return "; ".join(notes)


def check_contracts_configmap(ctx) -> str:
    """The contracts ConfigMap holds exactly contracts/*.json, byte for byte."""
    cms = {c["metadata"]["name"]: c["data"] for c in by_kind(manifests(), "ConfigMap")}
    data = cms.get("landing-contracts")
    require(data is not None, "k8s/: no ConfigMap landing-contracts")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "contracts")
    files = {f: open(os.path.join(root, f)).read() for f in sorted(os.listdir(root)) if f.endswith(".json")}
    require(sorted(data) == sorted(files), f"landing-contracts holds {sorted(data)}, contracts/ has {sorted(files)}")
    for f, text in files.items():
        require(data[f] == text, f"landing-contracts: {f} differs from contracts/{f}")
    return f"{len(files)} contracts equal contracts/"


def check_k8s_args(ctx) -> str:
    """Each container's args and env, through the real binary."""
    docs = manifests()
    cms = {c["metadata"]["name"]: c["data"] for c in by_kind(docs, "ConfigMap")}
    binary = ctx.binary
    problems, ran = [], 0
    for label, js, pod in workloads(docs):
        c = pod["containers"][0]
        require(not c.get("command"), f"{label}: command would replace the image's entrypoint (landing)")
        args = [str(a) for a in c.get("args", [])]
        require(args and args[0] == "run", f"{label}: args must start with the subcommand 'run'")
        env = {}
        for ef in c.get("envFrom", []):
            env.update(cms[ef["configMapRef"]["name"]])
        env.update({e["name"]: str(e["value"]) for e in c.get("env", []) if "value" in e})
        # clap ignores variables it does not know, so an unknown LANDING_* would pass
        # a dry run silently: each must be documented by the subcommand's --help.
        known = documented_env(binary_help(binary, args[0]))
        unknown = sorted(k for k in env if k.startswith("LANDING_") and k not in known)
        if unknown:
            problems.append(f"{label}: `landing {args[0]} --help` documents no {', '.join(unknown)}")
        # ConfigMap volumes become folders of their files, and a variable naming the
        # mount path names that folder, so the dry run reads what the pod would.
        mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
        for v in pod.get("volumes", []):
            if "configMap" in v and v["name"] in mounts:
                folder = tempfile.mkdtemp(prefix="landing-cm-")
                for fname, text in cms[v["configMap"]["name"]].items():
                    with open(os.path.join(folder, fname), "w") as f:
                        f.write(text)
                env = {k: (folder if val == mounts[v["name"]] else val) for k, val in env.items()}
        indexes = range(js["completions"]) if js.get("completionMode") == "Indexed" else [None]
        for i in indexes:
            penv = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir(), **env}
            if i is not None:
                penv["JOB_COMPLETION_INDEX"] = str(i)
            p = run([binary, *args, "--dry-run"], check=False, env=penv, timeout=60)
            ran += 1
            if p.returncode != 0:
                msg = (f"{label}: `landing {' '.join(args)} --dry-run` with its env exited "
                       f"{p.returncode}:\n{tail(p.stderr, 6)}")
                if i is not None:
                    msg = msg.replace(f"{label}:", f"{label} (JOB_COMPLETION_INDEX={i}):", 1)
                if msg not in problems and not (i and any(m.startswith(label) for m in problems)):
                    problems.append(msg)
    require(not problems, "\n  ".join(problems))
    return f"{ran} dry runs exited 0; every LANDING_* variable is documented by the binary"

