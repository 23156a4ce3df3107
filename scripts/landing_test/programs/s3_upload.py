"""Uploads files into a bucket's inbox/ (path-style). Run by the infra venv's
interpreter (boto3); scripts/test-infra's image check.

    python s3_upload.py ENDPOINT ACCESS_KEY SECRET_KEY BUCKET FILE...
"""

import sys

import boto3
from botocore.config import Config

if __name__ == "__main__":
    endpoint, access_key, secret_key, bucket = sys.argv[1:5]
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access_key,
                     aws_secret_access_key=secret_key, region_name="us-east-1",
                     config=Config(s3={"addressing_style": "path"}))
    for f in sys.argv[5:]:
        c.upload_file(f, bucket, "inbox/" + f.rsplit("/", 1)[1])
