"""Processes, ports and sockets, read from /proc (Linux; standard library only):
what scripts/test-servers needs to start servers on free loopback ports, to prove
they listen on loopback alone, and to find and stop whatever a run leaves behind."""

import ctypes
import ipaddress
import os
import random
import signal
import socket
import sys
import time


class Fatal(Exception):
    """A server could not be installed or started: report it and exit 1."""


def log(msg):
    if sys.stderr is not None:
        sys.stderr.write("test-servers: %s\n" % msg)
        sys.stderr.flush()


# ---------------------------------------------------------------- processes


def proc_stat(pid):
    """(state, ppid, starttime) of a live process, or None."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], fields[1], fields[19]
    except (OSError, IndexError):
        return None


def alive(pid, starttime=None):
    """Running, not a zombie, and (if given) the same process that had `starttime`."""
    st = proc_stat(pid)
    return st is not None and st[0] != "Z" and (starttime is None or st[2] == starttime)


def marked(environ, marks, prefix=False):
    """Whether a process environment (/proc/PID/environ bytes) holds one of `marks`
    (NAME=VALUE; with `prefix`, also NAME=VALUE:anything)."""
    needles = {m.encode() for m in marks}
    entries = environ.split(b"\0")
    if needles & set(entries):
        return True
    return prefix and any(e.startswith(n + b":") for e in entries for n in needles)


def find_processes(marks, roots=(), exclude=(), prefix=False):
    """Pids of live processes whose environment holds one of `marks` (see `marked`),
    plus `roots` and their descendants; never this process or `exclude`."""
    skip = {str(os.getpid())} | {str(p) for p in exclude}
    found, children = set(), {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid in skip:
            continue
        st = proc_stat(pid)
        if st is None or st[0] == "Z":
            continue
        children.setdefault(st[1], []).append(pid)
        if marks:
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if marked(f.read(), marks, prefix):
                        found.add(pid)
            except OSError:
                pass
    todo = [str(r) for r in roots if r and alive(r)]
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid in skip:
            continue
        seen.add(pid)
        found.add(pid)
        todo.extend(children.get(pid, []))
    return sorted((int(p) for p in found))


def signal_pids(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def stop_processes(find, grace, what):
    """TERM what `find()` returns, wait up to `grace` s for it to go, KILL the rest."""
    pids = find()
    if not pids:
        return
    log("%s: stopping %d process(es)" % (what, len(pids)))
    signal_pids(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        pids = find()
        if not pids:
            return
        time.sleep(0.1)
    signal_pids(find(), signal.SIGKILL)


def set_pdeathsig():
    """In the child before exec: SIGTERM when this program dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def ensure_std_fds():
    """CI may start us with stdin closed: keep fds 0-2 taken, so no pipe or log file
    opened later lands on them."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
            os.set_inheritable(fd, True)


def owner_record():
    """What a run folder's owner.pid holds: this process and its start time."""
    st = proc_stat(os.getpid())
    return "%d %s\n" % (os.getpid(), st[2] if st else "")


def abandoned(run_dir, is_alive=alive):
    """Whether a run folder was left by a run that died without cleaning up: its
    owner.pid names a process that is gone (or a new process that reuses the pid,
    told apart by its start time). A folder without a readable owner is not judged
    (a run that is being created has none yet)."""
    try:
        with open(os.path.join(run_dir, "owner.pid")) as f:
            owner = f.read().split()
    except OSError:
        return False
    if not owner or not owner[0].isdigit():
        return False
    return not is_alive(owner[0], owner[1] if len(owner) > 1 else None)


# ---------------------------------------------------------------- ports


def free_ports(pairs, singles):
    """`pairs` ports P with P+10000 also free (SeaweedFS's gRPC port convention), then
    `singles` ports chosen by the kernel; all distinct, all held until chosen."""
    rng = random.SystemRandom()
    held, out = [], []

    def bind(port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            return None
        held.append(s)
        return s

    try:
        tries = 0
        while len(out) < pairs:
            tries += 1
            if tries > 10000:
                raise Fatal("no free pair of loopback ports found")
            # Below the kernel's ephemeral range (32768+) for both P and P+10000.
            p = rng.randint(10000, 22767)
            a = bind(p)
            if a is None:
                continue
            if bind(p + 10000) is None:
                held.remove(a)
                a.close()
                continue
            out.append(p)
        for _ in range(singles):
            s = bind(0)
            if s is None:
                raise Fatal("no free loopback port found")
            out.append(s.getsockname()[1])
        return out
    finally:
        for s in held:
            s.close()


# ---------------------------------------------------------------- listeners


def hex_addr(hexaddr):
    """An address as /proc/net/{tcp,udp}{,6} prints it."""
    raw = bytes.fromhex(hexaddr)
    # /proc/net prints each 32-bit word in host (little-endian) order.
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw)


def is_loopback(ip):
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def parse_proc_net(proto, text, inodes, ephemeral):
    """[(proto, ip, port)] of the rows of /proc/net/PROTO (`text`) whose socket inode
    is in `inodes` and that accept traffic: TCP listeners, and UDP sockets bound
    below the ephemeral range (`ephemeral`, its first port)."""
    found = []
    for row in text.splitlines()[1:]:
        cols = row.split()
        if len(cols) < 10 or cols[9] not in inodes:
            continue
        addr, port = cols[1].split(":")
        port = int(port, 16)
        if proto.startswith("tcp") and cols[3] != "0A":  # not LISTEN
            continue
        if proto.startswith("udp") and (cols[3] != "07" or port == 0 or port >= ephemeral):
            continue
        found.append((proto, hex_addr(addr), port))
    return found


def socket_inodes(pids):
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def listeners(pids):
    """[(proto, ip, port)] of the sockets of `pids` that accept traffic."""
    inodes = socket_inodes(pids)
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open("/proc/net/" + proto) as f:
                text = f.read()
        except OSError:
            continue
        found += parse_proc_net(proto, text, inodes, ephemeral)
    return found


def exposed(found):
    """The listeners of `found` (as `listeners` returns them) on anything but
    loopback, as text."""
    return ["%s %s port %d" % (proto, ip, port) for proto, ip, port in found if not is_loopback(ip)]
