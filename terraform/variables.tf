# Inputs. Every name the job and the tests depend on is validated here, before any
# plan: a wrong bucket name or prefix would otherwise only show as AccessDenied at
# 02:30.

variable "inbox_bucket" {
  description = "Bucket the producer drops progress-*.jsonl files into (created here)."
  type        = string
  validation {
    # S3 naming rules, without dots: dotted names break TLS for virtual-hosted
    # addressing (the certificate is *.s3.amazonaws.com).
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.inbox_bucket)) && !can(regex("--", var.inbox_bucket))
    error_message = "inbox_bucket: 3-63 lowercase letters, digits and single hyphens, no dots."
  }
}

variable "inbox_prefix" {
  description = "Prefix (folder) under the inbox bucket the job lands from, without slashes at either end."
  type        = string
  default     = "progress"
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*$", var.inbox_prefix))
    error_message = "inbox_prefix: path segments of [a-z0-9_-], no leading or trailing slash (the policies scope by it)."
  }
}

variable "lake_bucket" {
  description = "Bucket of the data lake (created here)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.lake_bucket)) && !can(regex("--", var.lake_bucket))
    error_message = "lake_bucket: 3-63 lowercase letters, digits and single hyphens, no dots."
  }
}

variable "lake_prefix" {
  description = "Lake root under the lake bucket (the job's --lake is s3://<lake_bucket>/<lake_prefix>), without slashes at either end."
  type        = string
  default     = "lake"
  validation {
    # Not empty: the job's grants are scoped to this prefix, and an empty one would
    # grant the whole bucket.
    condition     = can(regex("^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*$", var.lake_prefix))
    error_message = "lake_prefix: non-empty path segments of [a-z0-9_-], no leading or trailing slash."
  }
}

variable "oidc_provider_arn" {
  description = "ARN of the cluster's IAM OIDC provider (aws_iam_openid_connect_provider), e.g. arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE."
  type        = string
  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/[^/]+(/.+)?$", var.oidc_provider_arn))
    error_message = "oidc_provider_arn: an IAM OIDC provider ARN (arn:<partition>:iam::<account>:oidc-provider/<issuer host and path>)."
  }
}

variable "service_account_namespace" {
  description = "Namespace of the job's Kubernetes service account (k8s/10-serviceaccount.yaml)."
  type        = string
  default     = "landing"
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.service_account_namespace))
    error_message = "service_account_namespace: a Kubernetes namespace name (RFC 1123 label)."
  }
}

variable "service_account_name" {
  description = "Name of the job's Kubernetes service account; the role trusts exactly this one."
  type        = string
  default     = "landing"
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", var.service_account_name))
    error_message = "service_account_name: a Kubernetes object name (RFC 1123 subdomain)."
  }
}

variable "kms_key_arn" {
  description = "Optional customer-managed KMS key for both buckets' default encryption. null: SSE-S3 (AES256)."
  type        = string
  default     = null
  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]{36}$", var.kms_key_arn))
    error_message = "kms_key_arn: null or a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<uuid>)."
  }
}

variable "versioning" {
  description = "Keep object versions in both buckets: an overwritten or deleted raw/ object can be recovered. Noncurrent versions expire after noncurrent_version_days."
  type        = bool
  default     = true
}

variable "noncurrent_version_days" {
  description = "Days a noncurrent object version is kept when versioning is on (checkpoints and leases are rewritten every run)."
  type        = number
  default     = 30
  validation {
    condition     = var.noncurrent_version_days >= 1 && floor(var.noncurrent_version_days) == var.noncurrent_version_days
    error_message = "noncurrent_version_days: a whole number of days, at least 1."
  }
}

variable "expire_runs_days" {
  description = "Optional: expire run records (runs/) after this many days. null keeps them."
  type        = number
  default     = null
  validation {
    condition     = var.expire_runs_days == null || try(var.expire_runs_days >= 1 && floor(var.expire_runs_days) == var.expire_runs_days, false)
    error_message = "expire_runs_days: null or a whole number of days, at least 1."
  }
}

variable "expire_quarantine_days" {
  description = "Optional: expire quarantine reports (quarantine/) after this many days. null keeps them."
  type        = number
  default     = null
  validation {
    condition     = var.expire_quarantine_days == null || try(var.expire_quarantine_days >= 1 && floor(var.expire_quarantine_days) == var.expire_quarantine_days, false)
    error_message = "expire_quarantine_days: null or a whole number of days, at least 1."
  }
}

variable "reader_role_names" {
  description = "Existing IAM roles of the SQL engine to attach the raw/ reader policy to (may be empty: attach reader_policy_arn yourself)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for r in var.reader_role_names : can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", r))])
    error_message = "reader_role_names: IAM role names (not ARNs)."
  }
}

variable "name_prefix" {
  description = "Prefix of the IAM role and policy names."
  type        = string
  default     = "landing"
  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,40}$", var.name_prefix))
    error_message = "name_prefix: 1-40 characters valid in IAM names."
  }
}

variable "tags" {
  description = "Tags on every resource."
  type        = map(string)
  default     = {}
}
