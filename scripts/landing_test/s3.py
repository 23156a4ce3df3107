"""The few S3 calls test-servers makes itself (readiness, SeaweedFS's bucket and its
identity check): path-style requests on http.client, signed by botocore's SigV4
signer. botocore comes from the moto venv, whose interpreter runs test-servers once
the servers are installed (servers.main), and is imported only here."""

import http.client
import urllib.parse
import xml.etree.ElementTree as ET

REGION = "us-east-1"


class S3Error(Exception):
    def __init__(self, status, code, message=""):
        super().__init__("%s %s %s" % (status, code, message))
        self.status = status
        self.code = code


# What a failed call can raise besides S3Error: the server is not (yet) there, or
# answered something that is not S3.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException, ET.ParseError)


class S3:
    def __init__(self, endpoint, access_key, secret_key, timeout=10.0):
        from botocore.auth import S3SigV4Auth
        from botocore.credentials import Credentials

        self.endpoint = endpoint.rstrip("/")
        u = urllib.parse.urlsplit(endpoint)
        self.host, self.port = u.hostname, u.port or 80
        self.signer = S3SigV4Auth(Credentials(access_key, secret_key), "s3", REGION)
        self.timeout = timeout

    def request(self, method, bucket="", key="", query=None, body=b""):
        from botocore.awsrequest import AWSRequest

        path = "/" + urllib.parse.quote(bucket, safe="-_.~")
        if key:
            path += "/" + urllib.parse.quote(key, safe="-_.~/")
        if query:
            path += "?" + urllib.parse.urlencode(sorted(query.items()), quote_via=urllib.parse.quote)
        req = AWSRequest(method=method, url=self.endpoint + path, data=body)
        self.signer.add_auth(req)
        headers = dict(req.headers.items())
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.status >= 300:
            code, message = "", ""
            try:
                root = ET.fromstring(data)
                code = root.findtext("Code") or ""
                message = root.findtext("Message") or ""
            except ET.ParseError:
                pass
            raise S3Error(resp.status, code or "HTTP%d" % resp.status, message)
        return data

    def list_buckets(self):
        data = self.request("GET")
        if b"ListAllMyBucketsResult" not in data:
            raise S3Error(200, "NotS3", "ListBuckets answered without a ListAllMyBucketsResult")

    def create_bucket(self, bucket):
        self.request("PUT", bucket)

    def put(self, bucket, key, body):
        self.request("PUT", bucket, key, body=body)

    def get(self, bucket, key):
        return self.request("GET", bucket, key)

    def delete(self, bucket, key):
        self.request("DELETE", bucket, key)

    def key_count(self, bucket, prefix=""):
        data = self.request("GET", bucket, query={"list-type": "2", "prefix": prefix})
        root = ET.fromstring(data)
        return sum(1 for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Contents")
