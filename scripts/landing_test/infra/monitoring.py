"""The check k8s-alerts: the PrometheusRule of k8s/ through promtool (Debian's
prometheus package, pinned): `promtool check rules`, then `promtool test rules`
with tests/prometheus/alerts.test.yml, which must hold a test in which each alert
fires and one in which it stays quiet; each alert has its RUNBOOK section; the
dashboard ConfigMap holds valid JSON with a panel each for outcomes, rows,
durations and bytes. (That every metric the dashboard and the alerts query is one
the job pushes is checked against a real scrape by tests/it/metrics.rs.)"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from .common import ROOT, CheckFailed, require, run, tail
from .k8s import by_kind, load_yaml_docs, manifests

UNIT_TESTS = ROOT / "tests" / "prometheus" / "alerts.test.yml"
RULES_NAME = "landing.rules.yml"
# Families a panel must query: what the issue asks the dashboard to show.
PANEL_FAMILIES = {
    "outcomes": "landing_run_inputs",
    "rows": "landing_run_rows",
    "durations": "landing_run_stage_seconds",
    "bytes": "landing_run_bytes",
}


def promtool_test(groups: list[dict], tests_file: Path) -> tuple[str, str]:
    """(check rules output, test rules output) for `groups`; CheckFailed on failure."""
    with tempfile.TemporaryDirectory(prefix="landing-alerts-") as tmp:
        rules = Path(tmp) / RULES_NAME
        # JSON is YAML: promtool reads it as a rule file.
        rules.write_text(json.dumps({"groups": groups}, indent=1))
        shutil.copy(tests_file, Path(tmp) / tests_file.name)
        checked = run(["promtool", "check", "rules", rules], check=False)
        require(checked.returncode == 0, f"promtool check rules failed:\n{tail(checked.stdout + checked.stderr)}")
        tested = run(["promtool", "test", "rules", tests_file.name], check=False, cwd=tmp)
        require(tested.returncode == 0, f"promtool test rules failed:\n{tail(tested.stdout + tested.stderr)}")
        return checked.stdout.strip(), tested.stdout.strip()


def coverage(alerts: list[str], unit_tests: dict) -> list[str]:
    """Alerts without a test in which they fire, or without one in which they do not."""
    fires, quiet = set(), set()
    for case in unit_tests.get("tests", []):
        for t in case.get("alert_rule_test", []):
            (fires if t.get("exp_alerts") else quiet).add(t["alertname"])
    problems = [f"{a}: no test in which it fires" for a in alerts if a not in fires]
    problems += [f"{a}: no test in which it stays quiet" for a in alerts if a not in quiet]
    problems += [f"{a}: tested but not defined" for a in sorted((fires | quiet) - set(alerts))]
    return problems


def runbook_headings() -> list[str]:
    return re.findall(r"^#+ (.+)$", (ROOT / "RUNBOOK.md").read_text(), re.M)


def dashboard_problems(cm: dict) -> list[str]:
    raw = cm.get("data", {}).get("landing.json")
    if raw is None:
        return ["ConfigMap landing-dashboard has no data key landing.json"]
    try:
        dash = json.loads(raw)
    except json.JSONDecodeError as e:
        return [f"the dashboard is not valid JSON: {e}"]
    exprs = [t.get("expr", "") for p in dash.get("panels", []) for t in p.get("targets", [])]
    problems = [f"no panel shows {what} ({family})" for what, family in PANEL_FAMILIES.items()
                if not any(re.search(rf"\b{family}\b", e) for e in exprs)]
    if cm.get("metadata", {}).get("labels", {}).get("grafana_dashboard") != "1":
        problems.append("the dashboard ConfigMap lacks the label grafana_dashboard: \"1\"")
    return problems


def check_k8s_alerts(ctx) -> str:
    docs = manifests()
    rules = by_kind(docs, "PrometheusRule")
    require(len(rules) == 1, f"expected one PrometheusRule in k8s/, found {len(rules)}")
    groups = rules[0]["spec"]["groups"]
    alerts = [r["alert"] for g in groups for r in g["rules"] if "alert" in r]
    required = {"LandingNoSuccessfulRun", "LandingFileRefused", "LandingJobFailed",
                "LandingRejectedRowsHigh", "LandingInputBusyTwoNights"}
    require(required <= set(alerts), f"alerts missing from the PrometheusRule: {sorted(required - set(alerts))}")

    checked, tested = promtool_test(groups, UNIT_TESTS)
    unit_tests = load_yaml_docs(UNIT_TESTS)[0]
    gaps = coverage(alerts, unit_tests)
    require(not gaps, "promtool unit tests (tests/prometheus/alerts.test.yml):\n  " + "\n  ".join(gaps))
    headings = runbook_headings()
    no_section = [a for a in alerts if not any(a in h for h in headings)]
    require(not no_section, f"RUNBOOK.md has no section for {no_section}")

    # Negative controls: a rule made wrong must fail its unit tests.
    mutants = {
        "no-success window of 24 h": ("LandingNoSuccessfulRun", "26 * 3600", "24 * 3600"),
        "busy alert without its two-runs clause": ("LandingInputBusyTwoNights", "> 12 * 3600", "> -1"),
        "rejected ratio threshold at 0": ("LandingRejectedRowsHigh", "> 0.01", "> 0"),
    }
    for what, (alert, old, new) in mutants.items():
        bad = json.loads(json.dumps(groups))
        rule = next(r for g in bad for r in g["rules"] if r.get("alert") == alert)
        require(old in rule["expr"], f"negative control {what!r}: {old!r} not in {alert}'s expr")
        rule["expr"] = rule["expr"].replace(old, new)
        try:
            promtool_test(bad, UNIT_TESTS)
        except CheckFailed:
            continue
        raise CheckFailed(f"negative control: the unit tests pass with the {what}")

    dashboards = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"] == "landing-dashboard"]
    require(len(dashboards) == 1, "no ConfigMap landing-dashboard in k8s/")
    problems = dashboard_problems(dashboards[0])
    require(not problems, "dashboard: " + "; ".join(problems))
    version = run(["promtool", "--version"]).stdout.split("\n")[0]
    return (f"{len(alerts)} alerts: {checked.splitlines()[-1].strip()}; {tested.splitlines()[-1].strip()} "
            f"({version}); each fires and stays quiet in a test and has a RUNBOOK section; "
            f"{len(mutants)} broken rules caught; dashboard JSON valid with panels for "
            f"{', '.join(PANEL_FAMILIES)}")
