# SPDX-License-Identifier: MIT
# rkv - one top-level Makefile.
#
#   make              build everything into build/ (bin/, lib/, tests/)
#   make test         install missing Debian packages, build, run unit and
#                     conformance tests (tcp, shm; verbs skips without a device)
#   make check-rdma   the verbs suite, in a Soft-RoCE guest (or on a real device)
#   make bench        transport benchmarks beside libfabric and perftest,
#                     KV get/put per provider, YCSB beside Redis/memcached
#   make run          build, start a server, run YCSB workload B (tcp)
#   make fuzz         fuzz every decoder for FUZZ_SECONDS (default 600)
#   make torture      the linearizability torture (tests/torture.sh) for
#                     RKV_TORTURE_MINUTES (default 5) per provider (tcp shm)
#   make explore-long the interleaving explorers with a run budget of
#                     EXPLORE_RUNS (default 10^6) per scenario: the sampled
#                     ones run that many random interleavings (~1 h each)
#   make check-gpu    build and run every GPU test and the GPU benchmark
#                     (tools/check-gpu.sh; skips with a reason without a GPU)
#   make check-deps   every #include follows the dependency graph (DEPS_*
#                     below; tools/check-deps.sh, also run by make test)
#   make install      rkv, rkv-server, rkv-ycsb and the benchmarks, librkv.so
#                     and librkv.a, the public headers (include/rkv/) and
#                     librkv.pc under $(DESTDIR)$(PREFIX); make uninstall
#
# Knobs: CC=gcc|clang, SANITIZE=address,undefined|thread, DEBUG=1,
# MALLOC=jemalloc|libc, WITH_CUDA=0|1 (detected), WITH_ETCD=0|1 (detected),
# O=build directory, PREFIX=/usr/local, DESTDIR=, RKV_VERSION=X.Y.Z (the
# default is common/version.h's), V=1 (make run, test, bench, ... show the
# build's command lines; otherwise their build step prints only errors).

.DEFAULT_GOAL := all

# ------------------------------------------------------- dependency graph
# Written once, here: what each directory may include besides itself (a
# directory, or one header of it).  Each directory's objects are compiled
# with -I for exactly these, so a forbidden #include "x.h" does not
# compile; tools/check-deps.sh reads these lines and fails on any include
# outside them, "../dir/x.h" paths too.  proto uses xxh3 for block
# checksums and key hashes (the remote layout): common/hash.h and nothing
# else of common; it links common/hash.o's prepared seeds (every program
# linking librkv_proto.a links librkv_common.a after it).  Nothing depends on
# server or client except tools, bench, examples and tests.  The parameter
# server (client/ps, part of librkv) sees of the KV core only its public
# header and the extension point, rkv_ext.h; the core never sees it.
DEPS_proto    := common/hash.h
DEPS_common   :=
DEPS_client   := proto common
DEPS_client/ps := client/rkv.h client/rkv_ext.h common
DEPS_server   := proto common
DEPS_tools    := client proto common
DEPS_bench    := client client/ps proto common
DEPS_examples := client client/ps proto common
DEPS_tests    := client client/ps server proto common
DEPS_python   := client/rkv.h client/ps/rkv_ps.h common/version.h
# include directories a directory stands for (default: itself)
IDIRS_common  := common common/transport
IDIRS_tests   := . tests/lib

comma := ,
CC ?= gcc
ifeq ($(origin CC),default)
CC = gcc
endif
CFLAGS ?= -O2 -g
MALLOC ?= jemalloc
SANITIZE ?=
DEBUG ?=

ifneq ($(SANITIZE),)
MALLOC := libc
O ?= build/san-$(subst $(comma),-,$(SANITIZE))
else
O ?= build
endif

CUDA_HOME ?= /usr/local/cuda
ifeq ($(origin WITH_CUDA),undefined)
WITH_CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),1,0)
endif

