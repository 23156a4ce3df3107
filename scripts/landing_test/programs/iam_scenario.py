"""The `iam` check of scripts/test-infra, run by the infra venv's interpreter (boto3)
against a moto server of its own:

    python iam_scenario.py ENDPOINT BINARY WORKDIR <CONFIG_JSON

CONFIG_JSON: the buckets (inbox, lake, other), the inputs (one with a rejected line,
one with a prohibited field), and the rendered policies of the admin, the job and the
reader. With only its policy (terraform/policies/job.json) the job:
- lands the input through two drill crashes (mid-stream, after staging) and their
  lease takeovers, publishing with UploadPartCopy into raw/ and quarantine/;
- skips it unchanged; fails cleanly against a lake outside its prefix;
- republishes it without rejects, which deletes the old quarantine;
- lands the inbox (`run --inbox`: one new input published, one skipped);
- refuses an input with a prohibited field;
- reads the lake: `status`, `status --history`, `verify`, `verify --deep`;
- passes `landing drill`, which leaves nothing under drills/.
Then the job's denials (no delete under raw/, checkpoints/, locks/, runs/; no write
outside the lake prefix; no write to the inbox) and the reader's. Prints every
assertion as [[held, what], ...] on its last line.

The verdicts on what a step left behind are plain functions of what was listed or
printed, so that they are unit-tested without a server (scripts/tests/test_iam.py);
boto3 is imported by main() only.
"""

import json
import os
import signal
import subprocess
import sys
import urllib.request

NAME = "progress-2026-03-02.jsonl"
# Landed by the inbox run (the refused input without its prohibited field).
INBOX_NEW = "progress-2026-03-04.jsonl"
# The refused input: examples/inbox/progress-2026-03-03.jsonl (an `email` field).
REFUSED = "progress-2026-03-03.jsonl"
LOCK = f"lake/locks/progress/{NAME}.lock"
STAGING = "lake/staging/progress/"
RAW = f"lake/raw/progress/{NAME}"
QUARANTINE = f"lake/quarantine/progress/{NAME}.rejects.jsonl"
CHECKPOINT = f"lake/checkpoints/progress/{NAME}.json"
# The commit log beside the published days (docs/interface.md § 6): numbered entries
# created with If-None-Match, and the hint of the latest number.
LOG = "lake/raw/progress/_landing_log/"
LOG_LAST = LOG + "_last"


def log_entry(sequence):
    return f"{LOG}{sequence:020}.json"
