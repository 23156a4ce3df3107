"""Unit tests of the start-up checks of scripts/test-servers that read /proc
(landing_test/procs.py): the loopback-only check, the process marks and the
stale-run decision. Offline, standard library only, Linux.

    python3 -m unittest discover -s scripts/tests
"""

import ipaddress
import os
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from landing_test import procs  # noqa: E402

# /proc/net/tcp as the kernel prints it (inode in column 10): a listener on
# 127.0.0.1:8333, one on 0.0.0.0:9333, an established connection, and a listener of
# another process (inode 999).
PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:208D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0
   1: 00000000:2475 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 102 1 0
   2: 0100007F:208D 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 103 1 0
   3: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0
"""
PROC_NET_UDP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  0: 00000000000000000000000001000000:2710 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 201 2 0 0
  1: 00000000000000000000000000000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 202 2 0 0
  2: 00000000000000000000000000000000:9C40 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 203 2 0 0
"""


class LoopbackOnlyTest(unittest.TestCase):
    def test_addresses_are_read_in_host_order(self):
        self.assertEqual(procs.hex_addr("0100007F"), ipaddress.ip_address("127.0.0.1"))
        self.assertEqual(procs.hex_addr("00000000"), ipaddress.ip_address("0.0.0.0"))
        self.assertEqual(procs.hex_addr("00000000000000000000000001000000"), ipaddress.ip_address("::1"))
        self.assertEqual(procs.hex_addr("0000000000000000FFFF00000100007F"),
                         ipaddress.ip_address("::ffff:127.0.0.1"))

    def test_loopback_includes_v4_mapped(self):
        for ip in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"):
            self.assertTrue(procs.is_loopback(ipaddress.ip_address(ip)), ip)
        for ip in ("0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1"):
            self.assertFalse(procs.is_loopback(ipaddress.ip_address(ip)), ip)

    def test_only_listening_sockets_of_the_process_count(self):
        found = procs.parse_proc_net("tcp", PROC_NET_TCP, {"101", "102", "103"}, 32768)
        self.assertEqual(found, [("tcp", ipaddress.ip_address("127.0.0.1"), 8333),
                                 ("tcp", ipaddress.ip_address("0.0.0.0"), 9333)])
        self.assertEqual(procs.exposed(found), ["tcp 0.0.0.0 port 9333"])

    def test_udp_counts_below_the_ephemeral_range(self):
        found = procs.parse_proc_net("udp6", PROC_NET_UDP6, {"201", "202", "203"}, 32768)
        # 40000 (0x9C40) is a client socket's ephemeral port: not a service.
        self.assertEqual([p for _, _, p in found], [10000, 53])
        self.assertEqual(procs.exposed(found), ["udp6 :: port 53"])

    def test_a_wildcard_listener_of_this_process_is_exposed(self):
        # The real /proc: one socket on loopback, one on every interface.
        lo, anyif = socket.socket(), socket.socket()
        self.addCleanup(lo.close)
        self.addCleanup(anyif.close)
        lo.bind(("127.0.0.1", 0))
        anyif.bind(("0.0.0.0", 0))
        lo.listen()
        anyif.listen()
        found = procs.listeners([os.getpid()])
        ports = {p for _, _, p in found}
        self.assertIn(lo.getsockname()[1], ports)
        self.assertIn(anyif.getsockname()[1], ports)
        self.assertEqual(procs.exposed(found), ["tcp 0.0.0.0 port %d" % anyif.getsockname()[1]])


class MarksTest(unittest.TestCase):
    ENV = b"PATH=/bin\0_TEST_SERVERS_RUN=/tmp/landing-test.ab:moto\0HOME=/root\0"

    def test_exact_mark(self):
        self.assertTrue(procs.marked(b"A=1\0_TEST_SERVERS_RUN=/tmp/x\0", ["_TEST_SERVERS_RUN=/tmp/x"]))
        self.assertFalse(procs.marked(b"_TEST_SERVERS_RUN=/tmp/xy\0", ["_TEST_SERVERS_RUN=/tmp/x"]))

    def test_server_suffix_only_with_prefix(self):
        mark = ["_TEST_SERVERS_RUN=/tmp/landing-test.ab"]
        self.assertFalse(procs.marked(self.ENV, mark))
        self.assertTrue(procs.marked(self.ENV, mark, prefix=True))
        self.assertFalse(procs.marked(self.ENV, ["_TEST_SERVERS_RUN=/tmp/landing-test.a"], prefix=True))

    def test_marked_processes_and_descendants_are_found(self):
        mark = "_TEST_SERVERS_RUN=/tmp/landing-test.unit-%d" % os.getpid()
        env = dict(os.environ, _TEST_SERVERS_RUN=mark.split("=", 1)[1] + ":moto")
        marked = subprocess.Popen(["sleep", "30"], env=env)
        self.addCleanup(marked.wait)
        self.addCleanup(marked.kill)
        # The shell has forked its child by the time it prints.
        root = subprocess.Popen(["sh", "-c", "sleep 30 & echo forked; wait"], stdout=subprocess.PIPE)
        self.addCleanup(root.stdout.close)
        self.addCleanup(root.wait)
        root.stdout.readline()
        tree = procs.find_processes([], roots=[root.pid])
        self.addCleanup(procs.signal_pids, tree, 9)
        self.assertEqual(procs.find_processes([mark]), [])
        self.assertEqual(procs.find_processes([mark], prefix=True), [marked.pid])
        self.assertIn(root.pid, tree)
        self.assertEqual(len(tree), 2, tree)  # sh and its sleep


class StaleRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name

    def owner(self, text):
        with open(os.path.join(self.dir, "owner.pid"), "w") as f:
            f.write(text)

    def test_a_run_without_owner_is_not_judged(self):
        self.assertFalse(procs.abandoned(self.dir))
        self.owner("")
        self.assertFalse(procs.abandoned(self.dir))
        self.owner("not-a-pid\n")
        self.assertFalse(procs.abandoned(self.dir))

    def test_a_live_owner_keeps_its_run(self):
        self.owner(procs.owner_record())
        self.assertFalse(procs.abandoned(self.dir))
        self.owner("%d\n" % os.getpid())  # no start time recorded
        self.assertFalse(procs.abandoned(self.dir))

    def test_a_dead_owner_leaves_an_abandoned_run(self):
        p = subprocess.Popen(["true"])
        p.wait()
        self.owner("%d 12345\n" % p.pid)
        self.assertTrue(procs.abandoned(self.dir))

    def test_a_reused_pid_is_told_apart_by_its_start_time(self):
        pid, start = procs.owner_record().split()
        self.owner("%s %d\n" % (pid, int(start) + 1))
        self.assertTrue(procs.abandoned(self.dir))


class PortsTest(unittest.TestCase):
    def test_pairs_leave_the_grpc_port_free(self):
        ports = procs.free_ports(3, 2)
        self.assertEqual(len(set(ports)), 5)
        for p in ports[:3]:
            self.assertTrue(10000 <= p <= 22767, p)
            for q in (p, p + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))  # free again once chosen


if __name__ == "__main__":
    unittest.main()
