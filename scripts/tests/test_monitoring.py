"""Unit tests of the pieces of the k8s-alerts check and the Debian pins that need no
tool: the alert-coverage rule, the dashboard's checks and the pin comparison.
Offline, standard library only.

    python3 -m unittest discover -s scripts/tests
"""

import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test import debian  # noqa: E402
from landing_test.infra import monitoring  # noqa: E402


class CoverageTest(unittest.TestCase):
    def test_each_alert_needs_a_firing_and_a_quiet_test(self):
        tests = {"tests": [{"alert_rule_test": [
            {"alertname": "A", "exp_alerts": [{"exp_labels": {}}]},
            {"alertname": "A", "exp_alerts": []},
            {"alertname": "B", "exp_alerts": [{"exp_labels": {}}]},
            {"alertname": "Gone", "exp_alerts": []},
        ]}]}
        self.assertEqual(monitoring.coverage(["A", "B", "C"], tests), [
            "C: no test in which it fires",
            "B: no test in which it stays quiet",
            "C: no test in which it stays quiet",
            "Gone: tested but not defined",
        ])

    def test_a_fully_covered_rule_set_passes(self):
        tests = {"tests": [{"alert_rule_test": [
            {"alertname": "A", "exp_alerts": [{}]}, {"alertname": "A"}]}]}
        self.assertEqual(monitoring.coverage(["A"], tests), [])


class DashboardTest(unittest.TestCase):
    def cm(self, exprs, labels=None, raw=None):
        dash = {"panels": [{"targets": [{"expr": e} for e in exprs]}]}
        return {"metadata": {"labels": labels if labels is not None else {"grafana_dashboard": "1"}},
                "data": {"landing.json": raw if raw is not None else json.dumps(dash)}}

    def test_every_family_needs_a_panel(self):
        exprs = ["sum(landing_run_inputs)", "landing_run_rows", "landing_run_stage_seconds",
                 "landing_run_bytes{direction='in'}"]
        self.assertEqual(monitoring.dashboard_problems(self.cm(exprs)), [])
        self.assertEqual(monitoring.dashboard_problems(self.cm(exprs[:3])),
                         ["no panel shows bytes (landing_run_bytes)"])
        # A longer name is not the family.
        self.assertIn("no panel shows rows (landing_run_rows)",
                      monitoring.dashboard_problems(self.cm(["landing_run_rows_x"])))

    def test_invalid_json_and_a_missing_label_are_reported(self):
        self.assertTrue(monitoring.dashboard_problems(self.cm([], raw="{"))[0].startswith("the dashboard is not valid JSON"))
        exprs = ["landing_run_inputs", "landing_run_rows", "landing_run_stage_seconds", "landing_run_bytes"]
        self.assertEqual(monitoring.dashboard_problems(self.cm(exprs, labels={})),
                         ['the dashboard ConfigMap lacks the label grafana_dashboard: "1"'])


class PinsTest(unittest.TestCase):
    def test_only_the_exact_pinned_version_passes(self):
        wanted = {"prometheus": "2.42.0+ds-5+deb12u1", "prometheus-pushgateway": "1.5.1-2+b5"}
        self.assertEqual(debian.mismatches(wanted, dict(wanted)), [])
        self.assertEqual(
            debian.mismatches(wanted, {"prometheus": "2.42.0+ds-5+deb12u2", "prometheus-pushgateway": None}),
            ["prometheus: 2.42.0+ds-5+deb12u2, pinned 2.42.0+ds-5+deb12u1",
             "prometheus-pushgateway: not installed, pinned 1.5.1-2+b5"])

    def test_every_pinned_package_has_a_version(self):
        from landing_test import pins
        self.assertEqual(set(pins.DEBIAN_PINNED), {"prometheus", "prometheus-pushgateway"})
        self.assertTrue(all(pins.DEBIAN_PINNED.values()))


if __name__ == "__main__":
    unittest.main()