DRILLS = "lake/drills/"
# What `landing drill` reports on S3, in order (tests/it/drill.rs).
DRILL_SCENARIOS = [
    "crash mid-stream", "crash after-part:1", "crash after-staging", "crash after-publish",
    "crash after-checkpoint", "store: create-if-absent twice", "store: If-Match wrong ETag",
    "store: conditional copy", "store: staged bytes hidden", "refusal (prohibited field)",
    "unchanged rerun",
]
# What S3 (moto) answers a request that IAM refuses, or that is signed with a wrong key.
DENIAL_CODES = ("AccessDenied", "403", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId")


def last_summary(stdout):
    """The job's summary: the last line of its stdout that is a JSON object."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {}


def json_lines(stdout):
    """Every line of stdout that is a JSON object, in order."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def without_rejects(data):
    """The input's lines that parse as JSON objects: the same input with its
    malformed line dropped, so that a republish has no rejects."""
    keep = []
    for line in data.splitlines():
        try:
            if isinstance(json.loads(line), dict):
                keep.append(line)
        except ValueError:
            pass
    return b"".join(line + b"\n" for line in keep)


def without_field(data, field):
    """Every line of a JSON Lines input with `field` dropped."""
    out = []
    for line in data.splitlines():
        d = json.loads(line)
        d.pop(field, None)
        out.append(json.dumps(d, separators=(",", ":")).encode() + b"\n")
    return b"".join(out)


def crash_verdicts(point, returncode, stderr, record):
    """A drill crash at `point` (`--crash-at`): the hook prints its marker, then
    SIGKILLs its own process; anything else (a denial, an error exit, a panic's
    abort) means the run never reached the point. The killed run's lease is left
    held (`record`, as read back)."""
    return [
        (returncode == -signal.SIGKILL,
         f"crash {point}: the run died by SIGKILL (exit {returncode}): {stderr[-1500:]}"),
        (f"landing: drill crash at {point}" in stderr.splitlines(),
         f"crash {point}: the hook's marker on stderr (the crash point was reached)"),
        (bool(record is not None and not record.get("released") and record.get("run_id")),
         f"crash {point}: the killed run's lease is left held: {record}"),
    ]


def mid_stream_verdicts(run_id, locks, uploads, staged, settled):
    """After the crash mid-stream of run `run_id`: `locks` (keys under lake/locks/),
    `uploads` (incomplete multipart uploads under lake/staging/), `staged` (objects
    under lake/staging/) and `settled` (objects under raw/, quarantine/, checkpoints/)."""
    # An output within one part is staged by one PutObject at its end (a multipart
    # upload starts only once a part is full); the hook fires after the first write,
    # which only buffers (the sample is far below a part): nothing reached staging.
    # (`run_id` names the run in the message; the drill's after-part:1 crash and the
    # UploadPartCopy publish still use multipart requests under the job's policy.)
    return [
        (LOCK in locks, "crash mid-stream: the job took its lease (PutObject under locks/)"),
        (uploads == [],
         f"crash mid-stream: no multipart upload (run {run_id}'s output is within one part): {uploads}"),
        (staged == [], "crash mid-stream: no complete staging object"),
        (settled == [], "crash mid-stream: nothing in raw/, quarantine/ or checkpoints/"),
    ]


def after_staging_verdicts(first, second, uploads, staged, settled):
    """After the crash after staging of run `second`, which took over the expired lease
    of the run `first` killed mid-stream (the arguments as in mid_stream_verdicts)."""
    # Staging completed: the data and, for the sample's one malformed line, the
    # quarantine, both under the run's folder; the first run's upload was swept by this
    # run (sweep age 0) before it staged.
    data = f"{STAGING}{second}/{NAME}"
    return [
        (bool(second) and second != first,
         f"crash after-staging: a new run ({second}) took over the expired lease of {first}"),
        ([k for k in staged if k.endswith(f"/{NAME}")] == [data],
         f"crash after-staging: exactly one staged data object, the killed run's: {staged}"),
        (sorted(staged) == sorted([data, f"{data}.rejects.jsonl"]),
         f"crash after-staging: nothing staged but its data and quarantine objects: {staged}"),
        (uploads == [],
         f"crash after-staging: no incomplete upload (the crashed mid-stream one swept): {uploads}"),
        (settled == [], "crash after-staging: nothing in raw/, quarantine/ or checkpoints/"),
    ]


def publish_verdicts(returncode, summary, stderr, raw, log, quarantine, checkpoints):
    """The publish after the crashes, promoted with UploadPartCopy (a multipart
    upload on the raw/ and quarantine/ names): `raw`, `quarantine`, `checkpoints` are
    the keys listed under each zone's product folder (`raw` without the commit log),
    `log` those under the log's folder."""
    return [
        (returncode == 0 and summary.get("action") == "published",
         f"the job with only its policy published (exit {returncode}, {summary.get('action')}): {stderr[-1500:]}"),
        (raw == [RAW], f"published under raw/ (UploadPartCopy into raw/): {raw}"),
        (log == [log_entry(1), LOG_LAST],
         f"its commit log entry created (a conditional PutObject under raw/), the first: {log}"),
        (quarantine == [QUARANTINE] and summary.get("rejected_rows") == 1,
         f"its rejected line quarantined (UploadPartCopy into quarantine/): {quarantine}"),
        (checkpoints == [CHECKPOINT], f"checkpoint written: {checkpoints}"),
    ]


def republish_verdicts(returncode, summary, stderr, quarantine, raw_etag_before, raw_etag_after):
    """A republish of the input without its malformed line (CopyObject into raw/):
    the old quarantine, which the new checkpoint no longer names, is deleted (a
    failure to delete it is only logged by the job, so the listing is the proof)."""
    return [
        (returncode == 0 and summary.get("action") == "published" and summary.get("rejected_rows") == 0,
         f"republish without rejects (exit {returncode}, {summary.get('action')}, "
         f"{summary.get('rejected_rows')} rejected): {stderr[-1500:]}"),
        (quarantine == [], f"the republish deleted the old quarantine (DeleteObject under quarantine/): {quarantine}"),
        (bool(raw_etag_after) and raw_etag_after != raw_etag_before,
         f"the republish replaced the raw/ object (CopyObject over it): {raw_etag_before} -> {raw_etag_after}"),
    ]


def inbox_verdicts(returncode, stdout, stderr, raw):
    """`landing run --inbox` over NAME (landed) and INBOX_NEW (new)."""
    lines = json_lines(stdout)
    actions = {line["input"].rsplit("/", 1)[-1]: line.get("action") for line in lines if "input" in line}
    totals = next((line["totals"] for line in lines if "totals" in line), {})
    return [
        (returncode == 0, f"inbox run exit 0 (exit {returncode}): {stderr[-1500:]}"),
        (actions == {NAME: "skipped", INBOX_NEW: "published"},
         f"inbox run: the new input published, the landed one skipped: {actions}"),
        (totals.get("inputs") == 2 and totals.get("published") == 1 and totals.get("skipped") == 1,
         f"inbox run totals: {totals}"),
        (f"lake/raw/progress/{INBOX_NEW}" in raw, f"inbox run published under raw/: {raw}"),
    ]


def feed_verdicts(returncode, stdout, stderr, published, etags):
    """`landing feed --since 0` with the reader's credentials: one entry per publish
    of the scenario (`published`: the inputs in publish order), numbered from 1, each
    naming its object's key, then the cursor; the latest entry of each key names the
    version the object has now (`etags`: key to ETag, as listed)."""
    lines = json_lines(stdout)
    entries = [line for line in lines if "sequence" in line]
    cursor = lines[-1] if lines else {}
    latest = {e["key"]: e.get("published_etag") for e in entries}
    now = {key.removeprefix("lake/"): etag for key, etag in etags.items()}
    return [
        (returncode == 0, f"feed as the reader: exit 0 (exit {returncode}): {stderr[-1500:]}"),
        ([e["sequence"] for e in entries] == list(range(1, len(published) + 1))
         and [e["key"] for e in entries] == [f"raw/progress/{n}" for n in published],
         f"feed: one entry per publish, in order: {[(e['sequence'], e['key']) for e in entries]}"),
        (cursor == {"cursor": len(published)}, f"feed: the cursor after the last entry: {cursor}"),
        (latest == now, f"feed: each key's latest entry names its object's version: {latest} vs {now}"),
    ]


def refusal_verdicts(returncode, summary, settled, staged, uploads, run_records):
    """A run of REFUSED (a prohibited field): exit 65, nothing settled for it (raw/,
    quarantine/, checkpoints/), its staging aborted, its run recorded under runs/."""
    return [
        (returncode == 65 and summary.get("action") == "refused",
         f"refusal: exit 65, action refused (exit {returncode}, {summary.get('action')})"),
        ((summary.get("reason") or {}).get("kind") == "prohibited_field",
         f"refusal: for the prohibited field: {summary.get('reason')}"),
        (settled == [], f"refusal: nothing under raw/, quarantine/ or checkpoints/ for it: {settled}"),
        (staged == [] and uploads == [],
         f"refusal: its staging aborted (AbortMultipartUpload under staging/): {staged} {uploads}"),
        (len(run_records) == 1, f"refusal: its run recorded under runs/: {run_records}"),
    ]


def status_verdicts(returncode, report, history_rc, history):
    """`landing status --json` and `landing status --history NAME --json`."""
    names = sorted(i.get("input_name") for i in report.get("inputs", []))
    actions = [r.get("action") for r in history.get("runs", [])]
    return [
        (returncode == 0, f"status exit 0 (exit {returncode})"),
        (names == sorted([NAME, INBOX_NEW]) and all(i.get("intact") for i in report.get("inputs", [])),
         f"status: both landed inputs, intact: {report.get('inputs')}"),
        (report.get("leases") == [] and report.get("leftovers") == [],
         f"status: no lease held, no staging leftover: {report.get('leases')} {report.get('leftovers')}"),
        (history_rc == 0 and "published" in actions and "skipped" in actions,
         f"status --history: the input's run records (exit {history_rc}): {actions}"),
    ]


def verify_verdicts(returncode, report, deep):
    """`landing verify [--deep] --json` over the two landed inputs."""
    what = "verify --deep" if deep else "verify"
    return [
        (returncode == 0 and report.get("findings") == 0 and report.get("checked") == 2
         and report.get("deep") is deep,
         f"{what}: exit 0, 2 checked, no finding (exit {returncode}): {report}"),
    ]


def drill_verdicts(returncode, report, stderr, left, uploads):
    """`landing drill --json` with the job's credentials; `left` and `uploads`: the
    keys and incomplete uploads under drills/ afterwards."""
    rows = report.get("rows", [])
    return [
        (returncode == 0 and report.get("passed") is True,
         f"drill: exit 0, passed (exit {returncode}, passed {report.get('passed')}): {stderr[-1500:]}"),
        ([r.get("scenario") for r in rows] == DRILL_SCENARIOS,
         f"drill: every scenario drilled: {[r.get('scenario') for r in rows]}"),
        (bool(rows) and all(r.get("held") for r in rows),
         f"drill: every invariant held: {[r for r in rows if not r.get('held')]}"),
        (left == [] and uploads == [], f"drill: nothing left under drills/: {left} {uploads}"),
    ]


def job_denials(inbox, lake, other):
    """(what, S3 client method, arguments): requests the job's credentials must be
    refused. The raw/, checkpoint and inbox objects named exist."""
    return [
        ("job: DeleteObject of a published raw/ object denied", "delete_object", {"Bucket": lake, "Key": RAW}),
        ("job: DeleteObject of a checkpoint denied", "delete_object", {"Bucket": lake, "Key": CHECKPOINT}),
        ("job: DeleteObject of a lease denied", "delete_object", {"Bucket": lake, "Key": LOCK}),
        ("job: DeleteObject under runs/ denied", "delete_object",
         {"Bucket": lake, "Key": f"lake/runs/progress/{NAME}/x.json"}),
        ("job: DeleteObject outside lake/ denied", "delete_object", {"Bucket": lake, "Key": "outside/secret.txt"}),
        ("job: GetObject outside lake/ denied", "get_object", {"Bucket": lake, "Key": "outside/secret.txt"}),
        ("job: PutObject outside lake/ denied", "put_object", {"Bucket": lake, "Key": "outside/x", "Body": b"x"}),
        ("job: PutObject at the bucket root, beside lake/, denied", "put_object",
         {"Bucket": lake, "Key": "lake-raw.jsonl", "Body": b"x"}),
        ("job: CreateMultipartUpload outside lake/ denied", "create_multipart_upload",
         {"Bucket": lake, "Key": "outside/m"}),
        ("job: CopyObject to outside lake/ denied", "copy_object",
         {"Bucket": lake, "Key": "outside/c", "CopySource": {"Bucket": lake, "Key": RAW}}),
        ("job: PutObject into another bucket denied", "put_object", {"Bucket": other, "Key": "lake/x", "Body": b"x"}),
        ("job: another bucket's objects denied", "get_object", {"Bucket": other, "Key": "lake/x.txt"}),
        ("job: listing another bucket denied", "list_objects_v2", {"Bucket": other}),
        ("job: PutObject over an inbox file denied", "put_object",
         {"Bucket": inbox, "Key": f"inbox/{NAME}", "Body": b"x"}),
        ("job: PutObject of a new inbox file denied", "put_object",
         {"Bucket": inbox, "Key": "inbox/progress-2099-01-01.jsonl", "Body": b"x"}),
        ("job: DeleteObject from the inbox denied", "delete_object", {"Bucket": inbox, "Key": f"inbox/{NAME}"}),
        ("job: CopyObject into the inbox denied", "copy_object",
         {"Bucket": inbox, "Key": "inbox/copy.jsonl", "CopySource": {"Bucket": inbox, "Key": f"inbox/{NAME}"}}),
        ("job: CreateMultipartUpload in the inbox denied", "create_multipart_upload",
         {"Bucket": inbox, "Key": "inbox/m.jsonl"}),
        ("job: bucket configuration denied", "put_bucket_policy", {"Bucket": lake, "Policy": "{}"}),
    ]


def batch_delete_verdicts(what, answer, keys):
    """A DeleteObjects (batch) of `keys` by the job: S3 authorises each key as
    s3:DeleteObject and answers 200 with per-key errors, so nothing may be listed as
    deleted and every key must come back AccessDenied. (moto 5.2.5 first authorises
    the batch against the bucket's ARN, so on moto this catches a delete granted on
    the bucket or `*`; a delete scoped to keys is what the single deletes and the
    static check of policies.py catch.)"""
    deleted = [d.get("Key") for d in answer.get("Deleted", [])]
    errors = {e.get("Key"): e.get("Code") for e in answer.get("Errors", [])}
    return [
        (deleted == [] and all(errors.get(k) == "AccessDenied" for k in keys),
         f"{what}: DeleteObjects deleted nothing (deleted {deleted}, errors {errors})"),
    ]


def main():
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    endpoint, binary, work = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = json.loads(sys.stdin.read())
    for k in [k for k in os.environ if k.startswith(("AWS_", "LANDING_"))]:
        del os.environ[k]
    INBOX, LAKE, OTHER = cfg["inbox"], cfg["lake"], cfg["other"]
    conf = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})

    def client(svc, ak="bootstrap", sk="bootstrap"):
        return boto3.client(svc, endpoint_url=endpoint, region_name="us-east-1",
                            aws_access_key_id=ak, aws_secret_access_key=sk, config=conf)

    results = []

    def ok(cond, what):
        results.append((bool(cond), what))

    def record(verdicts):
        for cond, what in verdicts:
            ok(cond, what)

    iam, s3 = client("iam"), client("s3")
    for b in (INBOX, LAKE, OTHER):
        s3.create_bucket(Bucket=b)
    keys = {}
    for user, policy in (("admin", cfg["admin_policy"]), ("job", cfg["job_policy"]),
                         ("reader", cfg["reader_policy"])):
        iam.create_user(UserName=user)
        arn = iam.create_policy(PolicyName=f"landing-{user}", PolicyDocument=policy)["Policy"]["Arn"]
        iam.attach_user_policy(UserName=user, PolicyArn=arn)
        k = iam.create_access_key(UserName=user)["AccessKey"]
        keys[user] = (k["AccessKeyId"], k["SecretAccessKey"])

    # IAM enforcement on from the next request.
    req = urllib.request.Request(endpoint + "/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req).read()

    admin = client("s3", *keys["admin"])
    job = client("s3", *keys["job"])
    reader = client("s3", *keys["reader"])
    admin.upload_file(cfg["input"], INBOX, f"inbox/{NAME}")
    admin.put_object(Bucket=LAKE, Key="outside/secret.txt", Body=b"x")
    admin.put_object(Bucket=OTHER, Key="lake/x.txt", Body=b"x")

    def denied(fn, **kw):
        try:
            fn(**kw)
            return False
        except ClientError as e:
            return e.response["Error"]["Code"] in DENIAL_CODES

    wrong = client("s3", keys["job"][0], "not-the-secret")
    ok(denied(wrong.list_objects_v2, Bucket=LAKE), "enforcement is on: a wrong secret is refused")

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work,
           "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": keys["job"][0], "AWS_SECRET_ACCESS_KEY": keys["job"][1],
           "LANDING_S3_FORCE_PATH_STYLE": "true", "LANDING_PROGRESS": "never",
           "LANDING_LOG_FORMAT": "json", "LANDING_S3_MAX_ATTEMPTS": "2",
           "LANDING_MAX_REJECTED_LINES": "1",
           # A killed holder's lease is taken over on S3 once its record stayed unchanged
           # for the TTL plus the attempt timeout of the taker's own clock: keep both
           # short (the TTL above the attempt timeout, as the job requires), and let
           # each run wait for that (7 s, polled at most every 5 s).
           "LANDING_LEASE_TTL": "5", "LANDING_S3_ATTEMPT_TIMEOUT": "2", "LANDING_LEASE_WAIT": "30"}

    def landing(*args, extra=None, drop=(), timeout=120):
        e = {k: v for k, v in env.items() if k not in drop}
        e.update(extra or {})
        return subprocess.run([binary, *args], env=e, capture_output=True, text=True, timeout=timeout)

    def land(lake=f"s3://{LAKE}/lake", crash=None, name=NAME, extra=None):
        # The drills' crash hook, a flag in every build: the process kills itself there.
        hook = ["--crash-at", crash] if crash else []
        return landing("run", "--input", f"s3://{INBOX}/inbox/{name}", "--lake", lake, *hook, extra=extra)

    def keys_under(prefix):
        return [o["Key"] for o in admin.list_objects_v2(Bucket=LAKE, Prefix=prefix).get("Contents", [])]

    def days_under(prefix):
        """The published days under `prefix`, without the commit log."""
        return [k for k in keys_under(prefix) if not k.startswith(LOG)]

    def settled():
        return keys_under("lake/raw/") + keys_under("lake/quarantine/") + keys_under("lake/checkpoints/")

    def lease_record():
        try:
            return json.loads(admin.get_object(Bucket=LAKE, Key=LOCK)["Body"].read())
        except admin.exceptions.NoSuchKey:
            return None

    def uploads_under(prefix):
        """Incomplete multipart uploads under prefix (filtered here, not by the server)."""
        ups = admin.list_multipart_uploads(Bucket=LAKE).get("Uploads", [])
        return sorted(u["Key"] for u in ups if u["Key"].startswith(prefix))

    def crash(point):
        """A drill crash at point; returns the run id of the lease it left behind."""
        p = land(crash=point)
        rec = lease_record()
        record(crash_verdicts(point, p.returncode, p.stderr, rec))
        return (rec or {}).get("run_id")

    first = crash("mid-stream")
    record(mid_stream_verdicts(first, keys_under("lake/locks/"), uploads_under("lake/staging/"),
                               keys_under("lake/staging/"), settled()))
    second = crash("after-staging")
    record(after_staging_verdicts(first, second, uploads_under("lake/staging/"),
                                  keys_under("lake/staging/"), settled()))
    # The publish, with UploadPartCopy (a multipart upload on the published names:
    # s3:PutObject on raw/ and quarantine/) instead of CopyObject.
    p = land(extra={"LANDING_S3_COPY_THRESHOLD": "0"})
    record(publish_verdicts(p.returncode, last_summary(p.stdout), p.stderr, days_under("lake/raw/progress/"),
                            keys_under(LOG), keys_under("lake/quarantine/progress/"),
                            keys_under("lake/checkpoints/progress/")))
    ok((lease_record() or {"released": True}).get("released") is True,
       "lease released (a conditional overwrite with a released record) after the run")
    ok(not keys_under("lake/staging/") and not admin.list_multipart_uploads(Bucket=LAKE).get("Uploads"),
       "the crashed runs' staging was swept with the job's own permissions")
    p = land()
    ok(p.returncode == 0 and last_summary(p.stdout).get("action") == "skipped",
       f"rerun skipped (exit {p.returncode})")
    p = land(lake=f"s3://{LAKE}/elsewhere")
    ok(p.returncode == 1, f"a run against a lake outside the job's prefix fails (exit {p.returncode})")
    ok(not keys_under("elsewhere/"), "nothing was written outside the prefix")

    # A republish without rejects (CopyObject into raw/) deletes the old quarantine.
    with open(cfg["input"], "rb") as fh:
        original = fh.read()
    admin.put_object(Bucket=INBOX, Key=f"inbox/{NAME}", Body=without_rejects(original))
    before = admin.head_object(Bucket=LAKE, Key=RAW)["ETag"]
    p = land()
    record(republish_verdicts(p.returncode, last_summary(p.stdout), p.stderr, keys_under("lake/quarantine/"),
                              before, admin.head_object(Bucket=LAKE, Key=RAW)["ETag"]))

    # The inbox run: the landed input skipped, a new one published.
    with open(cfg["refused_input"], "rb") as fh:
        refused = fh.read()
    admin.put_object(Bucket=INBOX, Key=f"inbox/{INBOX_NEW}", Body=without_field(refused, "email"))
    p = landing("run", "--inbox", f"s3://{INBOX}/inbox/", "--lake", f"s3://{LAKE}/lake", "--min-age", "0")
    record(inbox_verdicts(p.returncode, p.stdout, p.stderr, days_under("lake/raw/progress/")))

    # A refusal (prohibited field), by --input: the inbox keeps only landable inputs.
    admin.put_object(Bucket=INBOX, Key=f"inbox/{REFUSED}", Body=refused)
    p = land(name=REFUSED)
    settled_refused = [k for k in settled() if f"/{REFUSED}" in k]
    record(refusal_verdicts(p.returncode, last_summary(p.stdout), settled_refused, keys_under("lake/staging/"),
                            uploads_under("lake/"), keys_under(f"lake/runs/progress/{REFUSED}/")))
    admin.delete_object(Bucket=INBOX, Key=f"inbox/{REFUSED}")

    # Reading the lake.
    lake_url = f"s3://{LAKE}/lake"
    p = landing("status", "--lake", lake_url, "--json")
    h = landing("status", "--lake", lake_url, "--history", NAME, "--json")
    record(status_verdicts(p.returncode, last_summary(p.stdout), h.returncode, last_summary(h.stdout)))
    for deep in (False, True):
        p = landing("verify", "--lake", lake_url, "--json", *(["--deep"] if deep else []))
        record(verify_verdicts(p.returncode, last_summary(p.stdout), deep))

    # The drill against this lake with the job's credentials, at its own lease TTL and
    # timeouts (not this scenario's short ones), over the multipart path.
    p = landing("drill", "--lake", lake_url, "--size-mib", "11", "--s3-part-size-mib", "5", "--json",
                drop=("LANDING_LEASE_TTL", "LANDING_S3_ATTEMPT_TIMEOUT", "LANDING_MAX_REJECTED_LINES"),
                timeout=600)
    record(drill_verdicts(p.returncode, last_summary(p.stdout), p.stderr, keys_under(DRILLS), uploads_under(DRILLS)))

    # The job's denials.
    admin.put_object(Bucket=LAKE, Key=f"lake/runs/progress/{NAME}/x.json", Body=b"{}")
    for what, method, kw in job_denials(INBOX, LAKE, OTHER):
        ok(denied(getattr(job, method), **kw), what)
    for what, bucket, batch in (("job: raw/ and checkpoints/", LAKE, [RAW, CHECKPOINT]),
                                ("job: the inbox", INBOX, [f"inbox/{NAME}"])):
        try:
            answer = job.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch]})
        except ClientError as e:  # refused outright rather than key by key
            answer = {"Errors": [{"Key": k, "Code": e.response["Error"]["Code"]} for k in batch]}
        record(batch_delete_verdicts(what, answer, batch))

    def exists(bucket, key):
        try:
            admin.head_object(Bucket=bucket, Key=key)
            return True
        except ClientError:
            return False

    for bucket, key in ((LAKE, RAW), (LAKE, CHECKPOINT), (LAKE, LOCK), (INBOX, f"inbox/{NAME}")):
        ok(exists(bucket, key), f"after the job's denied deletes and writes, s3://{bucket}/{key} is still there")
    ok(admin.get_object(Bucket=INBOX, Key=f"inbox/{NAME}")["Body"].read() == without_rejects(original),
       "the inbox file is unchanged")
    ok(not keys_under("outside/x") and not keys_under("lake-raw.jsonl"), "nothing was written outside lake/")
    # What the job may do: list the inbox; abort its own upload under raw/ (a failed
    # UploadPartCopy promotion does).
    ok(not denied(job.list_objects_v2, Bucket=INBOX, Prefix="inbox/"), "job: listing the inbox allowed")
    up = job.create_multipart_upload(Bucket=LAKE, Key="lake/raw/progress/abort-probe")["UploadId"]
    ok(not denied(job.abort_multipart_upload, Bucket=LAKE, Key="lake/raw/progress/abort-probe", UploadId=up),
       "job: AbortMultipartUpload of its own upload under raw/ allowed")
    ok(uploads_under("lake/raw/") == [], "no incomplete upload left under raw/")

    # The reader.
    for area in ("staging", "quarantine", "checkpoints", "locks", "runs"):
        admin.put_object(Bucket=LAKE, Key=f"lake/{area}/progress/probe", Body=b"x")
    raw = f"lake/raw/progress/{NAME}"
    ok(not denied(reader.list_objects_v2, Bucket=LAKE, Prefix="lake/raw/"), "reader: list raw/ allowed")
    ok(not denied(reader.get_object, Bucket=LAKE, Key=raw), "reader: read raw/ allowed")
    for area in ("staging", "quarantine", "checkpoints", "locks", "runs"):
        ok(denied(reader.get_object, Bucket=LAKE, Key=f"lake/{area}/progress/probe"), f"reader: {area}/ denied")
    ok(denied(reader.get_object, Bucket=INBOX, Key=f"inbox/{NAME}"), "reader: inbox denied")
    ok(denied(reader.put_object, Bucket=LAKE, Key=raw, Body=b"x"), "reader: PutObject raw/ denied")
    ok(denied(reader.put_object, Bucket=LAKE, Key="lake/raw/progress/new.jsonl", Body=b"x"), "reader: new object denied")
    ok(denied(reader.delete_object, Bucket=LAKE, Key=raw), "reader: DeleteObject denied")
    ok(denied(reader.create_multipart_upload, Bucket=LAKE, Key="lake/raw/progress/m"), "reader: multipart upload denied")
    ok(denied(reader.copy_object, Bucket=LAKE, Key="lake/raw/progress/c", CopySource={"Bucket": LAKE, "Key": raw}),
       "reader: CopyObject denied")
    ok(denied(reader.list_multipart_uploads, Bucket=LAKE), "reader: ListMultipartUploads denied")

    # The reader follows the commit log with its own grants; the log's entries are
    # never deleted or overwritten by the job or the reader.
    etags = {k: admin.head_object(Bucket=LAKE, Key=k)["ETag"] for k in days_under("lake/raw/progress/")}
    p = landing("feed", "--lake", lake_url, "--product", "progress", "--since", "0",
                extra={"AWS_ACCESS_KEY_ID": keys["reader"][0], "AWS_SECRET_ACCESS_KEY": keys["reader"][1]})
    record(feed_verdicts(p.returncode, p.stdout, p.stderr, [NAME, NAME, INBOX_NEW], etags))
    first = log_entry(1)
    ok(denied(job.delete_object, Bucket=LAKE, Key=first), "job: DeleteObject of a log entry denied")
    ok(denied(reader.put_object, Bucket=LAKE, Key=first, Body=b"{}"), "reader: overwriting a log entry denied")
    ok(denied(reader.delete_object, Bucket=LAKE, Key=first), "reader: DeleteObject of a log entry denied")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
