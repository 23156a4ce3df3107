output "job_role_arn" {
  description = "Annotate the service account with it (k8s/10-serviceaccount.yaml, eks.amazonaws.com/role-arn)."
  value       = aws_iam_role.job.arn
}

output "reader_policy_arn" {
  description = "Attach to the SQL engine's role: read raw/ and nothing else."
  value       = aws_iam_policy.reader.arn
}

output "reader_kms_policy_arn" {
  description = "With a KMS key: attach to the SQL engine's role as well (null otherwise)."
  value       = one(aws_iam_policy.reader_kms[*].arn)
}

output "inbox_bucket" {
  value = aws_s3_bucket.this["inbox"].id
}

output "lake_bucket" {
  value = aws_s3_bucket.this["lake"].id
}

output "landing_inbox" {
  description = "LANDING_INBOX for k8s/20-configmap.yaml."
  value       = "s3://${aws_s3_bucket.this["inbox"].id}/${var.inbox_prefix}/"
}

output "landing_lake" {
  description = "LANDING_LAKE for k8s/20-configmap.yaml."
  value       = "s3://${aws_s3_bucket.this["lake"].id}/${var.lake_prefix}"
}
