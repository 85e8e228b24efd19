# FrameTap build entry points. Every target installs what it needs first (`deps`),
# so a fresh Debian 12 machine with a Swift 6 toolchain needs nothing else.

SWIFT      ?= swift
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CORPUS     ?= ../shared/testdata/h264
DEBUG_BIN  := .build/debug/frametap
RELEASE_BIN:= .build/release/frametap

# Build and runtime libraries, plus the tools the tests and fixture script call.
APT_PACKAGES := pkg-config libavcodec-dev libavutil-dev libswscale-dev libturbojpeg0-dev \
                libmicrohttpd-dev libva-dev ffmpeg curl jq python3

.PHONY: deps build release run test conformance fixtures clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	$(RELEASE_BIN) serve

test: build
	$(SWIFT) test
	@if [ -d "$(CORPUS)" ]; then $(MAKE) --no-print-directory conformance CORPUS="$(CORPUS)"; \
	 else echo "conformance: $(CORPUS) not found, skipped"; fi

conformance: build
	scripts/conformance.sh "$(CORPUS)" "$(DEBUG_BIN)"

# Regenerates the committed fixtures and their manifest (needs ffmpeg with libx264).
fixtures: deps
	scripts/make-fixtures.sh Tests/Fixtures

clean:
	rm -rf .build
