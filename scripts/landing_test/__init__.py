"""The test tooling behind scripts/test-servers and scripts/test-infra (those two
files are thin entry points holding the usage).

  pins.py       every pinned version: the servers and the infra tools
  procs.py      processes, ports and listeners from /proc: free loopback ports, the
                loopback-only check, run marks, the stale-run decision
  venvs.py      the servers' venvs under the cache, installed on first use
  s3.py         the few S3 calls test-servers makes, signed by botocore
  servers.py    SeaweedFS, moto and LocalStack, and one run of test-servers
  infra/        test-infra's checks, a module per group (main.py runs them)
  programs/     programs run by another interpreter (a venv's, or inside an image),
                one file each

Their unit tests: scripts/tests/ (python3 -m unittest discover -s scripts/tests).
"""
