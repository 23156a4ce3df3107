"""The `iam` check of scripts/test-infra, run by the infra venv's interpreter (boto3)
against a moto server of its own:

    python iam_scenario.py ENDPOINT BINARY WORKDIR <CONFIG_JSON

CONFIG_JSON: the buckets (inbox, lake, other), the input file, and the rendered
policies of the admin, the job and the reader. The job lands the input with only its
policy, through two drill crashes (mid-stream, after staging) and their lease
takeovers; then the job's and the reader's denials. Prints every assertion as
[[held, what], ...] on its last line.

The verdicts on what a step left behind are plain functions of what was listed, so
that they are unit-tested without a server (landing_test/tests/test_iam.py); boto3 is
imported by main() only.
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

NAME = "progress-2026-03-02.jsonl"
LOCK = f"lake/locks/progress/{NAME}.lock"
STAGING = "lake/staging/progress/"
# What S3 (moto) answers a request that IAM refuses, or that is signed with a wrong key.
DENIAL_CODES = ("AccessDenied", "403", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId")


def last_summary(stdout):
    """The job's summary: the last line of its stdout that is a JSON object."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {}


def lease_over(record, now):
    """Whether a lease record no longer holds: gone, released, or past its expires_at."""
    if record is None or record.get("released"):
        return True
    expires = datetime.datetime.fromisoformat(record["expires_at"].replace("Z", "+00:00"))
    return expires < now


def crash_verdicts(point, returncode, stderr, record):
    """A drill crash at `point` (LANDING_CRASH_AT): the hook prints its marker, then
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
    # Staging is opened (CreateMultipartUpload) before the stream; the hook fires after
    # the first write, which only buffers (the sample is far below a part): one upload,
    # the data's (quarantine staging opens on its first record, which comes after).
    return [
        (LOCK in locks, "crash mid-stream: the job took its lease (PutObject under locks/)"),
        (uploads == [f"{STAGING}{run_id}/{NAME}"],
         f"crash mid-stream: exactly one incomplete multipart upload, the killed run's data staging: {uploads}"),
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
           # A killed holder's lease is taken over on S3 only once expired: keep it
           # short, above the per-attempt timeout as the job requires.
           "LANDING_LEASE_TTL": "5", "LANDING_S3_ATTEMPT_TIMEOUT": "2"}

    def land(lake=f"s3://{LAKE}/lake", crash=None):
        e = dict(env)
        if crash:
            e["LANDING_CRASH_AT"] = crash  # the drills' crash hook: the process kills itself there
        return subprocess.run([binary, "run", "--input", f"s3://{INBOX}/inbox/{NAME}", "--lake", lake],
                              env=e, capture_output=True, text=True, timeout=120)

    def keys_under(prefix):
        return [o["Key"] for o in admin.list_objects_v2(Bucket=LAKE, Prefix=prefix).get("Contents", [])]

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

    def wait_for_lease_expiry(after):
        """A dead holder's lease must run out on S3 (the contract's rule, not a sync):
        re-read the record from the store until it is over (a renewal by a holder that
        should be dead pushes it on), for at most 120 s."""
        deadline = time.monotonic() + 120
        while True:
            rec = lease_record()
            if lease_over(rec, datetime.datetime.now(datetime.timezone.utc)):
                return
            if time.monotonic() >= deadline:
                ok(False, f"after the crash {after}: the lease did not expire within 120 s: {rec}")
                return
            time.sleep(0.25)

    def crash(point):
        """A drill crash at point; returns the run id of the lease it left behind."""
        p = land(crash=point)
        rec = lease_record()
        record(crash_verdicts(point, p.returncode, p.stderr, rec))
        return (rec or {}).get("run_id")

    first = crash("mid-stream")
    record(mid_stream_verdicts(first, keys_under("lake/locks/"), uploads_under("lake/staging/"),
                               keys_under("lake/staging/"), settled()))
    wait_for_lease_expiry("mid-stream")
    second = crash("after-staging")
    record(after_staging_verdicts(first, second, uploads_under("lake/staging/"),
                                  keys_under("lake/staging/"), settled()))
    wait_for_lease_expiry("after-staging")
    p = land()
    s = last_summary(p.stdout)
    ok(p.returncode == 0 and s.get("action") == "published",
       f"the job with only its policy published (exit {p.returncode}, {s.get('action')}): {p.stderr[-1500:]}")
    ok(keys_under("lake/raw/progress/") == [f"lake/raw/progress/{NAME}"], "published under raw/")
    ok(keys_under("lake/checkpoints/progress/"), "checkpoint written")
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

    # The job outside its prefix.
    ok(denied(job.get_object, Bucket=LAKE, Key="outside/secret.txt"), "job: GetObject outside lake/ denied")
    ok(denied(job.put_object, Bucket=LAKE, Key="outside/x", Body=b"x"), "job: PutObject outside lake/ denied")
    ok(denied(job.delete_object, Bucket=LAKE, Key="outside/secret.txt"), "job: DeleteObject outside lake/ denied")
    ok(denied(job.get_object, Bucket=OTHER, Key="lake/x.txt"), "job: another bucket's objects denied")
    ok(denied(job.list_objects_v2, Bucket=OTHER), "job: listing another bucket denied")
    ok(denied(job.put_object, Bucket=INBOX, Key=f"inbox/{NAME}", Body=b"x"), "job: writing the inbox denied")
    ok(denied(job.delete_object, Bucket=INBOX, Key=f"inbox/{NAME}"), "job: deleting from the inbox denied")
    ok(not denied(job.list_objects_v2, Bucket=INBOX, Prefix="inbox/"), "job: listing the inbox allowed")
    ok(denied(job.put_bucket_policy, Bucket=LAKE, Policy="{}"), "job: bucket configuration denied")

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
    print(json.dumps(results))


if __name__ == "__main__":
    main()
