#!/bin/sh
# Stand-in for cargo in the test's builder base (scripts/test-infra;
# landing_test/infra/image.py, build_bases).
# It accepts exactly the Dockerfile's command, checks that the build context the
# Dockerfile copied is the one the test binary was built from, and "builds" by
# copying that binary: the Dockerfile's builder steps run unchanged, in seconds.
set -eu
[ "$*" = "build --release --locked --bin landing" ] || { echo "fake cargo: unexpected arguments: $*" >&2; exit 1; }
sha256sum -c -s /prebuilt/manifests.sha256 || { echo "fake cargo: the Cargo.toml files or Cargo.lock are not the project's" >&2; exit 1; }
if [ ! -s crates/engine/src/lib.rs ]; then
    echo "fake cargo: dependency layer (stub sources)" >&2
    mkdir -p target/release
    exit 0
fi
sha256sum -c -s /prebuilt/src.sha256 || { echo "fake cargo: the sources differ from the project's" >&2; exit 1; }
[ "$(find src crates contracts -type f | wc -l)" -eq "$(wc -l </prebuilt/src.sha256)" ] || { echo "fake cargo: the sources have extra files" >&2; exit 1; }
mkdir -p target/release
cp /prebuilt/landing target/release/landing
echo "fake cargo: release binary = the test-built binary" >&2
