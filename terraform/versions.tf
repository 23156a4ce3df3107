# Provider pins. ~> 5.90 allows 5.x patch and minor releases from 5.90 on, never 6.x
# (6.0 changed S3 resource arguments). Commit the .terraform.lock.hcl that
# `terraform init` writes in your deployment repo, so every apply uses the same build.
terraform {
  required_version = ">= 1.6.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.90"
    }
  }
}
