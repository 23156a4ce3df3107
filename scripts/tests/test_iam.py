"""Unit tests of the IAM assertions of scripts/test-infra: the policies rendered as
terraform renders them (landing_test/infra/policies.py) and the verdicts of the moto
scenario on what each step left behind (landing_test/programs/iam_scenario.py), each
shown to catch the failure it is there for. Offline (no moto, no boto3), standard
library only.

    python3 -m unittest discover -s scripts/tests
"""

import datetime
import json
import signal
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test.infra import policies  # noqa: E402
from landing_test.infra.common import ROOT, CheckFailed  # noqa: E402
from landing_test.programs import iam_scenario as iam  # noqa: E402

NAME = iam.NAME
FIRST, SECOND = "run-1", "run-2"


def held(verdicts):
    return [what for ok, what in verdicts if not ok]


class PolicyTest(unittest.TestCase):
    def test_render_is_templatefile_for_plain_placeholders(self):
        self.assertEqual(policies.render("arn:${partition}:s3:::${lake_bucket}/x",
                                         {"partition": "aws", "lake_bucket": "b"}), "arn:aws:s3:::b/x")
        with self.assertRaisesRegex(CheckFailed, r"placeholder \$\{kms_key_arn\} has no value"):
            policies.render("${kms_key_arn}", {})

    def test_the_scenario_gets_every_policy_rendered(self):
        cfg = policies.iam_config("in", "lake", "other")
        for key in ("job_policy", "reader_policy", "admin_policy"):
            self.assertNotIn("${", cfg[key], key)
            json.loads(cfg[key])
        self.assertTrue(Path(cfg["input"]).is_file())
        self.assertTrue(cfg["input"].endswith(NAME), "the scenario lands the input it names")

    def test_the_repository_policies_grant_lists_only_inside_their_prefix(self):
        vals = policies.policy_values("in", "lake", "lake", "progress")
        for name in ("job.json", "reader.json"):
            doc = json.loads(policies.render((ROOT / "terraform" / "policies" / name).read_text(), vals))
            self.assertEqual(policies.grant_problems(name, doc, ("progress/", "lake/")), [], name)

    def test_unbounded_grants_are_caught(self):
        listing = {"Sid": "L", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::b"],
                   "Condition": {"StringLike": {"s3:prefix": ["lake/raw/*"]}}}
        self.assertEqual(policies.grant_problems("p", {"Statement": [listing]}, ("lake/",)), [])
        cases = {
            "no condition": dict(listing, Condition={}),
            "a prefix outside": dict(listing, Condition={"StringLike": {"s3:prefix": ["lake/", "*"]}}),
            "a wildcard action": dict(listing, Action=["s3:*"]),
            "a wildcard in an action": dict(listing, Action=["s3:ListBucket", "s3:Get*"]),
            "every resource": dict(listing, Resource="*"),
            "every resource, listed": dict(listing, Resource=["arn:aws:s3:::b", "*"]),
            "a Deny": dict(listing, Effect="Deny"),
        }
        for what, statement in cases.items():
            self.assertTrue(policies.grant_problems("p", {"Statement": [statement]}, ("lake/",)), what)

    def test_only_the_listed_parliament_findings_are_accepted(self):
        bad, accepted = policies.parliament_verdict({
            "job-trust.json": [["UNKNOWN_FEDERATION_SOURCE", "x"], ["MALFORMED", "y"]],
            "job.json": [["RESOURCE_STAR", "z"]],
            "reader.json": [],
        })
        self.assertEqual(bad, ["job.json: RESOURCE_STAR z"])
        self.assertEqual(len(accepted), 2)
        bad, _ = policies.parliament_verdict({"job.json": [["MALFORMED", "y"]]})
        self.assertEqual(bad, ["job.json: MALFORMED y"], "accepted for the trust policy only")

    def test_scenario_results(self):
        out = "moto noise\n" + json.dumps([[True, "a"], [False, "b"], [True, "c"]]) + "\n"
        self.assertEqual(policies.iam_failures(out), (3, ["b"]))