# WERROR= (empty) keeps warnings warnings: tools/check-gpu.sh on another
# distribution's compiler
WERROR ?= -Werror
WARN := -Wall -Wextra $(WERROR) -Wshadow -Wmissing-prototypes \
	-Wstrict-prototypes -Wold-style-definition -Wformat=2 -Wwrite-strings
override CFLAGS += -std=c11 -D_GNU_SOURCE $(WARN) -fPIC -pthread -MMD -MP
ifneq ($(DEBUG),)
override CFLAGS += -O0 -g3 -DDEBUG
endif
ifneq ($(SANITIZE),)
override CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
override LDFLAGS += -fsanitize=$(SANITIZE)
endif
LDLIBS_SYS := -lrdmacm -libverbs -lcrypto -lpthread -lm

# The release version lives in common/version.h; RKV_VERSION=X.Y.Z on the
# command line (or in the environment) overrides it for the objects it
# compiles (make clean first: make does not track flags).
RKV_VERSION_H := $(shell sed -n 's/^.define RKV_VERSION "\(.*\)"$$/\1/p' \
	common/version.h)
ifneq ($(filter command line environment,$(origin RKV_VERSION)),)
override CFLAGS += -DRKV_VERSION='"$(RKV_VERSION)"'
else
RKV_VERSION := $(RKV_VERSION_H)
endif
# librkv.so's soname is librkv.so.$(RKV_SOVERSION): it follows the version
# node of client/librkv.map (RKV_1), not the release
RKV_SOVERSION := 1

