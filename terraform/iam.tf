# The job's role and the SQL reader's policy. The policy documents are the JSON
# templates under policies/, loaded with templatefile(): scripts/test-infra renders
# the same files (same ${name} placeholders, nothing else) and evaluates them in moto
# with IAM enforcement on, so what is tested is what is deployed.

locals {
  # The OIDC provider ARN ends with the issuer's host and path, which is the prefix
  # of the token's claim keys in the trust policy (…/id/XYZ:sub).
  oidc_issuer = element(split("oidc-provider/", var.oidc_provider_arn), 1)
  policy_vars = {
    partition    = local.partition
    inbox_bucket = aws_s3_bucket.this["inbox"].id
    inbox_prefix = var.inbox_prefix
    lake_bucket  = aws_s3_bucket.this["lake"].id
    lake_prefix  = var.lake_prefix
  }
  kms_vars = {
    kms_key_arn = var.kms_key_arn == null ? "" : var.kms_key_arn
    region      = data.aws_region.current.name
  }
}

# One role for every pod of the job: the nightly CronJob (k8s/30-cronjob.yaml) and the
# backfill Indexed Job (k8s/backfill/indexed-job.yaml) both run as the service account
# this role trusts (k8s/10-serviceaccount.yaml), so both get exactly policies/job.json
# (scripts/test-infra's parliament check fails if a workload names another account).
resource "aws_iam_role" "job" {
  name                 = "${var.name_prefix}-job"
  description          = "landing CronJob and backfill Indexed Job (IRSA: ${var.service_account_namespace}/${var.service_account_name})"
  max_session_duration = 3600
  assume_role_policy = templatefile("${path.module}/policies/job-trust.json", {
    oidc_provider_arn         = var.oidc_provider_arn
    oidc_issuer               = local.oidc_issuer
    service_account_namespace = var.service_account_namespace
    service_account_name      = var.service_account_name
  })
  tags = var.tags
}

# The job's grants, one statement per zone of the lake, each with exactly the S3
# actions the code performs there (docs/deployment.md "IAM" has the reasons). No
# statement deletes under raw/, checkpoints/, locks/ or runs/ (scripts/test-infra
# checks it statically and on moto). HeadObject is s3:GetObject; CreateMultipartUpload,
# UploadPart(Copy), CompleteMultipartUpload and CopyObject's destination are
# s3:PutObject; CopyObject's and UploadPartCopy's source is s3:GetObject. By Sid:
#   ReadInboxFiles               GetObject/HeadObject of inputs (pipeline/mod.rs
#                                open_input, inbox.rs); the inbox is never written.
#   ListInbox                    ListObjectsV2 of the inbox prefix (inbox.rs).
#   StagingWriteReadDelete       staging/<product>/<run id>/: the multipart upload of
#                                the output (store/s3/upload.rs), the copy source at
#                                promotion (copy.rs), the copy-fence probe's scratch
#                                keys (fence.rs: put, copy, read back, delete); delete
#                                after the checkpoint or on a signal (pipeline/mod.rs
#                                cleanup, interrupted), sweep of crashed runs' objects
#                                and uploads (store/s3/list.rs), abort on a refusal or
#                                failed stream (pipeline/stream.rs).
#   RawPublishNoDelete           raw/: promotion's CopyObject destination, or
#                                UploadPartCopy parts above --s3-copy-threshold, whose
#                                failure aborts its own upload (copy.rs); HeadObject of
#                                what readers see (pipeline Seen::read, skip rule in
#                                checkpoint.rs, copy.rs verify); verify --deep reads
#                                (audit.rs). No delete: nothing in the job removes a
#                                published object.
#   CommitLogCreateOnly          raw/<product>/_landing_log/: an entry or snapshot
#                                (*.json) is only ever created, with If-None-Match: *
#                                (commit_log.rs append, snapshot); a PutObject without
#                                that header would overwrite one, and is denied. The
#                                hint `_last` is rewritten with If-Match.
#   QuarantineWriteReadDelete    quarantine/: as raw/ for the rejects, plus the delete
#                                of the previous quarantine when a republish has no
#                                rejects (pipeline/mod.rs cleanup).
#   CheckpointsWriteReadNoDelete checkpoints/: read, then If-None-Match/If-Match writes
#                                (checkpoint.rs read, write, upgrade_identity); status
#                                and verify read them (audit.rs).
#   LeasesWriteReadNoDelete      locks/: take, renew, take over and release are
#                                conditional PutObjects of the lease record; release
#                                marks it released, never deletes it (lease.rs);
#                                status reads them (audit.rs).
#   RunRecordsWriteReadNoDelete  runs/: one record per run (history.rs write); status
#                                --history reads them (history.rs read_all, latest).
#   DrillScratchOnly             drills/<drill id>/: `landing drill` (drill.rs) runs
#                                whole child runs in scratch lakes there and removes
#                                them; the drill's deletes reach nothing else.
#   ListLake                     ListObjectsV2 under the lake prefix: sweeps and
#                                leftovers (list.rs), status and verify (audit.rs),
#                                run history (history.rs), the drill.
#   ListLakeUploads              ListMultipartUploads: sweeps and status leftovers
#                                (list.rs); AWS has no prefix condition for it.
resource "aws_iam_role_policy" "job" {
  name   = "landing-job"
  role   = aws_iam_role.job.id
  policy = templatefile("${path.module}/policies/job.json", local.policy_vars)
}

resource "aws_iam_role_policy" "job_kms" {
  count  = var.kms_key_arn == null ? 0 : 1
  name   = "landing-job-kms"
  role   = aws_iam_role.job.id
  policy = templatefile("${path.module}/policies/job-kms.json", local.kms_vars)
}

resource "aws_iam_policy" "reader" {
  name        = "${var.name_prefix}-raw-reader"
  description = "Read the published raw/ zone of the landing lake, and nothing else"
  policy      = templatefile("${path.module}/policies/reader.json", local.policy_vars)
  tags        = var.tags
}

resource "aws_iam_policy" "reader_kms" {
  count       = var.kms_key_arn == null ? 0 : 1
  name        = "${var.name_prefix}-raw-reader-kms"
  description = "Decrypt the landing lake's objects through S3"
  policy      = templatefile("${path.module}/policies/reader-kms.json", local.kms_vars)
  tags        = var.tags
}

resource "aws_iam_role_policy_attachment" "reader" {
  for_each   = toset(var.reader_role_names)
  role       = each.value
  policy_arn = aws_iam_policy.reader.arn
}

resource "aws_iam_role_policy_attachment" "reader_kms" {
  for_each   = var.kms_key_arn == null ? toset([]) : toset(var.reader_role_names)
  role       = each.value
  policy_arn = aws_iam_policy.reader_kms[0].arn
}
