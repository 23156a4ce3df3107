"""Unit tests of the IAM assertions of scripts/test-infra: the policies rendered as
terraform renders them (landing_test/infra/policies.py) and the verdicts of the moto
scenario on what each step left behind (landing_test/programs/iam_scenario.py), each
shown to catch the failure it is there for. Offline (no moto, no boto3), standard
library only.

    python3 -m unittest discover -s scripts/tests
"""

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
        self.assertTrue(cfg["refused_input"].endswith(iam.REFUSED), "the scenario refuses the input it names")

    def test_the_scenario_inputs_do_what_each_step_needs(self):
        """The input has exactly one line that is not JSON (one reject, under the cap
        of 1); the refused input has a prohibited field, and without it is landable."""
        cfg = policies.iam_config("in", "lake", "other")
        data = Path(cfg["input"]).read_bytes()
        clean = iam.without_rejects(data)
        self.assertEqual(len(clean.splitlines()), len(data.splitlines()) - 1)
        refused = Path(cfg["refused_input"]).read_bytes()
        self.assertIn(b'"email"', refused)
        fixed = iam.without_field(refused, "email")
        self.assertNotIn(b'"email"', fixed)
        self.assertEqual(len(fixed.splitlines()), len(refused.splitlines()))

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
            "an unconditional Deny": {"Sid": "D", "Effect": "Deny", "Action": ["s3:PutObject"],
                                      "Resource": ["arn:aws:s3:::b/lake/raw/x"]},
        }
        for what, statement in cases.items():
            self.assertTrue(policies.grant_problems("p", {"Statement": [statement]}, ("lake/",)), what)
        guard = dict(cases["an unconditional Deny"], Condition={"Null": {"s3:if-none-match": "true"}})
        self.assertEqual(policies.grant_problems("p", {"Statement": [guard]}, ("lake/",)), [])

    def test_iam_globs(self):
        lake = "arn:aws:s3:::b/lake/raw/"
        for pattern in ("*", "arn:aws:s3:::b/*", "arn:aws:s3:::b/lake/*", "arn:aws:s3:::b/lake/raw/*",
                        "arn:aws:s3:::b/lake/raw/progress/*", "arn:aws:s3:::b/lake/r?w/*", "arn:aws:s3:::*/lake/raw/*",
                        "arn:aws:s3:::b/lake/ra*", "arn:aws:s3:::b/*/raw/x.jsonl", "arn:*:s3:::b/lake/raw/"):
            self.assertTrue(policies.glob_covers_some(pattern, lake), pattern)
        for pattern in ("arn:aws:s3:::b/lake/staging/*", "arn:aws:s3:::b/lake/raw", "arn:aws:s3:::b",
                        "arn:aws:s3:::other/lake/*", "arn:aws:s3:::b/lake/rawx/*", "arn:aws:s3:::b/elsewhere/*"):
            self.assertFalse(policies.glob_covers_some(pattern, lake), pattern)
        self.assertTrue(policies.glob_covers_all("arn:aws:s3:::b/lake/*", lake))
        self.assertTrue(policies.glob_covers_all("arn:aws:s3:::b/lake/raw/**", lake))
        self.assertFalse(policies.glob_covers_all("arn:aws:s3:::b/lake/raw/progress/*", lake))
        self.assertFalse(policies.glob_covers_all("arn:aws:s3:::b/lake/raw/", lake), "only the folder marker")
        self.assertTrue(policies.glob_matches("s3:delete*", "s3:deleteobject"))
        self.assertFalse(policies.glob_matches("s3:delete", "s3:deleteobject"))

    def test_deletes_that_reach_raw_are_caught(self):
        """A statement granting DeleteObject (or a version delete, or a wildcard that
        takes them in) on a resource that covers any key under raw/ (or checkpoints/,
        locks/, runs/) is a problem; deletes confined to other zones are not."""
        arn = "arn:aws:s3:::lake-b/lake"
        stmt = {"Sid": "S", "Effect": "Allow", "Action": ["s3:DeleteObject"], "Resource": [f"{arn}/staging/*"]}
        check = lambda s: policies.delete_problems("job.json", {"Statement": [s]}, "lake-b", "lake")  # noqa: E731
        self.assertEqual(check(stmt), [])
        for ok in ({"Resource": [f"{arn}/quarantine/*", f"{arn}/drills/*"]},
                   {"Action": ["s3:PutObject", "s3:GetObject"], "Resource": "*"},
                   {"Effect": "Deny", "Resource": "*"},
                   {"Resource": "arn:aws:s3:::other-bucket/lake/*"},
                   {"Action": "s3:DeleteBucket", "Resource": "*"},
                   {"NotResource": [f"{arn}/*"]}):
            self.assertEqual(check(dict(stmt, **ok)), [], ok)
        bad_cases = {
            "the lake prefix": {"Resource": [f"{arn}/*"]},
            "raw/ itself": {"Resource": [f"{arn}/raw/*"]},
            "one product under raw/": {"Resource": f"{arn}/raw/progress/*"},
            "the bucket": {"Resource": ["arn:aws:s3:::lake-b/*"]},
            "every resource": {"Resource": "*"},
            "a ? wildcard": {"Resource": [f"{arn}/r?w/*"]},
            "among others": {"Resource": [f"{arn}/staging/*", f"{arn}/*"]},
            "s3:*": {"Action": ["s3:*"], "Resource": [f"{arn}/*"]},
            "s3:Delete*": {"Action": "s3:Delete*", "Resource": [f"{arn}/*"]},
            "*": {"Action": "*", "Resource": [f"{arn}/*"]},
            "another case": {"Action": ["S3:deleteobject"], "Resource": [f"{arn}/*"]},
            "a version delete": {"Action": ["s3:DeleteObjectVersion"], "Resource": [f"{arn}/*"]},
            "NotAction without the delete": {"Action": None, "NotAction": ["s3:GetObject"], "Resource": [f"{arn}/*"]},
            "NotResource missing raw/": {"Resource": None, "NotResource": [f"{arn}/staging/*"]},
        }
        for what, change in bad_cases.items():
            s = {k: v for k, v in dict(stmt, **change).items() if v is not None}
            self.assertTrue(any("under raw/" in p for p in check(s)), what)
        for zone in ("checkpoints", "locks", "runs"):
            self.assertTrue(check(dict(stmt, Resource=f"{arn}/{zone}/*")), zone)
        s = {"Effect": "Allow", "NotAction": ["s3:Delete*"], "Resource": "*"}
        self.assertEqual(check(s), [], "NotAction that leaves the deletes out")

    def test_the_policy_before_issue_25_is_caught(self):
        """The job's lake grant as it was: every action on the whole lake prefix."""
        old = {"Statement": [{"Sid": "LakeObjects", "Effect": "Allow", "Action": [
            "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": ["arn:aws:s3:::b/lake/*"]}]}
        problems = policies.delete_problems("job.json", old, "b", "lake")
        self.assertEqual([p.split(" under ")[1].split("/")[0] for p in problems],
                         ["raw", "checkpoints", "locks", "runs"])

    def test_the_repository_policies_delete_nothing_readers_or_the_job_depend_on(self):
        vals = policies.policy_values("in", "lake-b", "lake", "progress")
        for name in ("job.json", "reader.json"):
            doc = json.loads(policies.render((ROOT / "terraform" / "policies" / name).read_text(), vals))
            self.assertEqual(policies.delete_problems(name, doc, "lake-b", "lake"), [], name)

    def test_the_job_policy_has_one_statement_per_zone(self):
        """Each lake zone in its own statement, with exactly the actions the code
        performs there (terraform/iam.tf names the code path of each Sid)."""
        vals = policies.policy_values("in", "lake-b", "lake", "progress")
        doc = json.loads(policies.render((ROOT / "terraform" / "policies" / "job.json").read_text(), vals))
        zones = {}
        for s in doc["Statement"]:
            if s["Effect"] != "Allow":
                continue
            for r in s["Resource"]:
                if r.startswith("arn:aws:s3:::lake-b/lake/"):
                    zones[r.removeprefix("arn:aws:s3:::lake-b/lake/")] = sorted(s["Action"])
        get, put, delete, abort = "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"
        self.assertEqual(zones, {
            "staging/*": sorted([get, put, delete, abort]),
            "raw/*": sorted([get, put, abort]),
            "quarantine/*": sorted([get, put, delete, abort]),
            "checkpoints/*": sorted([get, put]),
            "locks/*": sorted([get, put]),
            "runs/*": sorted([get, put]),
            "drills/*": sorted([get, put, delete, abort]),
        })
        iam_tf = (ROOT / "terraform" / "iam.tf").read_text()
        for s in doc["Statement"]:
            self.assertIn(f"#   {s['Sid']} ", iam_tf, f"terraform/iam.tf says which code path uses {s['Sid']}")

    def test_the_job_cannot_overwrite_a_commit_log_entry(self):
        """A PutObject without If-None-Match on an entry or snapshot is denied (AWS
        evaluates s3:if-none-match; moto cannot, so the scenario runs without it);
        data files and the log's hint stay writable."""
        vals = policies.policy_values("in", "lake-b", "lake", "progress")
        doc = json.loads(policies.render((ROOT / "terraform" / "policies" / "job.json").read_text(), vals))
        denies = [s for s in doc["Statement"] if s["Effect"] == "Deny"]
        self.assertEqual(denies, [{
            "Sid": "CommitLogCreateOnly",
            "Effect": "Deny",
            "Action": ["s3:PutObject"],
            "Resource": ["arn:aws:s3:::lake-b/lake/raw/*/_landing_log/*.json"],
            "Condition": {"Null": {"s3:if-none-match": "true"}},
        }])
        pattern = denies[0]["Resource"][0].removeprefix("arn:aws:s3:::")
        for key, covered in [
            ("lake-b/lake/raw/progress/_landing_log/00000000000000000001.json", True),
            ("lake-b/lake/raw/enrollment/_landing_log/_snapshots/00000000000000001000.json", True),
            ("lake-b/lake/raw/progress/_landing_log/_last", False),
            ("lake-b/lake/raw/progress/progress-2026-03-02.jsonl", False),
            ("lake-b/lake/raw/progress/day.json", False),
        ]:
            self.assertEqual(policies.glob_matches(pattern, key), covered, key)
        stripped, dropped = policies.moto_evaluable(json.dumps(doc))
        self.assertEqual(dropped, ["CommitLogCreateOnly"])
        self.assertEqual(len(json.loads(stripped)["Statement"]), len(doc["Statement"]) - 1)

    def test_every_workload_runs_as_the_trusted_service_account(self):
        trust = json.loads(policies.render((ROOT / "terraform" / "policies" / "job-trust.json").read_text(),
                                           policies.policy_values("in", "lake")))
        subjects = policies.trusted_subjects(trust)
        self.assertEqual(subjects, ["system:serviceaccount:landing:landing"])
        good = [("CronJob/landing-nightly", "landing", "landing"), ("Job/landing-backfill", "landing", "landing")]
        self.assertEqual(policies.workload_identity_problems(subjects, good), [])
        for bad in (("Job/landing-backfill", "landing", "backfill"), ("Job/landing-backfill", "default", "landing")):
            self.assertEqual(len(policies.workload_identity_problems(subjects, good + [bad])), 1, bad)

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

    def test_mid_stream_leaves_only_its_lease(self):
        upload = f"{iam.STAGING}{FIRST}/{NAME}"
        good = dict(run_id=FIRST, locks=[iam.LOCK], uploads=[], staged=[], settled=[])
        self.assertEqual(held(iam.mid_stream_verdicts(**good)), [])
        for what, change in {
            "no lease taken": {"locks": []},
            "a multipart upload for an output within one part": {"uploads": [upload]},
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

    def test_publish_and_republish(self):
        q = [iam.QUARANTINE]
        ck = [iam.CHECKPOINT]
        good = {"action": "published", "rejected_rows": 1}
        log = [iam.LOG + "00000000000000000001.json", iam.LOG + "_last"]
        self.assertEqual(held(iam.publish_verdicts(0, good, "", [iam.RAW], log, q, ck)), [])
        self.assertEqual(len(held(iam.publish_verdicts(1, {}, "AccessDenied", [], [], [], []))), 5)
        self.assertEqual(len(held(iam.publish_verdicts(0, good, "", [iam.RAW], log, [], ck))), 1, "no quarantine")
        self.assertEqual(len(held(iam.publish_verdicts(0, good, "", [iam.RAW], log[1:], q, ck))), 1,
                         "no entry (its create denied)")
        self.assertEqual(len(held(iam.publish_verdicts(0, good, "", [iam.RAW], log[:1], q, ck))), 1, "no hint")
        rep = {"action": "published", "rejected_rows": 0}
        self.assertEqual(held(iam.republish_verdicts(0, rep, "", [], '"a"', '"b"')), [])
        self.assertEqual(len(held(iam.republish_verdicts(0, rep, "", q, '"a"', '"b"'))), 1,
                         "the old quarantine left behind (its delete denied)")
        self.assertEqual(len(held(iam.republish_verdicts(0, rep, "", [], '"a"', '"a"'))), 1, "raw/ not replaced")
        self.assertEqual(len(held(iam.republish_verdicts(0, dict(rep, rejected_rows=1), "", [], "a", "b"))), 1)

    def test_feed_as_the_reader(self):
        day = f"raw/progress/{NAME}"
        new = f"raw/progress/{iam.INBOX_NEW}"
        entries = [{"sequence": 1, "key": day, "published_etag": '"a"'},
                   {"sequence": 2, "key": day, "published_etag": '"b"'},
                   {"sequence": 3, "key": new, "published_etag": '"c"'}]
        out = "\n".join(json.dumps(x) for x in entries + [{"cursor": 3}])
        published = [NAME, NAME, iam.INBOX_NEW]
        etags = {iam.RAW: '"b"', f"lake/{new}": '"c"'}
        self.assertEqual(held(iam.feed_verdicts(0, out, "", published, etags)), [])
        self.assertEqual(len(held(iam.feed_verdicts(1, "", "AccessDenied", published, etags))), 4)
        gap = "\n".join(json.dumps(x) for x in [entries[0], entries[2], {"cursor": 3}])
        self.assertEqual(len(held(iam.feed_verdicts(0, gap, "", published, etags))), 2,
                         "a gap (the missing entry was also the day's latest)")
        self.assertEqual(len(held(iam.feed_verdicts(0, out, "", published, dict(etags, **{iam.RAW: '"a"'})))), 1,
                         "the latest entry names an older version")
        short = "\n".join(json.dumps(x) for x in entries + [{"cursor": 2}])
        self.assertEqual(len(held(iam.feed_verdicts(0, short, "", published, etags))), 1, "a wrong cursor")

    def test_inbox_run(self):
        out = "\n".join(json.dumps(x) for x in (
            {"input": f"s3://in/inbox/{NAME}", "action": "skipped"},
            {"input": f"s3://in/inbox/{iam.INBOX_NEW}", "action": "published"},
            {"inbox": "s3://in/inbox", "totals": {"inputs": 2, "published": 1, "skipped": 1}}))
        raw = [iam.RAW, f"lake/raw/progress/{iam.INBOX_NEW}"]
        self.assertEqual(held(iam.inbox_verdicts(0, out, "", raw)), [])
        self.assertEqual(len(held(iam.inbox_verdicts(0, out, "", [iam.RAW]))), 1)
        self.assertTrue(held(iam.inbox_verdicts(1, out.replace('"published"', '"failed"'), "", raw)))
        self.assertEqual(len(held(iam.inbox_verdicts(0, out.replace('"action": "skipped"', '"action": "published"'),
                                                     "", raw))), 1, "the landed input published again")

    def test_refusal(self):
        s = {"action": "refused", "reason": {"kind": "prohibited_field", "field": "email"}}
        rec = [f"lake/runs/progress/{iam.REFUSED}/r.json"]
        self.assertEqual(held(iam.refusal_verdicts(65, s, [], [], [], rec)), [])
        self.assertEqual(len(held(iam.refusal_verdicts(65, s, [], [], ["lake/staging/progress/r/x"], rec))), 1,
                         "its upload not aborted")
        self.assertEqual(len(held(iam.refusal_verdicts(65, s, [], [], [], []))), 1, "no run record")
        self.assertEqual(len(held(iam.refusal_verdicts(65, dict(s, reason={"kind": "reject_cap"}), [], [], [], rec))),
                         1, "refused for another reason")
        self.assertEqual(len(held(iam.refusal_verdicts(1, {}, [], [], [], rec))), 2)

    def test_status_and_verify(self):
        report = {"inputs": [{"input_name": NAME, "intact": True}, {"input_name": iam.INBOX_NEW, "intact": True}],
                  "leases": [], "leftovers": []}
        hist = {"runs": [{"action": "skipped"}, {"action": "published"}]}
        self.assertEqual(held(iam.status_verdicts(0, report, 0, hist)), [])
        self.assertEqual(len(held(iam.status_verdicts(0, dict(report, leases=[{"holder": "r"}]), 0, hist))), 1)
        self.assertEqual(len(held(iam.status_verdicts(0, report, 1, {}))), 1)
        self.assertEqual(len(held(iam.status_verdicts(1, {}, 0, hist))), 3)
        ok = {"checked": 2, "findings": 0, "deep": True}
        self.assertEqual(held(iam.verify_verdicts(0, ok, True)), [])
        self.assertTrue(held(iam.verify_verdicts(0, ok, False)), "not the deep verify asked for")
        self.assertTrue(held(iam.verify_verdicts(1, dict(ok, findings=1), True)))

    def test_drill(self):
        rows = [{"scenario": s, "held": True} for s in iam.DRILL_SCENARIOS]
        report = {"passed": True, "rows": rows}
        self.assertEqual(held(iam.drill_verdicts(0, report, "", [], [])), [])
        self.assertEqual(len(held(iam.drill_verdicts(0, report, "", ["lake/drills/d/x"], []))), 1,
                         "scratch left behind (its deletes denied)")
        self.assertEqual(len(held(iam.drill_verdicts(0, dict(report, rows=rows[:3]), "", [], []))), 1)
        broken = dict(report, rows=rows[:-1] + [{"scenario": rows[-1]["scenario"], "held": False}])
        self.assertEqual(len(held(iam.drill_verdicts(0, broken, "", [], []))), 1)
        self.assertEqual(len(held(iam.drill_verdicts(1, {}, "AccessDenied", [], []))), 3)

    def test_the_job_denials_cover_what_issue_25_requires(self):
        denials = iam.job_denials("in", "lake", "other")
        by = [(method, kw["Bucket"], kw["Key"]) for _, method, kw in denials if "Key" in kw]
        self.assertIn(("delete_object", "lake", iam.RAW), by)
        self.assertIn(("delete_object", "lake", iam.CHECKPOINT), by)
        self.assertTrue(any(m == "put_object" and b == "lake" and not k.startswith("lake/") for m, b, k in by),
                        "PutObject outside the lake prefix")
        inbox_writes = {m for m, b, k in by if b == "in"}
        self.assertTrue({"put_object", "delete_object", "copy_object", "create_multipart_upload"} <= inbox_writes)
        self.assertEqual(len({what for what, _, _ in denials}), len(denials), "each denial named once")

    def test_a_batch_delete_must_delete_nothing(self):
        keys = [iam.RAW, iam.CHECKPOINT]
        refused = {"Errors": [{"Key": k, "Code": "AccessDenied"} for k in keys]}
        self.assertEqual(held(iam.batch_delete_verdicts("x", refused, keys)), [])
        self.assertTrue(held(iam.batch_delete_verdicts("x", {"Deleted": [{"Key": iam.RAW}]}, keys)))
        self.assertTrue(held(iam.batch_delete_verdicts("x", {"Errors": refused["Errors"][:1]}, keys)))

    def test_denials_are_the_codes_moto_answers(self):
        for code in ("AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"):
            self.assertIn(code, iam.DENIAL_CODES)
        self.assertNotIn("NoSuchKey", iam.DENIAL_CODES)
        self.assertNotIn("NoSuchBucket", iam.DENIAL_CODES)


if __name__ == "__main__":
    unittest.main()
