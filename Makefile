# SPDX-License-Identifier: Apache-2.0
# sluice — top-level entry points. See README.md.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
PY         ?= /usr/bin/python3
FUZZ_SECONDS ?= 20
RUN_ARGS   ?=
# `make install`: where (PREFIX) and under which staging root (DESTDIR, for packaging)
PREFIX     ?= /usr/local
DESTDIR    ?=

# Which packages `deps` installs (scripts/install-deps.sh): what building and running need, plus
# what the target asked for (set per target below; it holds for the target's prerequisites too).
DEPS       ?= build

.PHONY: all deps build install build-asan test unit-test unit-test-asan system-test chaos run bench fuzz plots clean \
        deb deb-test static static-test fresh-test image image-test image-static image-static-test soak

all: build

test unit-test unit-test-asan system-test chaos soak build-asan: DEPS = test
bench: DEPS = bench
fuzz: DEPS = fuzz
plots: DEPS = plots
deb deb-test static static-test: DEPS = pkg
fresh-test: DEPS = fresh
image image-test image-static image-static-test: DEPS = image

deps:
	@bash scripts/install-deps.sh $(DEPS)

# the test targets (DEPS=test) need the unit tests built: CMake fails without cmocka instead
TESTS_REQUIRED = $(if $(filter test,$(DEPS)),ON,OFF)

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS_REQUIRED=$(TESTS_REQUIRED) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# sluiced (sbin), sluice (bin), libsluice and libsluice-client (shared + static), the headers
# (include/sluice/), the pkg-config files and the man pages; docs/operations.md "Installing".
install: build
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

# The Debian packages (debian/, dh + cmake) into build/deb, then lintian (errors fail):
# sluice (sluiced, sluice, the systemd unit), libsluice0.1, libsluice-client0.1, libsluice-dev.
deb: deps
	JOBS=$(JOBS) bash packaging/deb.sh $(BUILD)/deb

# The packages installed into a fresh Debian 12 root (debootstrap, cached under build/debroot),
# sluiced started there and called (tests/pkg/test_deb.py; root; a minute with the cache).
deb-test: deb
	$(PY) -m pytest -q -p no:cacheprovider tests/pkg/test_deb.py

# `make test` as CI runs it (CI=true) inside a fresh Debian 12 root (debootstrap minbase, cached
# under build/fresh; only a clone of HEAD inside): a package a test uses that
# scripts/install-deps.sh does not install fails here (root; about 25 minutes, 5 more the first time).
fresh-test: deps
	bash scripts/fresh-test.sh $(BUILD)/fresh

# A statically linked sluiced (build-static/bin/sluiced; -DSLUICE_STATIC=ON, see
# docs/operations.md "Static build" for what it leaves out and why), then its test.
STATIC_BUILD ?= build-static
static: deps
	@cmake -S . -B $(STATIC_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_STATIC=ON -DSLUICE_TESTS=OFF >/dev/null
	@cmake --build $(STATIC_BUILD) -j $(JOBS) --target sluiced

static-test: static
	SLUICE_STATIC_BUILD=$(STATIC_BUILD) $(PY) -m pytest -q -p no:cacheprovider tests/pkg/test_static.py

# An OCI image of sluiced (build/image/sluice, reference IMAGE_TAG, and the same as an OCI archive
# build/image/sluice-IMAGE_TAG.oci.tar), built by umoci without a container daemon from a root
# filesystem packaging/image/build.sh assembles: docs/operations.md "Container image".
# IMAGE_SOURCE: the org.opencontainers.image.source label (default: git's remote.origin.url).
IMAGE_DIR    ?= $(BUILD)/image
IMAGE_TAG    ?= $(shell cat VERSION)
IMAGE_SOURCE ?=
image: build
	bash packaging/image/build.sh $(BUILD) $(IMAGE_DIR) $(IMAGE_TAG) $(IMAGE_SOURCE)

# The image built, unpacked (umoci unpack) and its entrypoint started (tests/system/test_image.py,
# also part of `make test`; root for the start, under a minute).
image-test: build
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/system/test_image.py

# The smaller image of the static sluiced alone (make static: no etcd, no Kubernetes discovery,
# no CLI), reference IMAGE_TAG-static in build/image/sluice-static; and its test.
image-static: static
	IMAGE_STATIC=1 bash packaging/image/build.sh $(STATIC_BUILD) $(IMAGE_DIR) $(IMAGE_TAG)-static $(IMAGE_SOURCE)

image-static-test: static
	SLUICE_STATIC_BUILD=$(STATIC_BUILD) $(PY) -m pytest -q -rs -p no:cacheprovider -k static tests/system/test_image.py

# The project also builds warning-free with clang (the ASan build uses clang, the default build gcc).
build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DSLUICE_SANITIZE=ON -DSLUICE_TESTS_REQUIRED=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

unit-test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit-test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

# The nemesis soak (docs/cluster.md "The soak"; root): 5 nodes in network namespaces with etcd,
# open-loop load, seeded overlapping faults, every decision checked against the bounds table;
# build/soak/report.json, exit 1 on any violation. `make test` runs a 60-second profile.
SOAK_SECONDS ?= 600
SOAK_SEED    ?= 1
soak: build
	$(PY) tests/soak/soak.py --seconds $(SOAK_SECONDS) --seed $(SOAK_SEED) --out $(BUILD)/soak

# The system tests, the fast part of the chaos suite (tests/chaos, without @pytest.mark.slow) and
# the operations kit's checks (tests/ops: promtool on the alert rules, the dashboard's series).
system-test: build
	$(PY) -m pytest -q -rs -p no:cacheprovider -m "not slow" tests/system tests/chaos tests/ops tests/soak

# The whole chaos and abuse suite (attacks against a real sluiced, a good client measured) and the
# system tests marked slow (large clusters, timed failure detection): a few minutes.
# SLUICE_CHAOS_REPORT=file collects each attack's figures as JSON lines.
chaos: build
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/chaos
	$(PY) -m pytest -q -rs -p no:cacheprovider -m slow tests/system

test: unit-test unit-test-asan system-test

run: build
	@bash scripts/run.sh $(RUN_ARGS)

bench: build
	@bash bench/run.sh

fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DSLUICE_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@bash tests/fuzz/run.sh $(FUZZ_BUILD)/bin $(FUZZ_SECONDS)

plots: build
	@bash scripts/plots.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(STATIC_BUILD)
