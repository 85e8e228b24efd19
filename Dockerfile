# syntax=docker/dockerfile:1
# FrameTap container image: a Swift builder stage and a slim Debian 12 runtime.
#
#   docker build -t frametap .
#   docker run --rm -p 8080:8080 frametap
#   # with VA-API: pass the render node and its group (the GID differs per host)
#   docker run --rm -p 8080:8080 --device /dev/dri/renderD128 \
#       --group-add "$(stat -c %g /dev/dri/renderD128)" frametap
#
# Both base images are build arguments so a machine without registry access can pass local
# ones (scripts/container-test.sh builds this file with podman over debootstrapped images).
ARG BUILDER_IMAGE=swift:6.2-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${BUILDER_IMAGE} AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Headers and pkg-config files of the C libraries (the same list as the Makefile's BUILD_PACKAGES).
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
        pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libturbojpeg0-dev \
        libmicrohttpd-dev libgnutls28-dev libva-dev libyaml-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /build
# Package.swift, Package.resolved when present, the sources, the build plugins (the web
# console is embedded by one), and the test sources (SwiftPM wants every target's folder; they
# are not built).
COPY Package.* ./
COPY Sources ./Sources
COPY Plugins ./Plugins
COPY Tests ./Tests
# The Swift runtime and Foundation are linked statically: the runtime stage needs only the
# C libraries below. .build is a cache mount (package checkouts and build products), so a
# rebuild after a source change is incremental.
RUN --mount=type=cache,target=/build/.build \
    swift build -c release --product frametap --static-swift-stdlib \
 && install -D -m 0755 "$(swift build -c release --show-bin-path)/frametap" /out/frametap \
 && strip /out/frametap \
 && /out/frametap --help > /dev/null

# ---------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# VA-API drivers tried for /dev/dri render nodes: intel-media-va-driver (iHD, Broadwell and
# newer Intel GPUs; the "-non-free" build in Debian's non-free adds the encoders, decoding
# does not need them) and mesa-va-drivers (AMD radeonsi, nouveau). Pass VA_DRIVERS="" for a
# software-only image (466 MB instead of 672 MB: mesa pulls LLVM).
ARG VA_DRIVERS="intel-media-va-driver mesa-va-drivers"

# Only runtime libraries: libavcodec/libavformat/libavutil/libswscale (FFmpeg 5.1; libavformat
# reads pushed containers and pulls RTSP, RTMP, SRT and HTTP sources), TurboJPEG, libmicrohttpd
# with GnuTLS (HTTPS), libva with its DRM back end, and libyaml (the configuration file).
# ca-certificates: pulled HTTPS sources' certificates are verified.
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
        libavcodec59 libavformat59 libavutil57 libswscale6 libturbojpeg0 libmicrohttpd12 libgnutls30 libva2 libva-drm2 libyaml-0-2 \
        ca-certificates \
        ${VA_DRIVERS} \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 frametap \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin frametap \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/frametap

COPY --from=builder /out/frametap /usr/local/bin/frametap

# Configuration is by FRAMETAP_* variables (see `frametap serve --help`), e.g.
# FRAMETAP_MAX_SESSIONS, FRAMETAP_BACKEND, FRAMETAP_AUTH_TOKEN, FRAMETAP_LOG_LEVEL, or by a YAML
# file mounted into the container and named by FRAMETAP_CONFIG (declared cameras included;
# FRAMETAP_STATE_DIR=/var/lib/frametap on a volume keeps PUT sessions across restarts: the folder
# belongs to the image's user, and a new volume mounted there takes its owner from it).
ENV FRAMETAP_HOST=0.0.0.0 \
    FRAMETAP_PORT=8080 \
    NVIDIA_DRIVER_CAPABILITIES=compute,video,utility
# The last one is read only by NVIDIA's container toolkit, on a host that runs the container with
# a GPU (--gpus all, CDI, the Kubernetes device plugin): it asks for the driver's video libraries
# (libnvcuvid, NVDEC) beside libcuda. Without a GPU it does nothing.

# Non-root (numeric, so Kubernetes' runAsNonRoot can verify it). To use /dev/dri, add the
# group that owns the render node on the host: --group-add "$(stat -c %g /dev/dri/renderD128)".
USER 10001:10001
EXPOSE 8080

# SIGTERM is the graceful stop: in-flight requests finish, streams end, exit status 0.
STOPSIGNAL SIGTERM
# The image has no curl: the binary checks itself (FRAMETAP_HOST/FRAMETAP_PORT, 3 s timeout).
HEALTHCHECK --interval=15s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/frametap", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/frametap"]
CMD ["serve"]
