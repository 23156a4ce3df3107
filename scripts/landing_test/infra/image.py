"""The Dockerfile: its text (dockerfile), and the image built with podman and run
against SeaweedFS (image)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from .common import PROGRAMS, ROOT, CheckFailed, infra_python, require, run, tail

def check_dockerfile(ctx) -> str:
    text = (ROOT / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    require(froms == ["${BUILDER_IMAGE}", "${RUNTIME_IMAGE}"], f"Dockerfile: FROM lines {froms}, want the two build args")
    for a in ("BUILDER_IMAGE", "RUNTIME_IMAGE"):
        ref = args.get(a, "")
        require(re.search(r":[\w.-]+$", ref) and not ref.endswith(":latest"), f"Dockerfile: {a} default {ref!r} needs a version tag")
    require(re.search(r"^USER (\d+):(\d+)$", text, re.M) and not re.search(r"^USER 0", text, re.M),
            "Dockerfile: the runtime USER must be numeric and non-root")
    require('ENTRYPOINT ["/usr/local/bin/landing"]' in text, "Dockerfile: entrypoint must be landing")
    for label in ("source", "version", "licenses"):
        require(f"org.opencontainers.image.{label}=" in text, f"Dockerfile: OCI label {label} missing")
    ign = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
    require(ign[:1] == ["*"] or "target" in ign or "target/" in ign, ".dockerignore must keep target/ out of the context")
    return "bases are arguments with tagged defaults; USER numeric non-root; entrypoint; OCI labels"



# What only a build with the `test-hooks` feature holds (src/cli/hooks.rs): the hooks'
# variables and flags. A variable set in a pod must never crash, pause, freeze or
# resize a production run, so the image's binary holds none of these names.
TEST_HOOK_NAMES = ("LANDING_CRASH_AT", "LANDING_PAUSE_AT", "LANDING_FREEZE_AT", "LANDING_TEST_SPILL_EVERY",
                   "LANDING_TEST_SPILL_REPLAY", "LANDING_TEST_ID_DIGEST_BITS", "LANDING_TEST_SPILL_TABLE",
                   "LANDING_TEST_FINGERPRINT_BITS", "pause-at", "freeze-at", "spill-every", "spill-replay",
                   "id-digest-bits", "spill-table", "fingerprint-bits")
# Set in the image's runs: honoured, the first kills the run mid-stream and the others
# fail its merge, so a publish-then-skip proves the image's binary ignores them.
TEST_HOOK_ENV = " LANDING_CRASH_AT=mid-stream LANDING_TEST_SPILL_EVERY=1 LANDING_TEST_FINGERPRINT_BITS=0"


def test_hook_names(binary: Path) -> list[str]:
    """The test hooks' names among the printable strings of `binary` (binutils'
    `strings`, every section)."""
    found = run(["strings", "-a", binary]).stdout
    return [n for n in TEST_HOOK_NAMES if n in found]


def podman(*args, check=True, timeout=900, **kw):
    return run(["podman", *args], check=check, timeout=timeout, **kw)


# podman re-executes itself for chroot isolation; when it cannot bind-mount its own
# binary it copies it into a memfd and seals it (containers/storage pkg/unshare,
# copy_self_proc_exe). The kernel answers F_SEAL_WRITE with EBUSY while pages of
# the fresh copy are still pinned, which a loaded 2-core machine hit once in CI.
# That fault is podman's, before any step of ours runs; it alone is retried.
REEXEC_FAULT = "sealing memfd copy"
BUILD_ATTEMPTS = 3


def podman_build(make_args, what: str) -> tuple[str, int]:
    """Run `podman build` with the arguments make_args(attempt) gives; retry only
    podman's own re-exec fault. Returns the build's output and the retries used."""
    for attempt in range(1, BUILD_ATTEMPTS + 1):
        p = podman("build", *make_args(attempt), check=False)
        out = p.stdout + p.stderr
        if p.returncode == 0:
            return out, attempt - 1
        if REEXEC_FAULT not in out or attempt == BUILD_ATTEMPTS:
            raise CheckFailed(f"{what} failed (attempt {attempt}):\n{tail(out)}")
    raise AssertionError("unreachable: the loop returns or raises")


def build_bases(work: Path, binary: Path, tag: str) -> tuple[str, str, str, int]:
    """Three local images, FROM scratch (no registry is reachable here):

    runtime: the binary's shared libraries (ldd) and the host's CA certificates,
      plus the nonroot user 65532 and a /tmp, as in distroless/cc-debian12:nonroot.
      The Dockerfile's runtime stage adds the binary itself.
    builder: busybox (sh, mkdir, cp, …) and a fake `cargo` that yields the binary
      this test command built (target/debug/landing). The Dockerfile's builder
      stage runs unchanged: its stub-dependency step and its real build step both
      call `cargo build --release --locked --bin landing`; the fake checks the
      arguments and that the copied Cargo files, sources and contracts/ are the project's, then
      puts the prebuilt binary where cargo would. A real release build is 10-15
      minutes of 2 cores; this is seconds.
    tools: busybox alone, bind-mounted into test steps (never part of the image
      under test) to check the user and to make / read-only.
    Returns their names and the builds retried (podman_build).
    """
    rt = work / "runtime"
    for lib in re.findall(r"(/\S+) \(0x", run(["ldd", binary]).stdout):
        if "linux-vdso" in lib:
            continue
        dest = rt / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest)
    certs = rt / "etc/ssl/certs"
    certs.mkdir(parents=True)
    shutil.copy2("/etc/ssl/certs/ca-certificates.crt", certs / "ca-certificates.crt")
    (rt / "etc/passwd").write_text("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
    (rt / "etc/group").write_text("root:x:0:\nnonroot:x:65532:\n")
    (rt / "tmp").mkdir()
    (rt / "tmp").chmod(0o1777)
    (rt / "home/nonroot").mkdir(parents=True)
    os.chown(rt / "home/nonroot", 65532, 65532)

    bd = work / "builder"
    (bd / "bin").mkdir(parents=True)
    (bd / "usr/local/bin").mkdir(parents=True)
    (bd / "prebuilt").mkdir()
    (bd / "tmp").mkdir()
    (bd / "tmp").chmod(0o1777)
    busybox = shutil.which("busybox")
    shutil.copy2(busybox, bd / "bin/busybox")
    for applet in ("sh", "mkdir", "cp", "touch", "rm", "echo", "sha256sum", "find", "wc", "cat", "install", "ls", "["):
        (bd / "bin" / applet).symlink_to("busybox")
    shutil.copy2(PROGRAMS / "fake-cargo.sh", bd / "usr/local/bin/cargo")
    (bd / "usr/local/bin/cargo").chmod(0o755)
    shutil.copy2(binary, bd / "prebuilt/landing")
    run(["sh", "-c", "sha256sum Cargo.toml Cargo.lock crates/*/Cargo.toml > $0", bd / "prebuilt/manifests.sha256"], cwd=ROOT)
    # What the build context holds of them: .dockerignore keeps a crate's own tests out.
    run(["sh", "-c", "find src crates contracts -type f -not -path 'crates/*/tests/*' | LC_ALL=C sort"
         " | xargs sha256sum > $0", bd / "prebuilt/src.sha256"], cwd=ROOT)

    tools = work / "tools"
    (tools / "bin").mkdir(parents=True)
    shutil.copy2(busybox, tools / "bin/busybox")

    names, retries = [], 0
    for what, env in (("runtime", ""), ("builder", "ENV PATH=/usr/local/bin:/bin\nWORKDIR /\n"), ("tools", "")):
        (work / f"Containerfile.{what}").write_text(f"FROM scratch\nCOPY {what}/ /\n{env}")
        name = f"localhost/landing-infra-{what}:{tag}"
        _, r = podman_build(lambda _: ("--isolation", "chroot", "--layers=false", "-q", "-f", work / f"Containerfile.{what}",
                                       "-t", name, work), f"podman build of the {what} base image")
        names.append(name)
        retries += r
    return names[0], names[1], names[2], retries


def seaweed_env() -> dict[str, str]:
    need = ["ENDPOINT", "ACCESS_KEY", "SECRET_KEY", "LP_ACCESS_KEY", "LP_SECRET_KEY", "LP_BUCKET"]
    missing = [f"LANDING_TEST_SEAWEED_{n}" for n in need if not os.environ.get(f"LANDING_TEST_SEAWEED_{n}")]
    require(not missing, f"{', '.join(missing)} not set: run under scripts/test-servers "
                         "(scripts/test does), which starts SeaweedFS")
    return {n: os.environ[f"LANDING_TEST_SEAWEED_{n}"] for n in need}


def summaries(build_output: str) -> list[dict]:
    out = []
    for line in build_output.splitlines():
        line = line.strip()
        if line.startswith('{"run_id"'):
            out.append(json.loads(line))
    return out


def check_image(ctx) -> str:
    sw = seaweed_env()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    tag = f"{os.getpid()}-{int(time.time())}"
    image = f"localhost/landing-infra:{tag}"
    made = []
    with tempfile.TemporaryDirectory(prefix="landing-infra-") as tmp:
        work = Path(tmp)
        try:
            runtime, builder, tools, retries = build_bases(work, ctx.binary, tag)
            made += [runtime, builder, tools]
            # The production Dockerfile, only the base-image arguments changed.
            t0 = time.monotonic()
            # --layers=false: no intermediate images are kept (they would pile up,
            # ~400 MB a run); layer caching is not what is under test.
            out, r = podman_build(
                lambda _: ("--isolation", "chroot", "--layers=false", "-f", ROOT / "Dockerfile",
                           "--build-arg", f"BUILDER_IMAGE={builder}", "--build-arg", f"RUNTIME_IMAGE={runtime}",
                           "--build-arg", f"VERSION={version}", "-t", image, ROOT),
                "podman build of the Dockerfile")
            retries += r
            made.append(image)
            build_s = time.monotonic() - t0
            require("fake cargo: release binary = the test-built binary" in out,
                    "the builder stage did not run its release build step")
            cfg = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
            user = cfg.get("User", "")
            m = re.fullmatch(r"(\d+):(\d+)", user)
            require(m and int(m.group(1)) != 0, f"image user {user!r} is not a numeric non-root uid:gid")
            uid, gid = m.groups()
            entry = cfg.get("Entrypoint") or []
            require(entry == ["/usr/local/bin/landing"], f"image entrypoint {entry}")
            labels = cfg.get("Labels") or {}
            for k, want in (("org.opencontainers.image.version", version),
                            ("org.opencontainers.image.licenses", "Apache-2.0")):
                require(labels.get(k) == want, f"label {k}={labels.get(k)!r}, want {want!r}")
            require("org.opencontainers.image.source" in labels, "label org.opencontainers.image.source missing")
            # The man pages and completion scripts the binary generated at build time.
            box = podman("create", image).stdout.strip()
            try:
                for path in ("/usr/local/share/man/man1/landing.1", "/usr/local/share/man/man1/landing-run.1",
                             "/usr/local/share/landing/completions/landing.bash",
                             "/usr/local/share/landing/completions/_landing",
                             "/usr/local/share/landing/completions/landing.fish"):
                    out = work / ("image-" + Path(path).name)
                    podman("cp", f"{box}:{path}", out)
                    require(out.stat().st_size > 0, f"{path} is empty in the image")
                require("_landing()" in (work / "image-landing.bash").read_text(),
                        "the image's bash completion is not landing's")
                shipped = work / "image-landing"
                podman("cp", f"{box}:/usr/local/bin/landing", shipped)
                hooks = test_hook_names(shipped)
                require(not hooks, f"the image's binary holds test hooks: {hooks}")
            finally:
                podman("rm", "-f", box, check=False)

            # Inputs: two generated files in the inbox of the job's bucket.
            names = [f"infra-{tag}-{i}.jsonl" for i in (1, 2)]
            for i, n in enumerate(names):
                run([ctx.binary, "generate", "--lines", str(300 + i), "--out", work / n])
            infra_python("s3_upload.py", sw["ENDPOINT"], sw["ACCESS_KEY"], sw["SECRET_KEY"], sw["LP_BUCKET"],
                         *[work / n for n in names])
            # The job's least-privilege SeaweedFS identity, as a credentials file
            # mounted as a build secret: never in the image or its history.
            creds = work / "aws-credentials"
            creds.write_text(f"[default]\naws_access_key_id = {sw['LP_ACCESS_KEY']}\n"
                             f"aws_secret_access_key = {sw['LP_SECRET_KEY']}\n")
            creds.chmod(0o600)
            shutil.copy2(PROGRAMS / "ro-run.sh", work / "ro-run.sh")
            env_line = ("ENV AWS_ENDPOINT_URL=" + sw["ENDPOINT"] + " AWS_REGION=us-east-1"
                        " AWS_SHARED_CREDENTIALS_FILE=/run/secrets/aws AWS_CONFIG_FILE=/dev/null"
                        " LANDING_S3_FORCE_PATH_STYLE=true LANDING_LOG_FORMAT=json LANDING_LOG_LEVEL=warn"
                        " LANDING_PROGRESS=never" + TEST_HOOK_ENV)
            secret = f"--mount=type=secret,id=aws,target=/run/secrets/aws,uid={uid},mode=0400"
            tools_mnt = f"--mount=type=bind,from={tools},source=/,target=/.t"

            def argv(name, attempt):
                # A lake per attempt: a retried build expects publish-then-skip afresh.
                return json.dumps(entry + ["run", "--input", f"s3://{sw['LP_BUCKET']}/inbox/{name}",
                                           "--lake", f"s3://{sw['LP_BUCKET']}/lake/infra-{tag}-{attempt}"])

            # 1. As the image's user (USER is inherited), root writable as usual.
            def run_steps(attempt):
                (work / "Containerfile.run").write_text(
                    f"FROM {image}\n{env_line}\n"
                    f'RUN {tools_mnt} ["/.t/bin/busybox", "sh", "-c", "echo image-user: uid=$(/.t/bin/busybox id -u)"]\n'
                    f"RUN {secret} {argv(names[0], attempt)}\n"
                    f"RUN {secret} {argv(names[0], attempt)}\n")
                return ("--isolation", "chroot", "--network", "host", "--no-cache", "--layers=false",
                        "--secret", f"id=aws,src={creds}", "-f", work / "Containerfile.run", "-t", f"{image}-run", work)

            out, r = podman_build(run_steps, "running the entrypoint in a build step")
            retries += r
            made.append(f"{image}-run")
            require(f"image-user: uid={uid}" in out, f"the steps did not run as the image user {uid}:\n{tail(out)}")
            acts = [(s["input"].rsplit("/", 1)[1], s["action"]) for s in summaries(out)]
            require(acts == [(names[0], "published"), (names[0], "skipped")],
                    f"as the image user: expected publish then skip, got {acts}")

            # 2. Read-only root filesystem (readOnlyRootFilesystem): the step starts as
            # root only to remount / read-only, then runs the entrypoint as uid:gid.
            def ro_steps(attempt):
                (work / "Containerfile.ro").write_text(
                    f"FROM {image}\n{env_line}\nUSER 0:0\n"
                    + "".join(
                        f"RUN {tools_mnt} --mount=type=bind,source=ro-run.sh,target=/.ro-run.sh {secret} "
                        f'["/.t/bin/busybox", "sh", "/.ro-run.sh", "{uid}", "{gid}", '
                        + argv(n, attempt)[1:] + "\n"
                        for n in (names[1], names[1]))
                )
                return ("--isolation", "chroot", "--network", "host", "--no-cache", "--layers=false",
                        "--cap-add", "SYS_ADMIN", "--secret", f"id=aws,src={creds}", "-f", work / "Containerfile.ro",
                        "-t", f"{image}-ro", work)

            out, r = podman_build(ro_steps, "the read-only run")
            retries += r
            made.append(f"{image}-ro")
            require(len(re.findall(rf"ro-run: uid={uid} gid={gid} CapEff:\s+0+\n", out)) == 2,
                    f"read-only steps did not run as {uid}:{gid} without capabilities:\n{tail(out)}")
            acts = [(s["input"].rsplit("/", 1)[1], s["action"]) for s in summaries(out)]
            require(acts == [(names[1], "published"), (names[1], "skipped")],
                    f"read-only root: expected publish then skip, got {acts}")
        finally:
            for name in reversed(made):
                podman("rmi", "-f", name, check=False)
    return (f"Dockerfile built in {build_s:.1f} s (user {user}, entrypoint {entry[0]}); "
            f"no test hook in its binary ({len(TEST_HOOK_NAMES)} names); "
            "publish+skip as the image user, and again with / read-only, the hooks' variables set"
            + (f"; podman's re-exec fault ({REEXEC_FAULT}) retried {retries} time(s)" if retries else ""))

