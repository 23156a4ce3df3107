# The inbox and lake buckets: private, owner-enforced, encrypted, TLS-only, with the
# lifecycle rules the run contract relies on as a second net (RUNBOOK "Crash table
# (S3)": the job sweeps only the leftovers of the input it is landing).

data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  buckets = {
    inbox = var.inbox_bucket
    lake  = var.lake_bucket
  }
  partition = data.aws_partition.current.partition
}

resource "aws_s3_bucket" "this" {
  for_each = local.buckets
  bucket   = each.value
  tags     = merge(var.tags, { "landing/role" = each.key })

  # checkov:skip=CKV_AWS_18:server access logs go to an organisation-wide log bucket that this module does not own; enable them there
  # checkov:skip=CKV_AWS_144:cross-region replication is a disaster-recovery decision per deployment, not part of the job's contract
  # checkov:skip=CKV2_AWS_62:nothing consumes bucket events; the job is scheduled, not triggered
  # checkov:skip=CKV2_AWS_61:both buckets have one (aws_s3_bucket_lifecycle_configuration.inbox and .lake); checkov's graph does not follow this[key] references, so scripts/test-infra checks it instead
  # checkov:skip=CKV_AWS_145:a customer-managed KMS key is optional by design (var.kms_key_arn); without it objects are encrypted with SSE-S3
}

resource "aws_s3_bucket_public_access_block" "this" {
  for_each                = aws_s3_bucket.this
  bucket                  = each.value.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# ACLs disabled: every object belongs to the bucket owner, whoever wrote it.
resource "aws_s3_bucket_ownership_controls" "this" {
  for_each = aws_s3_bucket.this
  bucket   = each.value.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  for_each = aws_s3_bucket.this
  bucket   = each.value.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # One KMS data key per bucket instead of per object: fewer KMS calls per run.
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_versioning" "this" {
  for_each = aws_s3_bucket.this
  bucket   = each.value.id
  versioning_configuration {
    status = var.versioning ? "Enabled" : "Suspended"
  }
}

resource "aws_s3_bucket_policy" "tls_only" {
  for_each = aws_s3_bucket.this
  bucket   = each.value.id
  policy = templatefile("${path.module}/policies/tls-only.json", {
    partition = local.partition
    bucket    = each.value.id
  })
  # A bucket policy put before the public access block could be judged public.
  depends_on = [aws_s3_bucket_public_access_block.this]
}

resource "aws_s3_bucket_lifecycle_configuration" "inbox" {
  bucket = aws_s3_bucket.this["inbox"].id

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  rule {
    id     = "expire-noncurrent-versions"
    status = var.versioning ? "Enabled" : "Disabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

resource "aws_s3_bucket_lifecycle_configuration" "lake" {
  bucket = aws_s3_bucket.this["lake"].id

  # A crashed run's multipart upload under staging/ is invisible and billed until
  # aborted; the next run of the same input aborts it, this catches the rest.
  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  # A completed staging object of a crashed run that no later run swept.
  rule {
    id     = "expire-staging"
    status = "Enabled"
    filter {
      prefix = "${var.lake_prefix}/staging/"
    }
    expiration {
      days = 7
    }
  }

  # Optional expiries: a rule is always present and Disabled when its variable is
  # null (the days are then a placeholder S3 never applies), so that the rule list,
  # and any diff of it, has one shape whatever the inputs.
  rule {
    id     = "expire-runs"
    status = var.expire_runs_days == null ? "Disabled" : "Enabled"
    filter {
      prefix = "${var.lake_prefix}/runs/"
    }
    expiration {
      days = coalesce(var.expire_runs_days, 36500)
    }
  }

  rule {
    id     = "expire-quarantine"
    status = var.expire_quarantine_days == null ? "Disabled" : "Enabled"
    filter {
      prefix = "${var.lake_prefix}/quarantine/"
    }
    expiration {
      days = coalesce(var.expire_quarantine_days, 36500)
    }
  }

  # Checkpoints and leases are rewritten by every run; their old versions are noise.
  rule {
    id     = "expire-noncurrent-versions"
    status = var.versioning ? "Enabled" : "Disabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}
