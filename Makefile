# The two commands: `make run` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
REPO ?= model_repository
ARGS ?=

.PHONY: run test test-parity lint bench bench-memory bench-cameras rtsp-camera demo-models check clean mosquitto web-assets chromium systemd-analyze deb test-appliance shellcheck perf-analyzer test-perf-analyzer prometheus test-fleet

# Debian's packages, installed only when missing (as root in CI, else sudo);
# `apt-get update` runs only when a first install attempt fails.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_GET := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0
apt_install = $(APT_GET) install --no-install-recommends $(1) \
	|| { $(APT_GET) update && $(APT_GET) install --no-install-recommends $(1); }

# setup.py builds web/static/vendor (or stops): web-assets first brings npm.
$(STAMP): setup.cfg setup.py pyproject.toml | web-assets
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[cpu,test]'
	touch $(STAMP)

demo-models: $(STAMP)
	$(PY) scripts/build_demo_repository.py $(REPO)

# mosquitto lives in /usr/sbin, often not on a non-root PATH: look there too.
mosquitto:
	@command -v mosquitto >/dev/null 2>&1 || command -v /usr/sbin/mosquitto >/dev/null 2>&1 \
		|| $(call apt_install,mosquitto mosquitto-clients)
	@command -v openssl >/dev/null 2>&1 || $(call apt_install,openssl)

# uPlot from web/package-lock.json (npm ci) copied into web/static/vendor/;
# the .deb and wheel carry the copies, so the device needs no node.
web-assets:
	@command -v npm >/dev/null 2>&1 || [ -f web/static/vendor/uPlot.iife.min.js ] \
		|| $(call apt_install,nodejs npm)
	$(PYTHON) scripts/build_web.py

# The RTSP test camera (tests/rtsp_camera.py, scripts/rtsp_test_camera.py):
# GStreamer's RTSP server and H.264 encoder for the system's python3; its
# software H.264 decoder (openh264dec) and gst-inspect-1.0 for the tests of
# the generated hardware pipelines (tests/streams/test_gst_pipelines.py).
rtsp-camera:
	@/usr/bin/python3 -c "import gi; gi.require_version('GstRtspServer', '1.0'); \
		from gi.repository import GstRtspServer; from gi.repository import Gst; Gst.init(None); \
		assert all(map(Gst.ElementFactory.find, ('x264enc', 'rtph264pay', 'openh264dec')))" \
		2>/dev/null && command -v gst-inspect-1.0 >/dev/null \
		|| $(call apt_install,python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-tools \
		gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly \
		gstreamer1.0-plugins-bad)

# The dashboard's browser tests drive Debian's chromium through chromedriver.
chromium:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
		|| $(call apt_install,chromium chromium-driver)

# tests/packaging/test_systemd_unit.py checks the unit with systemd-analyze
# (verify, security --offline): Debian's systemd package carries it.
systemd-analyze:
	@command -v systemd-analyze >/dev/null 2>&1 || $(call apt_install,systemd)

# etc/demo.yaml adds a synthetic road stream through lane_pipeline: lanes
# flow in the log with no camera, and to a local mosquitto whose port is
# printed first. ARGS go to `edgebox serve` and may override it (--config FILE).
run: demo-models mosquitto web-assets
	$(PY) scripts/run_demo.py --repository $(REPO) $(ARGS)

# NVIDIA's perf_analyzer for tests/e2e/test_perf_analyzer.py: tritonclient
# 2.41.0's binary and the CUDA runtime it links (no GPU used), 16 MB downloaded
# once into .perf_analyzer/, and Debian's libb64-0d.
perf-analyzer: $(STAMP)
	@dpkg -s libb64-0d >/dev/null 2>&1 || $(call apt_install,libb64-0d)
	$(PY) scripts/perf_analyzer.py install

# Opt-in, a few minutes: perf_analyzer in each of its usual modes against a
# real daemon (tests/e2e/test_perf_analyzer_modes.py), beside the quick subset
# `make test` runs (tests/e2e/test_perf_analyzer.py).
test-perf-analyzer: perf-analyzer
	EDGEBOX_PERF_ANALYZER=1 $(PY) -m pytest -q tests/e2e/test_perf_analyzer.py tests/e2e/test_perf_analyzer_modes.py

lint: $(STAMP)
	$(VENV)/bin/ruff check edgebox tests bench scripts

