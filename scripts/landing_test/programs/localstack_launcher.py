"""Starts LocalStack (run by its venv's interpreter; scripts/test-servers).

Its Twisted gateway ignores the host part of GATEWAY_LISTEN and calls
TCP4ServerEndpoint(reactor, port), i.e. every interface: bind it to loopback. Its S3
provider also keeps object data in a fixed /tmp/localstack-s3-storage, shared by
every instance and left behind: point it into this run's folder
(LANDING_TEST_LOCALSTACK_S3_DIR)."""

import os
import runpy

from twisted.internet import endpoints
from localstack.services.s3 import provider


class LoopbackTCP4ServerEndpoint(endpoints.TCP4ServerEndpoint):
    def __init__(self, reactor, port, backlog=50, interface="127.0.0.1"):
        super().__init__(reactor, port, backlog, interface)


endpoints.TCP4ServerEndpoint = LoopbackTCP4ServerEndpoint
provider.DEFAULT_S3_TMP_DIR = os.environ["LANDING_TEST_LOCALSTACK_S3_DIR"]
runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
