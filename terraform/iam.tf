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

resource "aws_iam_role" "job" {
  name                 = "${var.name_prefix}-job"
  description          = "landing CronJob (IRSA: ${var.service_account_namespace}/${var.service_account_name})"
  max_session_duration = 3600
  assume_role_policy = templatefile("${path.module}/policies/job-trust.json", {
    oidc_provider_arn         = var.oidc_provider_arn
    oidc_issuer               = local.oidc_issuer
    service_account_namespace = var.service_account_namespace
    service_account_name      = var.service_account_name
  })
  tags = var.tags
}

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