# etcd (common/etcd.c: cluster membership) over libcurl and cJSON, when
# their headers are there (tools/deps.sh installs them); without them
# every etcd call says rkv was built without it
ifeq ($(origin WITH_ETCD),undefined)
WITH_ETCD := $(if $(and $(wildcard /usr/include/curl/curl.h \
	/usr/include/*/curl/curl.h),$(wildcard /usr/include/cjson/cJSON.h)),1,0)
endif
ifeq ($(WITH_ETCD),1)
override CFLAGS += -DRKV_WITH_ETCD
LDLIBS_SYS += -lcurl -lcjson
endif

# CUDA (common/gpu/): the static runtime, which loads libcuda.so.1 itself
# at the first CUDA call, so binaries start on machines without a driver
# and host-memory paths never touch it.  Device code for sm_90 plus
# compute_90 PTX (JIT-compiled on newer GPUs).
NVCC ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
ifeq ($(WITH_CUDA),1)
override CFLAGS += -DRKV_WITH_CUDA -isystem $(CUDA_HOME)/include
LDLIBS_SYS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
NVCCFLAGS ?= -O2 -g
override NVCCFLAGS += -std=c++17 $(CUDA_ARCH) -DRKV_WITH_CUDA \
	-Xcompiler -fPIC,-Wall$(if $(WERROR),$(comma)-Werror) -Icommon/gpu \
	-MMD -MP
endif
ifeq ($(MALLOC),jemalloc)
LDLIBS_SYS += -ljemalloc
endif
# What librkv itself needs: no allocator.  A library must not replace its
# host process's malloc, and libjemalloc cannot be dlopened (its static
# TLS: "cannot allocate memory in static TLS block"), so librkv.so, the
# Python module and librkv.pc leave the choice to the program.
LDLIBS_LIB := $(filter-out -ljemalloc,$(LDLIBS_SYS))

BIN := $(O)/bin
LIB := $(O)/lib
OBJ := $(O)/obj
TST := $(O)/tests

# Per-directory include paths, from the graph: an object of DIR gets -I for
# DIR and its DEPS_DIR directories; a one-header dependency is seen through
# $(O)/inc/DIR, a folder holding only a link to that header.
GRAPH_DIRS := $(patsubst DEPS_%,%,$(filter DEPS_%,$(.VARIABLES)))
idirs = $(or $(IDIRS_$(1)),$(1))
dir_inc = $(addprefix -I,$(call idirs,$(1)) \
	$(foreach d,$(filter-out %.h,$(DEPS_$(1))),$(call idirs,$(d)))) \
	$(if $(filter %.h,$(DEPS_$(1))),-I$(O)/inc/$(1))
$(foreach d,$(GRAPH_DIRS),$(eval $(OBJ)/$(d)/%.o: INC := $(call dir_inc,$(d))))
define hdr_link
HDR_LINKS += $(O)/inc/$(1)/$(notdir $(2))
$(O)/inc/$(1)/$(notdir $(2)): $(2)
	@mkdir -p $$(@D)
	$$(Q)ln -sf $$(abspath $$<) $$@
endef
HDR_LINKS :=
$(foreach d,$(GRAPH_DIRS),$(foreach h,$(filter %.h,$(DEPS_$(d))),\
	$(eval $(call hdr_link,$(d),$(h)))))

# ---------------------------------------------------------------- sources
COMMON_SRCS := $(wildcard common/*.c common/transport/*.c)
ifeq ($(WITH_CUDA),1)
COMMON_SRCS += $(wildcard common/gpu/*.c)
COMMON_CU_SRCS := $(wildcard common/gpu/*.cu)
endif
GPU_TEST_SRCS := $(wildcard tests/gpu/gpu_*.c)
PROTO_SRCS := $(wildcard proto/*.c)
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
ITEST_SRCS := $(wildcard tests/integration/itest_*.c)
CONF_SRCS := $(wildcard tests/conformance/*.c)
BENCH_TP_SRCS := $(wildcard bench/transport/*.c)
BENCH_KV_SRCS := $(wildcard bench/kv/*.c)
BENCH_YCSB_SRCS := $(wildcard bench/ycsb/*.c)
BENCH_PS_SRCS := $(wildcard bench/ps/*.c)
BENCH_IDLE_SRCS := $(wildcard bench/idle/*.c)
BENCH_FO_SRCS := $(wildcard bench/failover/*.c)
EXAMPLE_SRCS := $(wildcard examples/*.c)
SERVER_SRCS := $(filter-out server/main.c,$(wildcard server/*.c))
SERVER_MAIN := $(wildcard server/main.c)
CLIENT_SRCS := $(wildcard client/*.c client/ps/*.c)
CLI_SRCS := $(wildcard tools/rkv_cli.c tools/rkv_admin.c tools/rkv_line.c)
# libedit (tools/rkv_line.c: line editing and history at rkv's prompt)
# when its header is there (tools/deps.sh installs libedit-dev); without
# it rkv builds with no prompt and says so
ifeq ($(origin WITH_LIBEDIT),undefined)
WITH_LIBEDIT := $(if $(wildcard /usr/include/editline/readline.h),1,0)
endif
ifeq ($(WITH_LIBEDIT),1)
$(OBJ)/tools/rkv_line.o: override CFLAGS += -DRKV_WITH_LIBEDIT
CLI_LDLIBS := -ledit
endif

# One short line per target ("  CC  build/obj/x.o"); V=1 shows the
# commands instead.
ifeq ($(V),1)
Q :=
say =
else
Q := @
say = @printf '  %-5s %s\n' '$(1)' '$(2)'
endif

obj = $(patsubst %.c,$(OBJ)/%.o,$(1))
COMMON_OBJS := $(call obj,$(COMMON_SRCS)) \
	$(patsubst %.cu,$(OBJ)/%.cu.o,$(COMMON_CU_SRCS))

COMMON_LIB := $(LIB)/librkv_common.a
PROTO_LIB := $(LIB)/librkv_proto.a
TESTLIB := $(LIB)/librkv_testlib.a
UNIT_BINS := $(patsubst tests/unit/%.c,$(TST)/%,$(UNIT_SRCS))
GPU_TEST_BINS := $(patsubst tests/gpu/%.c,$(TST)/%,$(GPU_TEST_SRCS))
ITEST_BINS := $(patsubst tests/integration/%.c,$(TST)/%,$(ITEST_SRCS))
CONF_BIN := $(if $(CONF_SRCS),$(TST)/conformance)
BENCH_TP_BIN := $(if $(BENCH_TP_SRCS),$(BIN)/rkv-bench-transport)
BENCH_KV_BIN := $(if $(BENCH_KV_SRCS),$(BIN)/rkv-bench-kv)
BENCH_YCSB_BIN := $(if $(BENCH_YCSB_SRCS),$(BIN)/rkv-ycsb)
BENCH_PS_BIN := $(if $(BENCH_PS_SRCS),$(BIN)/rkv-bench-ps)
BENCH_IDLE_BIN := $(if $(BENCH_IDLE_SRCS),$(BIN)/rkv-bench-idle)
BENCH_FO_BIN := $(if $(BENCH_FO_SRCS),$(BIN)/rkv-bench-failover)
EXAMPLE_BINS := $(patsubst examples/%.c,$(BIN)/rkv-example-%,$(EXAMPLE_SRCS))
SERVER_LIB := $(if $(SERVER_SRCS),$(LIB)/librkv_server.a)
SERVER_BIN := $(if $(SERVER_MAIN),$(BIN)/rkv-server)
CLIENT_LIB := $(if $(CLIENT_SRCS),$(LIB)/librkv.a)
CLIENT_SO := $(if $(CLIENT_SRCS),$(LIB)/librkv.so)
CLIENT_SO_LINK := $(if $(CLIENT_SRCS),$(LIB)/librkv.so.$(RKV_SOVERSION))
CLIENT_DIST_LIB := $(if $(CLIENT_SRCS),$(LIB)/dist/librkv.a)
CLI_BIN := $(if $(and $(CLI_SRCS),$(CLIENT_SRCS)),$(BIN)/rkv)
# The Python module rkv (python/rkvmodule.c) for the system's python3 with
# Debian's python3-dev: $(O)/python/rkv.cpython-*.so, linked with the
# self-contained librkv.a, importable with PYTHONPATH=$(O)/python.  Not in
# sanitizer builds (python3 would need the sanitizer's runtime preloaded).
PYTHON ?= /usr/bin/python3
ifeq ($(SANITIZE),)
PY_INC := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)
PY_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null)
endif
PY_EXT := $(if $(and $(PY_INC),$(wildcard $(PY_INC)/Python.h),$(wildcard python/rkvmodule.c)),$(O)/python/rkv$(PY_SUFFIX))

ALL_TARGETS := $(COMMON_LIB) $(if $(PROTO_SRCS),$(PROTO_LIB)) \
	$(if $(TESTLIB_SRCS),$(TESTLIB)) $(UNIT_BINS) $(ITEST_BINS) $(CONF_BIN) \
	$(BENCH_TP_BIN) $(BENCH_KV_BIN) $(BENCH_YCSB_BIN) $(BENCH_PS_BIN) \
	$(BENCH_IDLE_BIN) $(BENCH_FO_BIN) $(EXAMPLE_BINS) $(SERVER_LIB) $(SERVER_BIN) $(CLIENT_LIB) $(CLIENT_SO) \
	$(CLIENT_SO_LINK) $(CLIENT_DIST_LIB) $(CLI_BIN) $(GPU_TEST_BINS) \
	$(PY_EXT)

.PHONY: all deps test check-deps check-rdma check-gpu bench run fuzz torture explore-long \
	clean install uninstall
all: $(ALL_TARGETS)

# Keep every object the pattern rules make: deleted as intermediates, they
# would be compiled again by the next make (the .d files included below
# name them), and make would print a stray rm of them.
.SECONDARY:

$(OBJ)/%.o: %.c | $(HDR_LINKS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(INC) -c $< -o $@

$(OBJ)/%.cu.o: %.cu | $(HDR_LINKS)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVCCFLAGS) $(INC) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(PROTO_LIB): $(call obj,$(PROTO_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TESTLIB): $(call obj,$(TESTLIB_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(SERVER_LIB): $(call obj,$(SERVER_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# librkv.a hides librkv's internals as librkv.so does: the client objects
# go into one relocatable object (ld -r) in which every global that
# client/librkv.map does not list is made local (objcopy), so a program
# linking librkv.a can call only the API.  proto and common stay in their
# archives, which every program linking librkv.a links too (one copy of
# the log level and of the CUDA objects: a second, localized copy of
# common/gpu's COMDAT groups breaks the link of a program that also uses
# common).  tools/check-symbols.sh (make test) checks both libraries.
# Tests of the internals link the plain client objects,
# $(CLIENT_INTERNAL_LIB).
$(CLIENT_LIB): $(call obj,$(CLIENT_SRCS)) client/librkv.map \
		tools/check-symbols.sh
	@mkdir -p $(dir $@) $(OBJ)
	$(Q)bash tools/check-symbols.sh --list client/librkv.map >$(OBJ)/librkv.syms
	$(Q)$(LD) -r -o $(OBJ)/librkv.r.o $(filter %.o,$^)
	$(Q)objcopy --keep-global-symbols=$(OBJ)/librkv.syms $(OBJ)/librkv.r.o
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(OBJ)/librkv.r.o

CLIENT_INTERNAL_LIB := $(if $(CLIENT_SRCS),$(LIB)/librkv_internal.a)
$(CLIENT_INTERNAL_LIB): $(call obj,$(CLIENT_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# librkv.so: hidden visibility, exported API listed in client/librkv.map,
# soname librkv.so.$(RKV_SOVERSION) (a link of that name beside it, for
# programs linked against the build tree).  Relinked when the Makefile
# changes: its flags are here.
$(CLIENT_SO): $(call obj,$(CLIENT_SRCS) $(PROTO_SRCS)) $(COMMON_OBJS) \
		client/librkv.map Makefile
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs \
		-Wl,--version-script=client/librkv.map \
		-Wl,-soname,librkv.so.$(RKV_SOVERSION) \
		-o $@ $(filter %.o,$^) $(LDLIBS_LIB)

$(CLIENT_SO_LINK): | $(CLIENT_SO)
	$(Q)ln -sf $(notdir $(CLIENT_SO)) $@

# The librkv.a that make install installs: self-contained, for programs
# outside the tree.  The client, proto and common objects in one
# relocatable object whose globals but the API's are made local, as
# librkv.so hides them (the in-tree librkv.a leaves proto and common to
# their archives, which programs of the tree link beside it).
$(CLIENT_DIST_LIB): $(call obj,$(CLIENT_SRCS) $(PROTO_SRCS)) $(COMMON_OBJS) \
		client/librkv.map tools/check-symbols.sh
	@mkdir -p $(dir $@) $(OBJ)
	$(Q)bash tools/check-symbols.sh --list client/librkv.map >$(OBJ)/librkv-dist.syms
	$(Q)$(LD) -r -o $(OBJ)/librkv-dist.r.o $(filter %.o,$^)
	$(Q)objcopy --keep-global-symbols=$(OBJ)/librkv-dist.syms $(OBJ)/librkv-dist.r.o
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(OBJ)/librkv-dist.r.o

# Python's headers are not ours: -isystem keeps their warnings out of
# -Werror.  The module uses Python's allocator (LDLIBS_LIB), and Python's
# own symbols come from the interpreter that loads it.
PY_SRCS := $(wildcard python/*.c)
$(call obj,$(PY_SRCS)): override CFLAGS += -isystem $(PY_INC)
$(PY_EXT): $(call obj,$(PY_SRCS)) $(CLIENT_DIST_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -o $@ $^ $(LDLIBS_LIB)

$(BIN)/rkv-server: $(call obj,$(SERVER_MAIN)) $(SERVER_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(BIN)/rkv-bench-kv: $(call obj,$(BENCH_KV_SRCS)) $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(BIN)/rkv-bench-failover: $(call obj,$(BENCH_FO_SRCS)) $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(BIN)/rkv-bench-idle: $(call obj,$(BENCH_IDLE_SRCS)) $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(BIN)/rkv-ycsb: $(call obj,$(BENCH_YCSB_SRCS)) $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS) -lhiredis -lmemcached

$(BIN)/rkv-bench-ps: $(call obj,$(BENCH_PS_SRCS)) $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

# examples/NAME.c -> rkv-example-NAME, one file each
$(BIN)/rkv-example-%: $(OBJ)/examples/%.o $(CLIENT_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

# the operator's tool: rkv admin join/drain use the migration
# (client/migrate.h), which is not in the library's API
$(BIN)/rkv: $(call obj,$(CLI_SRCS)) $(CLIENT_INTERNAL_LIB) $(PROTO_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS) $(CLI_LDLIBS)

TEST_LIBS := $(if $(TESTLIB_SRCS),$(TESTLIB)) $(SERVER_LIB) $(CLIENT_INTERNAL_LIB) \
	$(if $(PROTO_SRCS),$(PROTO_LIB)) $(COMMON_LIB)

$(TST)/%: $(OBJ)/tests/unit/%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(TST)/itest_%: $(OBJ)/tests/integration/itest_%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(TST)/gpu_%: $(OBJ)/tests/gpu/gpu_%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(TST)/conformance: $(call obj,$(CONF_SRCS)) $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS)

$(BIN)/rkv-bench-transport: $(call obj,$(BENCH_TP_SRCS)) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_SYS) -lfabric

# ------------------------------------------------------------------ tasks
# The build step of a task (make run, test, ...): silent but for warnings
# and errors (a failing compile still prints its error and make's line),
# after one line saying it builds; V=1 shows every command.
# ("+": a sub-make named through a variable is not seen as one, and would
# lose the jobserver)
ifeq ($(V),1)
build_first = +@$(MAKE) --no-print-directory all
else
build_first = +@$(MAKE) --no-print-directory -q all 2>/dev/null || { \
	echo "make: building $(O)/ (V=1 shows the commands)"; \
	$(MAKE) --no-print-directory -s all; }
endif

deps:
	@bash tools/deps.sh

test: deps
	$(build_first)
	@bash tests/run.sh $(O)

check-deps:
	@bash tools/check-deps.sh

# No deps here: a lent GPU machine may reach no package mirror.
check-gpu:
	@bash tools/check-gpu.sh $(if $(filter command line,$(origin O)),$(O))

check-rdma: deps
	$(build_first)
	@bash tests/softroce/check-rdma.sh $(O)

bench: deps
	$(build_first)
	@bash bench/run.sh $(O)
	@bash bench/run-kv.sh $(O)
	@bash bench/run-ps.sh $(O)
	@bash bench/run-ycsb.sh $(O)
	@bash bench/run-migrate.sh $(O)
	@bash bench/run-python.sh $(O)
	@bash bench/run-idle.sh $(O)
	@bash bench/run-repl.sh $(O)
	@bash bench/run-mem.sh $(O)
	@bash bench/run-fill.sh $(O)
	@bash bench/run-big.sh $(O)
	@bash bench/run-goals.sh $(O)
	@bash bench/run-grow.sh $(O)
	@bash bench/run-failover.sh $(O)

fuzz: deps
	@bash tests/fuzz/run.sh --seconds $(or $(FUZZ_SECONDS),600) --build-dir $(O)

torture: deps
	$(build_first)
	@bash tests/torture.sh --build-dir $(O) $(TORTURE_PROVIDERS)

explore-long: deps
	$(build_first)
	RKV_EXPLORE_RUNS=$(or $(EXPLORE_RUNS),1000000) $(O)/tests/test_explore
	RKV_EXPLORE_RUNS=$(or $(EXPLORE_RUNS),1000000) $(O)/tests/test_explore_repl

run: deps
	$(build_first)
	@bash tools/run.sh $(O)

# ---------------------------------------------------------------- install
# make install [PREFIX=/usr/local] [DESTDIR=] [O=build]: what a user of
# the tools and of librkv needs, from an up-to-date build compiling
# nothing (install depends on all).  Examples are not installed.  librkv.pc:
# pkg-config --cflags --libs librkv (librkv.so), --static for librkv.a with
# the system libraries it needs (Libs.private: this build's LDLIBS_LIB).
PREFIX ?= /usr/local
bindir ?= $(PREFIX)/bin
libdir ?= $(PREFIX)/lib
includedir ?= $(PREFIX)/include
pkgconfigdir ?= $(libdir)/pkgconfig
mandir ?= $(PREFIX)/share/man
systemdunitdir ?= $(PREFIX)/lib/systemd/system
# man pages (their .TH release set to this build's) and the unit file
# (its /usr/local/bin/ set to $(bindir)/)
INSTALL_MANS := $(wildcard doc/man/*.1)
INSTALL_UNITS := $(wildcard doc/systemd/*.service)
INSTALL_BINS := $(CLI_BIN) $(SERVER_BIN) $(BENCH_YCSB_BIN) $(BENCH_KV_BIN) \
	$(BENCH_PS_BIN) $(BENCH_TP_BIN)
INSTALL_HDRS := client/rkv.h client/ps/rkv_ps.h
# a directory of the .pc file as ${prefix}/... when it lies under PREFIX,
# so pkg-config --define-variable=prefix=... moves the whole tree
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir) \
		$(DESTDIR)$(includedir)/rkv $(DESTDIR)$(pkgconfigdir)
	install -m 755 $(INSTALL_BINS) $(DESTDIR)$(bindir)/
	install -m 755 $(CLIENT_SO) $(DESTDIR)$(libdir)/librkv.so.$(RKV_SOVERSION)
	$(Q)ln -sf librkv.so.$(RKV_SOVERSION) $(DESTDIR)$(libdir)/librkv.so
	install -m 644 $(CLIENT_DIST_LIB) $(DESTDIR)$(libdir)/librkv.a
	install -m 644 $(INSTALL_HDRS) $(DESTDIR)$(includedir)/rkv/
	sed -e 's|@PREFIX@|$(PREFIX)|' \
		-e 's|@LIBDIR@|$(call pc_dir,$(libdir))|' \
		-e 's|@INCLUDEDIR@|$(call pc_dir,$(includedir))|' \
		-e 's|@VERSION@|$(RKV_VERSION)|' \
		-e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS_LIB))|' \
		client/librkv.pc.in >$(DESTDIR)$(pkgconfigdir)/librkv.pc
	chmod 644 $(DESTDIR)$(pkgconfigdir)/librkv.pc
	install -d $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(systemdunitdir)
	for f in $(INSTALL_MANS); do \
		sed -e '/^\.TH /s|"rkv [^"]*"|"rkv $(RKV_VERSION)"|' $$f \
			>$(DESTDIR)$(mandir)/man1/$${f##*/} && \
		chmod 644 $(DESTDIR)$(mandir)/man1/$${f##*/} || exit 1; \
	done
	for f in $(INSTALL_UNITS); do \
		sed -e 's|/usr/local/bin/|$(bindir)/|g' $$f \
			>$(DESTDIR)$(systemdunitdir)/$${f##*/} && \
		chmod 644 $(DESTDIR)$(systemdunitdir)/$${f##*/} || exit 1; \
	done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(notdir $(INSTALL_BINS))) \
		$(DESTDIR)$(libdir)/librkv.so $(DESTDIR)$(libdir)/librkv.so.$(RKV_SOVERSION) \
		$(DESTDIR)$(libdir)/librkv.a $(DESTDIR)$(pkgconfigdir)/librkv.pc \
		$(addprefix $(DESTDIR)$(includedir)/rkv/,$(notdir $(INSTALL_HDRS))) \
		$(addprefix $(DESTDIR)$(mandir)/man1/,$(notdir $(INSTALL_MANS))) \
		$(addprefix $(DESTDIR)$(systemdunitdir)/,$(notdir $(INSTALL_UNITS)))
	rmdir $(DESTDIR)$(includedir)/rkv 2>/dev/null || true

clean:
	rm -rf build

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