# tests/appliance/ checks scripts/provision.sh and scripts/flash/ with it.
shellcheck:
	@command -v shellcheck >/dev/null 2>&1 || $(call apt_install,shellcheck)

# The fleet simulation's view of the devices (tests/fleet_sim/): Debian's
# prometheus, 19 MB downloaded, smaller than chromium, so `make test` has it
# too and its 3-device fleet is scraped like the full one.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || $(call apt_install,prometheus)

test: $(STAMP) lint mosquitto web-assets chromium systemd-analyze shellcheck perf-analyzer prometheus rtsp-camera
	$(PY) -m pytest -q

# Opt-in, a few minutes: the fleet simulation with 20 devices (tests/fleet_sim/;
# `make test` runs it with 3). It prints the fleet's footprint (start time, RSS,
# idle CPU).
FLEET_DEVICES ?= 20
test-fleet: $(STAMP) mosquitto prometheus
	EDGEBOX_FLEET_DEVICES=$(FLEET_DEVICES) $(PY) -m pytest -q -o timeout=600 tests/fleet_sim

# Opt-in: edgebox against a real Triton 2.51 (PyPI's nvidia-pytriton, 400 MB,
# installed once into .parity/), the same requests to both, answers compared
# (tests/parity/). EDGEBOX_TRITON_HOME may point at an installed one instead.
test-parity: $(STAMP)
	$(PY) scripts/triton_reference.py install --home $${EDGEBOX_TRITON_HOME:-.parity}
	EDGEBOX_PARITY=1 $(PY) -m pytest -q tests/parity

# The offline .deb (docs/appliance.md): DEB_ARCH=arm64|amd64, DEB_PYTHON=3.10|3.11.
DEB_ARCH ?= arm64
DEB_PYTHON ?= 3.10
deb: $(STAMP) web-assets
	PYTHON=$(PY) scripts/build_deb.sh --arch $(DEB_ARCH) --python $(DEB_PYTHON)

# Opt-in, as root: the amd64 .deb installed by scripts/flash/install-into-rootfs.sh
# into a debootstrapped Debian 12 root with the network cut, then served,
# upgraded and purged there (tests/appliance/, docs/appliance.md). The root is
# cached in .appliance/. APPLIANCE_ARM64=1 adds the arm64 package in an arm64
# root under qemu-user-static (slow).
APPLIANCE_ARM64 ?=
test-appliance: $(STAMP) web-assets shellcheck
	@command -v debootstrap >/dev/null 2>&1 || $(call apt_install,debootstrap)
	@command -v dpkg-buildpackage >/dev/null 2>&1 && command -v dh >/dev/null 2>&1 \
		|| $(call apt_install,dpkg-dev debhelper python3-pip python3-setuptools python3-wheel)
	@[ -z "$(APPLIANCE_ARM64)" ] || [ -x /usr/bin/qemu-aarch64-static ] \
		|| $(call apt_install,qemu-user-static binfmt-support)
	EDGEBOX_APPLIANCE=1 EDGEBOX_APPLIANCE_ARM64=$(APPLIANCE_ARM64) $(PY) -m pytest -q tests/appliance

# BENCH_ARGS go to bench/run.py: BENCH_ARGS="--only perf-analyzer --quick".
# Issue 22's part runs perf_analyzer against a real Triton 2.51 too where
# .parity/ holds one (make test-parity installs it).
BENCH_ARGS ?=
bench: demo-models perf-analyzer
	$(PY) -m pip install -q -r bench/requirements.txt
	$(PY) bench/run.py $(BENCH_ARGS)

# Opt-in, about 20 minutes: where the daemon's memory goes, by component, at
# start and through 10 minutes of the demo under load, untraced then traced
# (bench/memory_budget.py; BENCH_ARGS="--minutes 3" for a shorter look).
bench-memory: demo-models mosquitto
	$(PY) -m bench.memory_budget $(BENCH_ARGS)

# Opt-in, about 5 minutes: glass-to-result from a camera that stamps its clock
# into its frames, and four RTSP cameras sharing lane_pipeline (bench/cameras.py).
bench-cameras: demo-models mosquitto rtsp-camera
	$(PY) -m bench.cameras $(BENCH_ARGS)

check: demo-models
	$(VENV)/bin/edgebox check $(REPO)

clean:
	rm -rf $(VENV) build dist *.egg-info bench/out