class ScenarioVerdictTest(unittest.TestCase):
    def test_the_summary_is_the_last_json_line(self):
        out = '{"action":"published"}\nnot json\n{"action":"skipped"}\n'
        self.assertEqual(iam.last_summary(out), {"action": "skipped"})
        self.assertEqual(iam.last_summary("error\n"), {})

    def test_a_lease_is_over_when_gone_released_or_expired(self):
        now = datetime.datetime(2026, 3, 2, 12, 0, tzinfo=datetime.timezone.utc)
        self.assertTrue(iam.lease_over(None, now))
        self.assertTrue(iam.lease_over({"released": True, "expires_at": "2026-03-02T13:00:00Z"}, now))
        self.assertTrue(iam.lease_over({"expires_at": "2026-03-02T11:59:59Z"}, now))
        self.assertFalse(iam.lease_over({"expires_at": "2026-03-02T12:00:05Z"}, now))

    def test_a_crash_must_be_the_hooks_sigkill_with_the_lease_left_held(self):
        marker = "landing: drill crash at mid-stream\n"
        lease = {"run_id": FIRST, "released": False}
        self.assertEqual(held(iam.crash_verdicts("mid-stream", -signal.SIGKILL, marker, lease)), [])
        for what, args in {
            "an error exit": (1, marker, lease),
            "a panic's abort": (-signal.SIGABRT, marker, lease),
            "no marker (the point was never reached)": (-signal.SIGKILL, "AccessDenied\n", lease),
            "a released lease": (-signal.SIGKILL, marker, dict(lease, released=True)),
            "no lease": (-signal.SIGKILL, marker, None),
        }.items():
            self.assertEqual(len(held(iam.crash_verdicts("mid-stream", *args))), 1, what)

    def test_mid_stream_leaves_only_its_lease_and_one_open_upload(self):
        upload = f"{iam.STAGING}{FIRST}/{NAME}"
        good = dict(run_id=FIRST, locks=[iam.LOCK], uploads=[upload], staged=[], settled=[])
        self.assertEqual(held(iam.mid_stream_verdicts(**good)), [])
        for what, change in {
            "no lease taken": {"locks": []},
            "the quarantine's upload opened too": {"uploads": [upload, upload + ".rejects.jsonl"]},
            "another run's upload": {"uploads": [f"{iam.STAGING}{SECOND}/{NAME}"]},
            "a completed staging object": {"staged": [upload]},
            "something published": {"settled": [f"lake/raw/progress/{NAME}"]},
        }.items():
            self.assertEqual(len(held(iam.mid_stream_verdicts(**dict(good, **change)))), 1, what)

    def test_after_staging_leaves_its_two_staged_objects_and_swept_the_first_upload(self):
        data = f"{iam.STAGING}{SECOND}/{NAME}"
        good = dict(first=FIRST, second=SECOND, uploads=[], staged=[data, data + ".rejects.jsonl"], settled=[])
        self.assertEqual(held(iam.after_staging_verdicts(**good)), [])
        for second in (FIRST, None):  # the killed run's lease never taken over
            self.assertIn(f"crash after-staging: a new run ({second}) took over the expired lease of {FIRST}",
                          held(iam.after_staging_verdicts(**dict(good, second=second))))
        self.assertEqual(len(held(iam.after_staging_verdicts(**dict(good, uploads=[f"{iam.STAGING}{FIRST}/{NAME}"])))),
                         1, "the crashed run's upload not swept")
        self.assertEqual(len(held(iam.after_staging_verdicts(**dict(good, staged=[data])))), 1,
                         "the quarantine not staged")
        self.assertEqual(len(held(iam.after_staging_verdicts(
            **dict(good, staged=good["staged"] + [f"{iam.STAGING}{FIRST}/{NAME}"])))), 2,
            "the first run's data staged too")
        self.assertEqual(len(held(iam.after_staging_verdicts(**dict(good, settled=["lake/checkpoints/x"])))), 1,
                         "something settled")

    def test_denials_are_the_codes_moto_answers(self):
        for code in ("AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"):
            self.assertIn(code, iam.DENIAL_CODES)
        self.assertNotIn("NoSuchKey", iam.DENIAL_CODES)
        self.assertNotIn("NoSuchBucket", iam.DENIAL_CODES)


if __name__ == "__main__":
    unittest.main()
