# The landing job's container image. From the repository root:
#   docker build -t landing .          (or podman build; the release command with
#                                       its build arguments: docs/deployment.md)
# then `docker run landing run --inbox s3://… --lake s3://…` reads like the CLI.
#
# Two stages: a Rust toolchain compiles a release binary; the runtime holds that
# binary and the base image's CA certificates and C runtime, nothing else (no shell,
# no package manager). Both base images are build arguments, so a mirror or a base
# pinned by digest can be substituted without editing this file:
#   --build-arg BUILDER_IMAGE=…  --build-arg RUNTIME_IMAGE=…
# COPY --chmod needs BuildKit (Docker 23+ default), buildah or podman.

ARG BUILDER_IMAGE=docker.io/library/rust:1.89-slim-bookworm
# distroless/cc: glibc, libgcc_s and CA certificates, which is all the binary links
# (ldd: libc, libm, libgcc_s); the :nonroot variant defines user 65532.
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

# checkov:skip=CKV_DOCKER_7:both FROM lines name build arguments whose defaults carry version tags (never latest); checkov does not resolve ARG defaults, so scripts/test-infra checks them
# The builder needs, besides cargo, gcc and the C library headers (aws-lc-sys and
# ring compile C); the official rust:slim image has both. A replacement builder
# image must too.
FROM ${BUILDER_IMAGE} AS builder
WORKDIR /build

# Dependencies first, from the manifests alone, with stub sources: this layer is
# rebuilt only when Cargo.toml or Cargo.lock changes, not on every edit under src/
# (the AWS SDK is most of a 10-15 minute release build).
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src \
    && echo 'fn main() {}' >src/main.rs \
    && : >src/lib.rs \
    && cargo build --release --locked --bin landing \
    && rm -rf src

COPY src ./src
# touch: the stubs above were compiled later than the real sources' mtimes from the
# build context, so without it cargo would keep the stub binary.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin landing \
    && mkdir -p /out \
    && cp target/release/landing /out/landing

FROM ${RUNTIME_IMAGE}
# Set by the build command (docs/deployment.md): the crate version, the commit and
# the repository URL, so a running pod can be traced back to its source.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="landing" \
      org.opencontainers.image.description="Lands JSONL files of learner progress events into the raw zone of a data lake under a crash-safe run contract" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"

# Root-owned and not writable by the job's user: nothing in the image is ever
# written, so the pod runs with readOnlyRootFilesystem and no volume at all.
COPY --from=builder --chown=0:0 --chmod=0555 /out/landing /usr/local/bin/landing

# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532

# A batch job: it exits when its run is over; liveness is the Job's
# activeDeadlineSeconds, not a probe.
# checkov:skip=CKV_DOCKER_2:batch job that exits when done; a HEALTHCHECK has nothing to probe and Kubernetes ignores it
ENTRYPOINT ["/usr/local/bin/landing"]
CMD ["--help"]
