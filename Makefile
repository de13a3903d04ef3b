# ringload - see README.md.
#
#   make            library (static + shared), build/ringload, build/rlperf
#   make test       build and run every test (one line per test, then a total)
#   make check      structure checks: layers call only down, no circles
#                   between files, no block of 6+ lines written twice,
#                   functions of at most 80 lines (or a written reason)
#   make asan       the same tests under AddressSanitizer + UBSan
#   make tsan       the same tests under ThreadSanitizer
#   make fuzz       libFuzzer targets (clang) in build-fuzz/
#   make fuzz-ci    every fuzz target from its corpus, fixed seed and runs (CI)
#   make fuzz-long  every fuzz target for FUZZ_SECONDS (600) each, nice'd
#   make mutants    mutation testing: does the suite kill each mutant?
#   make bench      benchmark suite against fio (perf/)
#   make demo       generate a sample checkpoint and load it (README's main job)
#   make install    library, header, ringload.pc, ringload, rlperf, man pages and the
#                   Python package under PREFIX (its dist-packages: PYDIR)
#   make pycheck    pip install ., -e ., python -m build on Python 3.9 .. 3.13 (pyenv),
#                   and the manylinux wheel where the system libraries are hidden
#   make pydeps     the venv of PyPI packages the Python tests and benchmarks use
#                   (python/requirements-test.txt), outside the clone; make test
#                   runs the Python tests with it and with Debian's python3
#   make pydeps-vllm  the venv of vLLM and transformers (python/requirements-vllm.txt):
#                   their tests and perf/vllm_load.py
#   make deps       install missing Debian packages with apt-get
#
# Quiet by default; V=1 shows full commands.

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BUILD ?= build
SAN ?=
# The version: api/ringload.h's three numbers, read by everything else.
VERSION := $(shell sed -n 's/^\#define RINGLOAD_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' \
	api/ringload.h | paste -sd.)

CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

V ?= 0
ifeq ($(V),0)
Q := @
say = @printf '  %-7s %s\n' $(1) $(2);
else
Q :=
say :=
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wno-unused-parameter
# User flags (make CFLAGS=-O3, CC=clang) are kept; what the code needs is
# added with override, so a command-line CFLAGS cannot drop it.
CFLAGS ?= -O2 -g
override CPPFLAGS += -D_GNU_SOURCE -Iapi -Icommon
override CFLAGS += -std=gnu11 -fPIC -pthread $(WARN) -fvisibility=hidden
# The library never links jemalloc: Debian's is built with initial-exec TLS
# and would make libringload.so fail to dlopen (common/alloc.c). Our own
# programs link it, and the library then uses it through mallocx.
LDLIBS := -luring -laio -lcjson -lcrypto -lpthread -lm
EXE_LDLIBS := -ljemalloc
TEST_LDLIBS := -lcrypto

ifeq ($(SAN),asan)
override CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=address,undefined
override CPPFLAGS += -DRL_LIBC_MALLOC -DRL_SANITIZER
EXE_LDLIBS :=
endif
ifeq ($(SAN),tsan)
override CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=thread
override CPPFLAGS += -DRL_LIBC_MALLOC -DRL_SANITIZER
EXE_LDLIBS :=
endif

