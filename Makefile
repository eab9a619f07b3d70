# Trident — top-level build (no CMake).
#   make            build build/bin/trident (CUDA objects too where nvcc exists)
#   make CUDA=0     force a CPU-only build
#   make test       install deps, build, run unit + multi-rank + end-to-end tests (the first tier)
#   make test-long  the long tier: timing measurements, the guard backend, the build switch,
#                   stress, the memory model's matrix and the Slurm scenarios (CI runs both)
#   make test-slurm the Slurm scenarios alone (a local single-node Slurm, started and stopped)
#   make test-asan  the sanitizer build (ASan + UBSan) and the tests that exercise memory and signals
#   make test-tsan  the ThreadSanitizer build and the runs that use every thread of a rank at once
#   make test-aarch64 the AArch64 (Grace) build, cross-compiled, its tests run by qemu-user
#   make test-cuda-emu the CUDA backend's kernels and training runs on the CUDA emulator (this CPU)
#   make test-cuda-emu-asan the same on the emulator built under AddressSanitizer (by hand)
#   make test-gpu-check-emu scripts/gpu-check.sh run whole on the emulator: its verdicts tried (by hand)
#   make run        install deps, build, run the default job
#   make deps       install the Debian packages the project needs (idempotent)
#   make bundle     bundle/: trident and the GPU tests with the libraries a bare GPU node lacks
#   make test-bundle the bundle proven in a bare Debian root (debootstrap, made once)
SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD ?= build
CXX   := mpicxx
NPROC := $(shell nproc 2>/dev/null || echo 2)

# CUDA: on when nvcc is on PATH or at /usr/local/cuda/bin, unless CUDA=0.
# CUDA_EMU=1: the CUDA backend built for the CUDA emulator instead (tests/cuda_emu: its kernels run
# on this CPU, each CUDA thread a fiber; `make test-cuda-emu`), in a build directory of its own.
CUDA_EMU ?= 0
ifeq ($(CUDA_EMU),1)
  CUDA := 1
  NCCL := 1
  CUDNN := 0
endif
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(if $(NVCC),$(abspath $(dir $(NVCC))/..),/usr/local/cuda)

# Our OpenMP kernels are vectorized for the build machine (oneDNN dispatches at run time by
# itself); ARCH= builds portable code, e.g. ARCH=-march=x86-64-v3 for nodes that differ from the
# login node. AArch64 hosts (Grace) build the same way (`make test-aarch64` checks it from here).
ARCH ?= -march=native
# -fno-math-errno: we never read errno after sqrtf, and with errno kept GCC will not vectorize a
# loop that calls it (AdamW's update ran 3x slower, scalar). IEEE sqrt is correctly rounded, so
# the results are the same bits.
# -ffp-contract=off: a·b + c stays a multiply and an add, never one FMA. Whether GCC fuses depends
# on the target's tuning (it avoids chains of FMAs on some AMD cores), so with contraction the
# same source rounds differently on two x86-64 CPUs; without it our code's results depend on the
# order of the operations alone, which kernels.arithmetic = portable fixes (docs/PRECISION.md).
# OPT: optimisation and debug info; the suite's CPU-only build check (tests/e2e/build_switch.sh)
# compiles with OPT=-O0, which only has to link and start: 64 s instead of 127 s here.
OPT ?= -O3 -g
CXXFLAGS := $(ARCH) -fno-math-errno -ffp-contract=off -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 -std=c++17 $(OPT) -Wall -Wextra -Wno-unused-parameter -fopenmp -MMD -MP -Isrc -I.
LDFLAGS  := -fopenmp
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5-openmpi 2>/dev/null || echo -I/usr/include/hdf5/openmpi)
HDF5_LIBS   := $(shell pkg-config --libs hdf5-openmpi 2>/dev/null || echo -L/usr/lib/$$(gcc -print-multiarch)/hdf5/openmpi -lhdf5)
CXXFLAGS += $(HDF5_CFLAGS)
# SANITIZE=address,undefined or thread: the sanitizer builds of `make test-asan` and `make test-tsan`
# (each in its own BUILD directory).
ifneq ($(SANITIZE),)
  CXXFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
  LDFLAGS  += -fsanitize=$(SANITIZE)
