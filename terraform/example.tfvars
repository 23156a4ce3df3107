# Example inputs (docs/deployment.md): terraform apply -var-file=example.tfvars
inbox_bucket      = "example-landing-inbox"
lake_bucket       = "example-landing-lake"
oidc_provider_arn = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
expire_runs_days  = 400