# Test hooks (engine/hooks.c, the fault injector engine/be_fault.c, and
# the checks the backends make for them) exist only in the test archive:
# the engine compiled again with -DRL_TEST_HOOKS, with the rest of the
# release objects. The test programs link it; the release libraries have
# no hook (make check: tests/check/hooks.py).
HOOK_SRC := engine/hooks.c engine/be_fault.c
LIB_SRC := $(filter-out $(HOOK_SRC),$(wildcard common/*.c planner/*.c engine/*.c sink/*.c exec/*.c api/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# The device registry too: its test line (sink/test_dev.c) is the test
# build's own.
HOOK_SINK := sink/registry.c sink/test_dev.c
HOOK_OBJ := $(patsubst %.c,$(BUILD)/obj-hooks/%.o,$(wildcard engine/*.c) $(HOOK_SINK))
TEST_OBJ := $(filter-out $(BUILD)/obj/engine/% $(HOOK_SINK:%.c=$(BUILD)/obj/%.o),$(LIB_OBJ)) \
	$(HOOK_OBJ)
# tools/: the ringload command (every .c but mkckpt's), and mkckpt, which
# shares only the library-free option parser and helpers.
TOOL_SRC := $(filter-out tools/mkckpt.c,$(wildcard tools/*.c))
TOOL_HDR := $(wildcard tools/*.h)
GEN_SRC := $(if $(wildcard tools/mkckpt.c),tools/mkckpt.c tools/opts.c tools/cli_helpers.c)
PERF_SRC := $(wildcard perf/rlperf*.c)
PERF_OBJ := $(PERF_SRC:%.c=$(BUILD)/obj/%.o)
PERF_BENCH := $(patsubst perf/%.c,$(BUILD)/perf/%,$(wildcard perf/bench_*.c))
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(filter-out tests/test_%.c,$(wildcard tests/*.c))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/tests/replay_%)

# examples/: programs a runtime author reads, built against the public
# header and the shared library only (test_examples runs them).
EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

# The public header and the small one of shared values it re-exports.
PUBLIC_HDR := api/ringload.h common/ringload_types.h

STATIC := $(BUILD)/libringload.a
TEST_STATIC := $(BUILD)/libringload_test.a
SHARED := $(BUILD)/libringload.so
TOOLS := $(BUILD)/ringload $(if $(PERF_SRC),$(BUILD)/rlperf) $(if $(GEN_SRC),$(BUILD)/mkckpt)

# libringload_mpi (mpi/): built where Open MPI's compiler wrapper is
# installed (make deps installs it); the core library stays MPI-free.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_SRC := $(wildcard mpi/*.c)
ifneq ($(MPICC),)
MPI_LIB := $(BUILD)/libringload_mpi.so
MPI_PLUGIN := $(BUILD)/ringload-mpi.so
MPI_BIN := $(BUILD)/tests/mpi_driver $(BUILD)/perf/mpi_bench
endif

.PHONY: all test pydeps check asan tsan ubsan fuzz fuzz-ci fuzz-long fuzz-merge mutants bench demo install uninstall deps clean check-deps
.DEFAULT_GOAL := all

all: $(STATIC) $(SHARED) $(TOOLS) $(PERF_BENCH) $(EXAMPLE_BIN) $(MPI_LIB) $(MPI_PLUGIN) $(MPI_BIN)

-include $(LIB_OBJ:.o=.d) $(PERF_OBJ:.o=.d) $(HOOK_OBJ:.o=.d)

$(BUILD)/obj/%.o: %.c
	$(call say,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

# The CUDA driver's declarations are checked against the toolkit's cuda.h
# where it is installed (sink/cuda_drv.c); the build never needs it.
CUDA_H ?= $(wildcard /usr/local/cuda/include/cuda.h)
$(BUILD)/obj/sink/cuda_drv.o: override CPPFLAGS += $(if $(CUDA_H),-DRL_HAVE_CUDA_H -I$(dir $(CUDA_H)))
$(BUILD)/obj-hooks/%.o: %.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -DRL_TEST_HOOKS $(CFLAGS) -MMD -MP -c -o $@ $<

$(STATIC): $(LIB_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TEST_STATIC): $(TEST_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ) api/ringload.map
	$(call say,LD,$@)
	$(Q)$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,--version-script=api/ringload.map \
		-Wl,-soname,libringload.so.0 -o $@.0 $(LIB_OBJ) $(LDLIBS)
	$(Q)ln -sf libringload.so.0 $@

# The CLI is a thin client of the public header and links the shared
# library, so the host-side malloc stays libc's (see common/alloc.c). It
# finds the library beside itself (the build) or in ../lib (an install).
$(BUILD)/ringload: $(TOOL_SRC) $(TOOL_HDR) $(SHARED) $(PUBLIC_HDR)
	$(call say,LD,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(TOOL_SRC) \
		-L$(BUILD) -lringload -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' -lm $(EXE_LDLIBS)

# The MPI executor links the shared library and Open MPI (mpicc adds it);
# -lcrypto: the checkpoint digest the ranks compare. Its version script
# alone decides what it exports (default visibility, local: *).
$(MPI_LIB): $(MPI_SRC) $(wildcard mpi/*.h) mpi/ringload_mpi.map $(SHARED)
	$(call say,LD,$@)
	$(Q)$(MPICC) $(CPPFLAGS) -Impi $(CFLAGS) -fvisibility=default $(LDFLAGS) -shared \
		-Wl,--version-script=mpi/ringload_mpi.map -Wl,-soname,libringload_mpi.so.0 \
		-o $@.0 $(MPI_SRC) -L$(BUILD) -lringload -Wl,-rpath,'$$ORIGIN' -lcjson -lpthread
	$(Q)ln -sf libringload_mpi.so.0 $@

# The MPI test driver: a rank program that test_mpi starts under mpirun.
$(BUILD)/tests/mpi_driver: tests/mpi/mpi_driver.c tests/mpi/dump.h $(MPI_LIB)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) $(CPPFLAGS) -Impi $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) -lringload_mpi \
		-lringload -Wl,-rpath,'$$ORIGIN/..'

# `ringload load --mpi`'s rank program: ringload dlopens it (so ringload
# itself links no MPI); the command's sources, but its main, come along.
PLUGIN_SRC := tools/mpi/load_mpi.c $(filter-out tools/ringload.c,$(TOOL_SRC))
$(MPI_PLUGIN): $(PLUGIN_SRC) $(TOOL_HDR) $(MPI_LIB)
	$(call say,LD,$@)
	$(Q)$(MPICC) $(CPPFLAGS) -Impi -Itools $(CFLAGS) $(LDFLAGS) -shared -o $@ $(PLUGIN_SRC) \
		-L$(BUILD) -lringload_mpi -lringload -Wl,-rpath,'$$ORIGIN:$$ORIGIN/..' -lm

# test_mpi shares the dump layout with its rank program.
$(BUILD)/tests/test_mpi: tests/mpi/dump.h

# The cluster benchmark's rank program (perf/cluster_bench.sh).
$(BUILD)/perf/mpi_bench: perf/mpi_bench.c $(MPI_LIB)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) $(CPPFLAGS) -Impi $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) -lringload_mpi \
		-lringload -Wl,-rpath,'$$ORIGIN/..'

$(BUILD)/examples/%: examples/%.c $(PUBLIC_HDR) $(SHARED)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -Iapi $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) -lringload \
		-Wl,-rpath,'$$ORIGIN/..'

# The sample-checkpoint generator needs nothing of the library.
$(BUILD)/mkckpt: $(GEN_SRC) $(TOOL_HDR)
	$(call say,LD,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(GEN_SRC)

# rlperf links from one object per source file (rebuilds only what
# changed; tests/check/layers.py reads the calls off the objects).
$(BUILD)/rlperf: $(PERF_OBJ) $(STATIC)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(PERF_OBJ) $(STATIC) $(LDLIBS) $(EXE_LDLIBS)

# Benchmark programs of perf/ (bench_*.c), one file each.
$(BUILD)/perf/%: perf/%.c perf/perf_time.h $(STATIC)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS) $(EXE_LDLIBS)

# Thread creation passes a seam (tests/seams/threads.c) that fails it on
# demand, as a limit on tasks does.
TEST_SEAMS := tests/seams/threads.c
$(BUILD)/tests/%: tests/%.c $(TEST_HELPERS) $(TEST_SEAMS) tests/harness.h $(TEST_STATIC)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -DRL_TEST_HOOKS -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(TEST_HELPERS) $(TEST_SEAMS) $(TEST_STATIC) $(LDLIBS) $(EXE_LDLIBS) $(TEST_LDLIBS) \
		-Wl,--wrap=pthread_create

# test_dlopen links nothing of ringload and no jemalloc: it loads the shared
# library with dlopen, as a runtime does.
$(BUILD)/tests/test_dlopen: tests/test_dlopen.c tests/harness.c tests/harness.h $(SHARED)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< tests/harness.c

# The fake CUDA driver (tests/fakecuda): a libcuda.so.1 test_cuda loads
# through RL_LIBCUDA, built with the tests' sanitizer flags (its functions
# are the driver's, declared by cuda.h, not by a header of ours).
FAKECUDA := $(BUILD)/tests/fakecuda/libcuda.so.1
$(FAKECUDA): tests/fakecuda/fakecuda.c tests/fakecuda/fakecuda.h
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Wno-missing-prototypes $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 \
		-o $@ $<
$(BUILD)/tests/test_cuda: $(FAKECUDA) tests/fakecuda/fakecuda.h
$(BUILD)/tests/test_transport: $(FAKECUDA) tests/fakecuda/fakecuda.h
$(BUILD)/tests/test_mpi: $(FAKECUDA)

# perf/gpu_check.sh --quick against the fake driver (tests/gpu_check_fake.sh
# judges it: only torch's CUDA steps may skip there).
GPU_CHECK_TEST := tests/gpu_check_fake.sh
test: $(FAKECUDA)

# test_cli compiles the option parser in (tests/test_cli.c includes it).
$(BUILD)/tests/test_cli: tools/opts.c tools/opts.h

# test_rlperf compiles rlperf's parts in (all but main), and runs rlperf.
$(BUILD)/tests/test_rlperf: $(filter-out perf/rlperf_main.c,$(PERF_SRC)) $(wildcard perf/*.h) \
	$(if $(PERF_SRC),$(BUILD)/rlperf)

$(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(TEST_HELPERS) $(STATIC)
	$(call say,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c \
		$(TEST_HELPERS) $(STATIC) $(LDLIBS) $(TEST_LDLIBS)

# Tests find the shared fixtures here (never copied into the repo).
TESTDATA ?= $(abspath ../shared/testdata)

# ...and those tests/fixtures/gen_fixtures.py writes with safetensors' own
# writer, so that every clone has fixtures: VENV_PYTHON (make pydeps, below)
# is a python with PyPI's safetensors; without it, FIXTURES/UNAVAILABLE says
# why (and the recipe runs again next time).
FIXTURES := $(BUILD)/testdata
.PHONY: fixtures
fixtures: $(FIXTURES)/VERSION
$(FIXTURES)/VERSION: tests/fixtures/gen_fixtures.py | pydeps
	$(call say,GEN,$(FIXTURES))
	$(Q)if command -v $(VENV_PYTHON) >/dev/null; then $(VENV_PYTHON) $< $(FIXTURES); else \
		mkdir -p $(FIXTURES) && echo "the generated fixtures need $(VENV_PYTHON) with" \
		"safetensors (make pydeps)" >$(FIXTURES)/UNAVAILABLE; fi
test: fixtures
test: export RL_FIXTURES := $(abspath $(FIXTURES))

# When check-deps has just installed Open MPI, this make chose no MPI parts
# (mpicc was absent when it read this file; MPI_LIB says so, MPICC itself is
# expanded anew): a second make builds them, so that the MPI tests run on a
# fresh machine's first make test too; not where mpicc is still absent, nor
# after an explicit `make test MPICC=`.
test: check-deps all $(TEST_BIN) $(REPLAY_BIN)
	$(Q)$(if $(MPI_LIB),,if m=$$(command -v mpicc) && \
		[ "$(origin MPICC)" != "command line" ]; then \
		$(MAKE) --no-print-directory all MPICC=$$m; fi)
	$(Q)RL_TESTDATA=$(TESTDATA) RL_BUILD=$(BUILD) tests/run.sh $(TEST_BIN) $(REPLAY_BIN) $(GPU_CHECK_TEST) \
		$(PY_TESTS) tests/install.sh $(FIO_SAME_IO)

# rlperf against fio on the same jobs, at the device (not under a
# sanitizer, whose slower submission is not fio's).
FIO_SAME_IO := $(if $(SAN),,tests/fio_same_io.py)

# Structure checks (tests/check/): link-time calls per object file, the
# #include graph of the sources, repeated blocks of source, and one
# executor (mpi/ and _dist.py run none of their own).
PYTHON ?= /usr/bin/python3
check: all $(TEST_STATIC)
	$(Q)RL_BUILD=$(BUILD) tests/run.sh tests/check/layers.py tests/check/dups.py \
		tests/check/funclen.py tests/check/hooks.py tests/check/one_executor.py

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan SAN=asan test

ubsan: asan

tsan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-tsan SAN=tsan test

# libFuzzer targets (clang): the library and test helpers are compiled once
# for them (build-fuzz/obj), each target linked with -fsanitize=fuzzer.
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=gnu11 -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) -DRL_LIBC_MALLOC \
	-Wno-unused-command-line-argument
FUZZ_OBJ := $(patsubst %.c,build-fuzz/obj/%.o,$(LIB_SRC) $(TEST_HELPERS))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)

build-fuzz/obj/%.o: %.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)clang $(CPPFLAGS) -Itests $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(call say,FUZZ,$@)
	$(Q)clang $(CPPFLAGS) -Itests $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) \
		$(LDLIBS) $(TEST_LDLIBS)

-include $(FUZZ_OBJ:.o=.d)
.SECONDARY: $(FUZZ_OBJ)

fuzz: check-deps $(FUZZ_BIN)

# CI: every target from its committed corpus, deterministically (fixed seed
# and number of runs); a crash, a leak or an input over 5 s fails. New
# inputs go to build-fuzz/new/, never into the committed corpus. The run
# counts keep the whole to a few minutes.
FUZZ_RUNS_header := 300000
FUZZ_RUNS_spec := 200000
FUZZ_RUNS_ckpt := 40000
FUZZ_RUNS_plan := 150000
fuzz-ci: fuzz
	$(Q)for n in $(FUZZ_NAMES); do \
		runs=$$(case $$n in header) echo $(FUZZ_RUNS_header);; spec) echo $(FUZZ_RUNS_spec);; \
			ckpt) echo $(FUZZ_RUNS_ckpt);; *) echo $(FUZZ_RUNS_plan);; esac); \
		mkdir -p build-fuzz/new/$$n build-fuzz/artifacts; \
		echo "  FUZZ    $$n: $$runs runs, seed 1"; \
		build-fuzz/fuzz_$$n -seed=1 -runs=$$runs -timeout=5 -rss_limit_mb=2560 \
			-print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/$$n- \
			build-fuzz/new/$$n tests/fuzz/corpus/$$n >build-fuzz/$$n.log 2>&1 || \
			{ tail -n 40 build-fuzz/$$n.log; echo "  FUZZ    $$n FAILED (build-fuzz/$$n.log)"; exit 1; }; \
		grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' build-fuzz/$$n.log | tr '\n' ' '; echo; \
	done

# Long time-based runs (FUZZ_SECONDS each, nice'd), never in CI: a new find
# here cannot fail an unrelated change. Grown inputs stay in
# build-fuzz/grown/; `make fuzz-merge` adds the ones that add coverage to the
# committed corpus.
FUZZ_SECONDS ?= 600
fuzz-long: fuzz
	$(Q)for n in $(FUZZ_NAMES); do \
		mkdir -p build-fuzz/grown/$$n build-fuzz/artifacts; \
		echo "  FUZZ    $$n for $(FUZZ_SECONDS) s"; \
		nice -n 10 build-fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=5 \
			-rss_limit_mb=2560 -print_final_stats=1 \
			-artifact_prefix=build-fuzz/artifacts/$$n- \
			build-fuzz/grown/$$n tests/fuzz/corpus/$$n >build-fuzz/$$n-long.log 2>&1 || \
			{ tail -n 40 build-fuzz/$$n-long.log; exit 1; }; \
		grep -E '^stat::number_of_executed_units' build-fuzz/$$n-long.log; \
	done

fuzz-merge: fuzz
	$(Q)for n in $(FUZZ_NAMES); do \
		build-fuzz/fuzz_$$n -merge=1 tests/fuzz/corpus/$$n build-fuzz/grown/$$n; \
	done

# Mutation testing (tests/mutants/): each mutant of the list alone, in a
# scratch copy of the tree; reports the kill rate (target >= 90%).
mutants:
	$(Q)tests/mutants/run.sh $(MUTANTS_LIST)

bench: all
	$(Q)perf/bench.sh

demo: check-deps all
	$(Q)tools/demo.sh $(BUILD)

# A LIBDIR the dynamic loader searches (ld.so.conf's folders, /lib, /usr/lib:
# what ldconfig -v lists) needs its cache refreshed before a program linked
# with -lringload (the README's pkg-config line) finds libringload.so.0
# there; a staged install (DESTDIR) is left to the package's own scripts.
LDCONFIG ?= $(or $(shell command -v ldconfig 2>/dev/null),/sbin/ldconfig)
define ldconfig_if_in_path
	$(Q)if [ -z "$(DESTDIR)" ] && $(LDCONFIG) -vNX 2>/dev/null | \
		sed -n 's/^\([^[:space:]][^:]*\):.*/\1/p' | xargs -r realpath -mq | \
		grep -qxF "$$(realpath -m $(LIBDIR))"; then \
		echo "  LDCONFIG $(LIBDIR) is in the loader's path"; $(LDCONFIG); fi
endef

# ringload finds the library through its rpath $ORIGIN/../lib, so BINDIR
# and LIBDIR must stay siblings for a prefix outside the loader's path
# (else LD_LIBRARY_PATH=LIBDIR); rlperf links the library statically.
# ringload.h is installed beside ringload_types.h, and includes it from
# its own folder rather than from ../common/.
MANPAGES := $(wildcard man/ringload.1 man/rlperf.1)
install: $(STATIC) $(SHARED) $(TOOLS) $(MPI_LIB) $(MPI_PLUGIN)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(MANDIR)/man1
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/libringload.a
	install -m 755 $(SHARED).0 $(DESTDIR)$(LIBDIR)/libringload.so.0
	ln -sf libringload.so.0 $(DESTDIR)$(LIBDIR)/libringload.so
	sed 's|"../common/ringload_types.h"|"ringload_types.h"|' api/ringload.h \
		> $(DESTDIR)$(INCDIR)/ringload.h
	chmod 644 $(DESTDIR)$(INCDIR)/ringload.h
	install -m 644 common/ringload_types.h $(DESTDIR)$(INCDIR)/ringload_types.h
	install -m 755 $(BUILD)/ringload $(if $(PERF_SRC),$(BUILD)/rlperf) $(DESTDIR)$(BINDIR)/
	$(if $(MANPAGES),install -m 644 $(MANPAGES) $(DESTDIR)$(MANDIR)/man1/)
	$(if $(MPI_LIB),install -d $(DESTDIR)$(LIBDIR)/ringload && \
		install -m 755 $(MPI_LIB).0 $(DESTDIR)$(LIBDIR)/libringload_mpi.so.0 && \
		ln -sf libringload_mpi.so.0 $(DESTDIR)$(LIBDIR)/libringload_mpi.so && \
		install -m 644 mpi/ringload_mpi.h $(DESTDIR)$(INCDIR)/ringload_mpi.h && \
		install -m 755 $(MPI_PLUGIN) $(DESTDIR)$(LIBDIR)/ringload/ringload-mpi.so)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' \
		ringload.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/ringload.pc
	$(call ldconfig_if_in_path)

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libringload.a $(DESTDIR)$(LIBDIR)/libringload.so* \
		$(DESTDIR)$(INCDIR)/ringload.h $(DESTDIR)$(INCDIR)/ringload_types.h \
		$(DESTDIR)$(LIBDIR)/pkgconfig/ringload.pc \
		$(DESTDIR)$(BINDIR)/ringload $(DESTDIR)$(BINDIR)/rlperf \
		$(DESTDIR)$(MANDIR)/man1/ringload.1 $(DESTDIR)$(MANDIR)/man1/rlperf.1 \
		$(DESTDIR)$(LIBDIR)/libringload_mpi.so* $(DESTDIR)$(INCDIR)/ringload_mpi.h \
		$(DESTDIR)$(LIBDIR)/ringload/ringload-mpi.so
	$(call ldconfig_if_in_path)

# The install forms on every Python the package declares (CI; PyPI or pip's
# cache): python/tests/python-versions.sh.
.PHONY: pycheck
pycheck: all
	$(Q)tests/run.sh python/tests/python-versions.sh

# Debian packages the build, the tests and the benchmarks need.
DEB_PKGS := liburing-dev libaio-dev libjemalloc-dev libcjson-dev libssl-dev clang \
	libclang-rt-14-dev fio gnuplot-nox util-linux binutils python3 python3-numpy python3-pytest \
	python3-venv \
	python3-torch openmpi-bin libopenmpi-dev groff-base man-db time
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "  DEPS    installing:" $$missing; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

# Installs what is missing, quietly when nothing is.
check-deps: deps

clean:
	rm -rf build build-asan build-tsan build-fuzz $(PY_LINK)

# ---- Python package: python/ringload, ctypes over libringload.so ----
# make links the built library next to the package (PYTHONPATH=python works
# from the build tree); pip install . / pip wheel . build it with the
# Makefile and put the library inside the package (pyproject.toml,
# python/backend/ringload_build.py); make install installs the package under PYDIR
# with a link to the installed library. PYDIR is the dist-packages of
# $(PYTHON) under PREFIX: on Debian's path for PREFIX /usr/local and /usr;
# another PREFIX needs PYTHONPATH=PYDIR (docs/python.md).
# The tests run as two programs of run.sh: with $(PYTHON) (set above) and
# with the venv of make pydeps ($(VENV_PYTHON)).
PY_VERSION = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PYDIR ?= $(PREFIX)/lib/python$(PY_VERSION)/dist-packages
PY_LINK := python/ringload/libringload.so.0
PY_LAYOUT := $(BUILD)/tests/py_layout
PY_TESTS := python/tests/python-tests.sh python/tests/python-venv-tests.sh

# The venv of PyPI packages (python/pydeps.sh), keyed by the requirements'
# hash, in the user's cache: CI runs on one machine share it, a change of
# the requirements builds another. RL_VENV overrides the path (an existing
# venv there is used as it is).
PY_REQS := python/requirements-test.txt
RL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ringload
RL_VENV ?= $(RL_CACHE)/venv-$(shell sha256sum $(PY_REQS) | cut -c1-12)
VENV_PYTHON := $(RL_VENV)/bin/python

pydeps:
	$(Q)python/pydeps.sh $(PY_REQS) $(RL_VENV)

print-pydir:
	@echo $(PYDIR)

print-version:
	@echo $(VERSION)

print-venv-python:
	@echo $(VENV_PYTHON)

ifeq ($(SAN),)
all: $(PY_LINK)
endif
$(PY_LINK): $(SHARED)
	$(call say,LN,$@)
	$(Q)ln -sfn "$$(realpath --relative-to=python/ringload $(BUILD))/libringload.so.0" $@

$(PY_LAYOUT): python/tests/struct_layout.c $(PUBLIC_HDR)
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

test: $(PY_LAYOUT) pydeps
test: export RL_PYTHON := $(PYTHON)
test: export RL_VENV_PYTHON := $(VENV_PYTHON)
test: export RL_SAN := $(SAN)

install: install-python
uninstall: uninstall-python
.PHONY: install-python uninstall-python print-pydir print-version print-venv-python

install-python: $(SHARED)
	install -d $(DESTDIR)$(PYDIR)/ringload
	install -m 644 python/ringload/*.py $(DESTDIR)$(PYDIR)/ringload/
	ln -sfn $(LIBDIR)/libringload.so.0 $(DESTDIR)$(PYDIR)/ringload/libringload.so.0

uninstall-python:
	rm -rf $(DESTDIR)$(PYDIR)/ringload

# The Python examples (examples/*.py) run on the venv too.
PY_TESTS += python/tests/python-examples.sh

# The venv of vLLM and transformers (python/requirements-vllm.txt; vllm
# 0.33 pins torch 2.14, so it cannot share the venv above), keyed and
# built the same way; make test runs the tests marked "vllm" with it
# (python-vllm-tests.sh), or one skip line saying why it is missing.
PY_VLLM_REQS := python/requirements-vllm.txt
RL_VLLM_VENV ?= $(RL_CACHE)/venv-vllm-$(shell sha256sum $(PY_VLLM_REQS) | cut -c1-12)
VLLM_PYTHON := $(RL_VLLM_VENV)/bin/python
.PHONY: pydeps-vllm print-vllm-python
pydeps-vllm:
	$(Q)python/pydeps.sh $(PY_VLLM_REQS) $(RL_VLLM_VENV)
print-vllm-python:
	@echo $(VLLM_PYTHON)
test: pydeps-vllm
test: export RL_VLLM_PYTHON := $(VLLM_PYTHON)
PY_TESTS += python/tests/python-vllm-tests.sh
