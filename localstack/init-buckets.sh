#!/bin/sh
# Creates the buckets the README example uses (idempotent), with the AWS CLI.
#
# - LocalStack: mounted into /etc/localstack/init/ready.d/, it runs inside the
#   container once LocalStack is ready (endpoint http://localhost:4566, creds test).
# - MinIO: run by the `minio-init` service of docker-compose.yml (amazon/aws-cli
#   image) with S3_ENDPOINT_URL=http://minio:9000 and the MinIO root credentials.
# - By hand against anything: S3_ENDPOINT_URL=http://127.0.0.1:9000 \
#     AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin sh init-buckets.sh
#
# Settings: S3_ENDPOINT_URL (default http://localhost:4566), LANDING_BUCKETS
# (default "landing-inbox landing-lake"), AWS_REGION (default us-east-1).
set -eu

endpoint=${S3_ENDPOINT_URL:-http://localhost:4566}
buckets=${LANDING_BUCKETS:-landing-inbox landing-lake}
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="$AWS_REGION"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_PAGER=""

if command -v aws >/dev/null 2>&1; then
    s3api() { aws --endpoint-url "$endpoint" s3api "$@"; }
elif command -v awslocal >/dev/null 2>&1; then
    s3api() { awslocal s3api "$@"; } # LocalStack's wrapper (endpoint localhost:4566)
else
    echo "init-buckets: neither aws nor awslocal is installed" >&2
    exit 1
fi

for bucket in $buckets; do
    if s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
        echo "init-buckets: $bucket exists at $endpoint"
    else
        # us-east-1 takes no LocationConstraint; other regions need one.
        if [ "$AWS_REGION" = us-east-1 ]; then
            s3api create-bucket --bucket "$bucket" >/dev/null
        else
            s3api create-bucket --bucket "$bucket" \
                --create-bucket-configuration "LocationConstraint=$AWS_REGION" >/dev/null
        fi
        echo "init-buckets: created $bucket at $endpoint"
    fi
done