endif
LDLIBS   := -lboost_program_options -ldnnl -lpng -lpcre2-8 $(HDF5_LIBS)

SRC_ALL  := $(shell find src -name '*.cpp' | sort)
MAIN_SRC := src/app/main.cpp
LIB_SRC  := $(filter-out $(MAIN_SRC),$(SRC_ALL)) $(sort $(wildcard kernels/*.cpp kernels/cpu/*.cpp kernels/guard/*.cpp))
CU_SRC   := $(sort $(wildcard kernels/cuda/*.cu))

# NCCL: with CUDA, where nccl.h is there; NCCL=0 leaves the NCCL communicator out (comm.backend
# = nccl is then a deck error). Only the files that hold NCCL calls read TRIDENT_NCCL, so it is
# set for them alone (their own stamp rebuilds them when it changes), not for every object.
NCCL ?= $(if $(filter 1,$(CUDA)),$(if $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),1,0),0)

ifeq ($(CUDA_EMU),1)
  # The emulator's headers stand for CUDA's; each .cu file is rewritten to C++ (translate.py) and
  # compiled as the rest; the runtime is linked in, and its cuBLASLt is a library of the build's
  # own that the backend opens as it opens NVIDIA's (found through the run path).
  CXXFLAGS += -DTRIDENT_CUDA=1 -DTRIDENT_CUDA_PTX_ARCH=90 -Itests/cuda_emu/include
  # The kernels' misaligned accesses end the run (a GPU faults on them: a float4 or a bf16 pair
  # at an address it does not divide), reported at the .cu line.
  EMU_KERNEL_FLAGS := -fsanitize=alignment -fno-sanitize-recover=alignment
  LDFLAGS += -fsanitize=alignment
  # And a·b + c fused into one multiply-add where the compiler finds it, as nvcc does by default
  # (--fmad=true), not kept apart as in the CPU build: the kernels' checks against the CPU and
  # their bit-for-bit checks between two paths of the GPU's own then see the roundings a GPU
  # gives. (GCC's fusions are not nvcc's; where the CPU has no FMA, -march=native makes none.
  # GCC forms them in its -O2 pass alone, asked for here at the emulator's -O1.)
  EMU_KERNEL_FLAGS += -ffp-contract=fast -fexpensive-optimizations
  # EMU_ASAN=1 (make test-cuda-emu-asan): the kernels and the emulator's runtime (which announces
  # its fiber switches) under AddressSanitizer too; the CPU backend beside them is left as it is
  # built, so that its results — what the kernels are compared with — stay those of make test.
  ifeq ($(EMU_ASAN),1)
    EMU_KERNEL_FLAGS += -fsanitize=address -fno-omit-frame-pointer
    LDFLAGS += -fsanitize=address
  endif
  LDFLAGS += -Wl,--export-dynamic-symbol=cudaLaunchHostFunc -Wl,--export-dynamic-symbol=cudaEmuLaunchPolled -Wl,-rpath,$(abspath $(BUILD))/lib
  CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.o) $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard kernels/cuda/*.cpp)) \
            $(BUILD)/obj/tests/cuda_emu/runtime.o
  GPU_BIN = $(BUILD)/tests/gpu_tests $(BUILD)/lib/libcublasLt.so.13 $(BUILD)/lib/libnccl.so.2 $(BUILD)/tests/cuda_emu_selftest
else ifeq ($(CUDA),1)
  CXXFLAGS += -DTRIDENT_CUDA=1 -I$(CUDA_HOME)/include
  # NCCL ships under lib/ in the toolkit here, under lib64/ elsewhere.
  CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib)
  LDFLAGS += $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d))
  # cuBLASLt, NCCL, cuDNN and NVRTC are not linked: the binary opens them on first use
  # (core/shared_library.hpp), so that a CPU run never loads them and a host without them starts it.
  LDLIBS  += -lcudart_static -ldl -lrt -lpthread
  # The GPUs the kernels are compiled for, as compute capabilities (80: A100, 90: H100/H200, 100:
  # B200): machine code for each, which also runs on the same major version's later minors (sm_80's
  # on an sm_86 or sm_89), and the PTX of the newest, which the driver compiles at a newer GPU's first
  # launch (sm_90's on a B200; cached under ~/.nv afterwards). make CUDA_ARCHS="80 90 100" adds a
  # GPU's own machine code; `trident version` says how each visible GPU runs the kernels.
  CUDA_ARCHS ?= 80 90
  $(foreach a,$(CUDA_ARCHS),$(if $(shell echo '$(a)' | grep -x '[0-9][0-9]*'),,\
    $(error CUDA_ARCHS takes compute capabilities as numbers (80 90 100), not '$(a)')))
  CUDA_PTX_ARCH := $(lastword $(shell printf '%s\n' $(CUDA_ARCHS) | sort -n))
  NVCCFLAGS := -std=c++17 -O3 -Isrc -I. -Xcompiler -fPIC --expt-relaxed-constexpr \
               $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
               -gencode arch=compute_$(CUDA_PTX_ARCH),code=compute_$(CUDA_PTX_ARCH) -DTRIDENT_CUDA_PTX_ARCH=$(CUDA_PTX_ARCH)
  # The CUDA backend's host-only C++ (no kernels of its own), compiled as the rest of our C++.
  CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.o) $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard kernels/cuda/*.cpp))
  # cuDNN's fused attention (kernels/cuda/cudnn_attention.cpp), where its frontend's headers are
  # (make deps fetches them) and cuDNN itself is beside the toolkit; CUDNN=0 leaves it out (our own
  # attention kernels alone, and libcudnn never opened). NVRTC too: the frontend's own engines
  # compile kernels with it (opened with cuDNN; the node's toolkit or wheels have it).
  # The frontend's templates take minutes to compile at -O3: this file builds graphs once per size
  # and runs none of the arithmetic, so -O1 without debug info.
  CUDNN_FRONTEND ?= /var/cache/trident/cudnn-frontend-1.32.0/include
  CUDNN ?= $(if $(wildcard $(CUDNN_FRONTEND)/cudnn_frontend.h),$(if $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h),1,0),0)
  ifeq ($(CUDNN),1)
    $(BUILD)/obj/kernels/cuda/cudnn_attention.o: CXXFLAGS += -DTRIDENT_CUDNN=1 -isystem $(CUDNN_FRONTEND) -O1 -g0
    $(BUILD)/obj/kernels/cuda/cuda_libraries.o: CXXFLAGS += -DTRIDENT_CUDNN=1
  endif
  # Each CUDA kernel against the CPU backend, and the cuBLASLt GEMM rate (tests/gpu; SKIP lines
  # where there is no GPU).
  GPU_BIN = $(BUILD)/tests/gpu_tests $(BUILD)/tests/gpu_gemm_rate
endif

# NCCL: the communicator's files alone read TRIDENT_NCCL, so it is set for them alone (their own
# stamp rebuilds them when it changes), not for every object.
NCCL_OBJ := $(BUILD)/obj/src/comm/nccl/nccl.o $(BUILD)/obj/src/comm/nccl/nccl_communicator.o \
            $(BUILD)/obj/src/comm/nccl/nccl_library.o $(BUILD)/obj/tests/gpu/test_nccl.o
NCCL_STAMP := $(BUILD)/nccl-flag
$(shell mkdir -p $(BUILD) && echo '$(NCCL)' | cmp -s - $(NCCL_STAMP) || echo '$(NCCL)' > $(NCCL_STAMP))
$(NCCL_OBJ): $(NCCL_STAMP)
ifeq ($(NCCL),1)
  $(NCCL_OBJ): CXXFLAGS += -DTRIDENT_NCCL=1
endif
ifeq ($(CUDA_EMU),1)
  # NCCL's own nccl.h, after the emulator's headers (its cuda_runtime.h is the emulator's); its
  # library is the emulator's (tests/cuda_emu/nccl.cpp), over MPI.
  $(NCCL_OBJ): CXXFLAGS += -idirafter $(CUDA_HOME)/include
endif

LIB_OBJ  := $(LIB_SRC:%.cpp=$(BUILD)/obj/%.o) $(CU_OBJ)
MAIN_OBJ := $(MAIN_SRC:%.cpp=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/lib/libtrident.a
BIN      := $(BUILD)/bin/trident

UNIT_SRC := $(sort $(wildcard tests/unit/*.cpp))
MPI_SRC  := $(sort $(wildcard tests/mpi/*.cpp))
UNIT_BIN := $(BUILD)/tests/unit_tests
MPI_BIN  := $(BUILD)/tests/mpi_tests
NCCL_TEST_BIN := $(BUILD)/tests/gpu/test_nccl  # under mpirun, one rank per GPU; SKIP lines without
TEST_LIBS := -lboost_unit_test_framework

.PHONY: test-long test-slurm test-asan test-tsan test-aarch64 test-cuda-emu test-cuda-emu-asan test-gpu-check-emu all binaries bundle-binaries deps test run docs clean bench bundle test-bundle
# The packages first, then the binaries: under -j a compile must not start before mpicxx exists.
all: deps
	@$(MAKE) --no-print-directory binaries
binaries: $(BIN) $(UNIT_BIN) $(MPI_BIN) $(GPU_BIN) $(NCCL_TEST_BIN)
bundle-binaries: $(BIN) $(GPU_BIN) $(NCCL_TEST_BIN)

deps:
	@scripts/deps.sh

# The compiler flags as a file that changes only when they do: objects depend on it, so a change
# of flags (ARCH=, CUDA=, a Makefile edit) rebuilds them instead of linking stale ones.
FLAGS_STAMP := $(BUILD)/compile-flags
$(shell mkdir -p $(BUILD) && echo '$(CXXFLAGS) | $(NVCCFLAGS) $(EMU_KERNEL_FLAGS) | cudnn $(CUDNN)' | cmp -s - $(FLAGS_STAMP) || \
  echo '$(CXXFLAGS) | $(NVCCFLAGS) $(EMU_KERNEL_FLAGS) | cudnn $(CUDNN)' > $(FLAGS_STAMP))

$(BUILD)/obj/%.o: %.cpp $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@

ifeq ($(CUDA_EMU),1)
# The .cuh headers rewritten too, found before the originals (-iquote), and kept.
EMU_CUH := $(patsubst %,$(BUILD)/emu/%,$(wildcard kernels/cuda/*.cuh))
.SECONDARY: $(EMU_CUH)
$(BUILD)/emu/%.cuh: %.cuh tests/cuda_emu/translate.py
	@mkdir -p $(@D)
	python3 tests/cuda_emu/translate.py $< $@
$(BUILD)/obj/tests/cuda_emu/runtime.o: CXXFLAGS += $(EMU_KERNEL_FLAGS)
$(BUILD)/obj/%.o: %.cu tests/cuda_emu/translate.py $(EMU_CUH) $(FLAGS_STAMP)
	@mkdir -p $(@D) $(dir $(BUILD)/emu/$*)
	python3 tests/cuda_emu/translate.py $< $(BUILD)/emu/$*.cpp
	$(CXX) $(CXXFLAGS) $(EMU_KERNEL_FLAGS) -Wno-unknown-pragmas -iquote $(BUILD)/emu -include cuda_runtime.h -MT $@ -c $(BUILD)/emu/$*.cpp -o $@

$(BUILD)/tests/cuda_emu_selftest: $(BUILD)/obj/tests/cuda_emu/selftest.o $(BUILD)/obj/tests/cuda_emu/runtime.o
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@

$(BUILD)/lib/libcublasLt.so.13: tests/cuda_emu/cublaslt.cpp $(wildcard tests/cuda_emu/include/*.h) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	g++ -std=c++17 -O2 -fPIC -shared -Wall -Wextra -Itests/cuda_emu/include $< -o $@

$(BUILD)/lib/libnccl.so.2: tests/cuda_emu/nccl.cpp $(wildcard tests/cuda_emu/include/*.h) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -fPIC -shared -Wall -Wextra -DOMPI_SKIP_MPICXX=1 -Itests/cuda_emu/include -idirafter $(CUDA_HOME)/include $< -o $@
else
# -MMD -MP here, not in NVCCFLAGS: the header dependencies of the CUDA objects, as for the C++ ones.
$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@
endif

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(MAIN_OBJ) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(UNIT_BIN): $(UNIT_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(TEST_LIBS)

$(MPI_BIN): $(MPI_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(TEST_LIBS)

$(NCCL_TEST_BIN): $(BUILD)/obj/tests/gpu/test_nccl.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/gpu_tests: $(BUILD)/obj/tests/gpu/test_cuda_kernels.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/gpu_gemm_rate: $(BUILD)/obj/tests/gpu/gemm_rate.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The suite needs the binaries built first; the runner prints the closing "N passed, N failed, N skipped".
# make test is the first tier (within 20 minutes on 2 cores, build included); make test-long
# the rest (tests/run.sh's header says which).
test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) binaries
	@BUILD=$(BUILD) tests/run.sh

test-long: deps
	@$(MAKE) --no-print-directory -j$(NPROC) binaries
	@BUILD=$(BUILD) tests/run.sh long

# AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/, CPU only) running the unit,
# multi-rank and the end-to-end tests that exercise memory and signals, and a stress loop of
# SIGTERM-then-SIGKILL at random instants. Not part of `make test` (about 20 minutes here); run it
# once per change that touches memory or signals.
# The bundle for a bare GPU node (scripts/bundle.sh), and its proof in a bare Debian root
# (tests/bundle/run.sh; the root is made once, in a few minutes, and kept).
# Built in a build directory of its own for any x86-64 CPU with AVX2 (BUNDLE_ARCH): the node's
# processor is not this machine's, and -march=native code from here can stop there on an
# illegal instruction (this machine has AVX-512; many GPU hosts' CPUs have other extensions).
BUNDLE_BUILD ?= build-bundle
BUNDLE_ARCH ?= -march=x86-64-v3
bundle: deps
	@$(MAKE) --no-print-directory -j$(NPROC) CUDA=1 BUILD=$(BUNDLE_BUILD) ARCH='$(BUNDLE_ARCH)' bundle-binaries
	@scripts/bundle.sh $(BUNDLE_BUILD) bundle

# $(call count_verdicts,LOG): a recipe's tail that counts LOG's PASS and FAIL lines as tests/run.sh
# does, and fails on a FAIL or where nothing passed.
count_verdicts = p=$$(grep -c '^PASS' $(1)); f=$$(grep -c '^FAIL' $(1)); \
  echo "$$p passed, $$f failed, 0 skipped"; [ $$f = 0 ] && [ $$p != 0 ]
test-bundle: bundle
	@bash tests/bundle/run.sh | tee /tmp/trident-test-bundle.log; $(call count_verdicts,/tmp/trident-test-bundle.log)

test-asan: deps
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan SANITIZE=address,undefined CUDA=0 binaries
	@BUILD=build-asan tests/run-asan.sh

# ThreadSanitizer build (build-tsan/, CPU only): the unit tests and training runs that use every
# thread of a rank at once (overlapped reduction, asynchronous checkpoint writer, heartbeats),
# a SIGTERM stop and a resume. Not part of `make test` (about 10 minutes here, build included).
test-tsan: deps
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-tsan SANITIZE=thread CUDA=0 binaries
	@BUILD=build-tsan tests/run-tsan.sh

# The AArch64 build (Grace hosts: GH200, GB200), cross-compiled against a Debian 12 arm64 tree
# and its tests run by qemu-user, under this machine's mpirun and Python (build-aarch64/; not part
# of `make test`: about an hour here).
test-aarch64: deps
	@scripts/aarch64-check.sh

# The CUDA backend on the CUDA emulator (tests/cuda_emu/README.md; build-cuda-emu/): the
# emulator's self-checks, every kernel check of tests/gpu run on this CPU with each block's threads
# in both orders and with deferred streams, and training runs of the CUDA backend against the
# CPU's, some over its emulated NCCL (CI runs it; test_nccl is built for a run by hand). Built at
# -O1 (1.5 minutes here; the emulated kernels ran 13% slower than at -O3: gpu_tests 29.6 s, 26.1 s).
CUDA_EMU_BUILD ?= build-cuda-emu
# What the emulator's tests run, under a build directory.
CUDA_EMU_TARGETS := bin/trident tests/gpu_tests lib/libcublasLt.so.13 lib/libnccl.so.2 tests/cuda_emu_selftest \
                    tests/gpu/test_nccl
test-cuda-emu: deps
	@$(MAKE) --no-print-directory -j$(NPROC) CUDA_EMU=1 OPT='-O1 -g' BUILD=$(CUDA_EMU_BUILD) \
	  $(addprefix $(CUDA_EMU_BUILD)/,$(CUDA_EMU_TARGETS))
	@BUILD=$(CUDA_EMU_BUILD) tests/run.sh cuda-emu

# The same group on the emulator with its kernels under AddressSanitizer (build-cuda-emu-asan/):
# every access of the backend's kernels checked against its allocation — a read or write out of
# its buffer, an illegal address on a GPU, ends the run at its .cu line. Not part of CI (slower);
# run it once per change to the CUDA kernels.
test-cuda-emu-asan: deps
	@$(MAKE) --no-print-directory -j$(NPROC) CUDA_EMU=1 EMU_ASAN=1 OPT='-O1 -g' BUILD=$(CUDA_EMU_BUILD)-asan \
	  $(addprefix $(CUDA_EMU_BUILD)-asan/,$(CUDA_EMU_TARGETS))
	@# libasan's dlopen looks past the binary's run path: the emulated libraries named first.
	@LD_LIBRARY_PATH=$(abspath $(CUDA_EMU_BUILD)-asan)/lib ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  BUILD=$(CUDA_EMU_BUILD)-asan tests/run.sh cuda-emu

# scripts/gpu-check.sh run whole on the emulator, with a bundle made from its build and an
# nvidia-smi for its GPUs (tests/cuda_emu/gpu-check-dry-run.sh): the script's own verdicts, PASS
# and FAIL, tried before a GPU's minutes are spent on them. By hand, not in CI (5 minutes once the emulator is built).
test-gpu-check-emu: deps
	@$(MAKE) --no-print-directory -j$(NPROC) CUDA_EMU=1 OPT='-O1 -g' BUILD=$(CUDA_EMU_BUILD) \
	  $(addprefix $(CUDA_EMU_BUILD)/,$(CUDA_EMU_TARGETS) tests/gpu_gemm_rate)
	@BUILD=$(CUDA_EMU_BUILD) bash tests/cuda_emu/gpu-check-dry-run.sh | tee /tmp/trident-test-gpu-check-emu.log; \
	  $(call count_verdicts,/tmp/trident-test-gpu-check-emu.log)

# The Slurm scenarios alone (part of `make test-long`): starts a local Slurm, runs them, stops it.
test-slurm: deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(BIN)
	@BUILD=$(BUILD) bash tests/slurm/run.sh

run: deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(BIN)
	@scripts/run-default.sh

bench: deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(BIN)
	@scripts/bench.sh
	@scripts/bench-parallel.sh
	@scripts/bench-checkpoint.sh
	@scripts/bench-recompute.sh
	@scripts/bench-attention.sh
	@scripts/bench-zero.sh
	@scripts/bench-schedules.sh
	@scripts/bench-sequence-parallel.sh
	@scripts/bench-long-context.sh
	@scripts/bench-tp-overlap.sh
	@scripts/bench-text.sh
	@scripts/bench-balance.sh

# Regenerate the key table of docs/DECK.md from the schema (a test keeps them equal).
docs: $(BIN)
	@scripts/update-deck-doc.sh $(BIN) docs/DECK.md

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
