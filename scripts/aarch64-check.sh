#!/usr/bin/env bash
# aarch64-check.sh — Trident on AArch64 hosts (NVIDIA Grace: GH200, GB200 NVL72; Graviton), from
# this x86-64 machine: the CPU build with Debian's cross compiler against a Debian 12 arm64 tree,
# then the suite's groups run by qemu-user (each rank a qemu process; mpirun, the orted and the
# test scripts stay this machine's, the ranks load the arm64 Open MPI of the tree), and the
# portable reference fingerprints (kernels.arithmetic = portable) against the x86-64 record.
#   scripts/aarch64-check.sh [GROUP ...]    (make test-aarch64; groups as tests/run.sh takes them)
# Default groups: unit, mpi, e2e/training, e2e/precision, e2e/cli, then two of the reference runs
# in portable arithmetic (REFERENCE_RUNS) — about 60 minutes here (qemu runs the code 15-25×
# slower than the machine would).
# On a Grace node itself none of this is needed: `make` builds there as here (-march=native,
# mpicxx, pkg-config). CUDA is not built by this check: NVIDIA's toolkit for arm64 hosts (sbsa)
# is not installed here.
# Needs root the first time (apt: g++-aarch64-linux-gnu, qemu-user, mmdebstrap) and Debian's
# mirror (the arm64 tree, ~720 MB, kept in /var/cache/trident/sysroot-arm64).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SYSROOT=${TRIDENT_ARM64_SYSROOT:-/var/cache/trident/sysroot-arm64}
BUILD_ARM64=${BUILD_ARM64:-build-aarch64}
# The code's CPU: Neoverse N2 (Armv9, SVE2, bf16), the nearest GCC 12 knows to Grace's Neoverse
# V2. The emulated one: qemu's "max" with Grace's 128-bit SVE vectors (oneDNN 2.6 then runs its
# Advanced SIMD kernels, as on Grace); ARM64_CPU=max gives 512-bit SVE (A64FX's width, oneDNN's
# sve_512 kernels).
ARM64_ARCH=${ARM64_ARCH:--mcpu=neoverse-n2}
ARM64_CPU=${ARM64_CPU:-max,sve-max-vq=1}
GROUPS_WANTED=("$@")
((${#GROUPS_WANTED[@]})) || GROUPS_WANTED=(unit mpi e2e/training e2e/precision e2e/cli)

tools() {
  local missing=()
  command -v aarch64-linux-gnu-g++ > /dev/null || missing+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 > /dev/null || missing+=(qemu-user)
  command -v mmdebstrap > /dev/null || missing+=(mmdebstrap)
  ((${#missing[@]} == 0)) && return 0
  [[ $(id -u) == 0 ]] || { echo "aarch64-check: missing ${missing[*]}; run as root, or: sudo apt-get install ${missing[*]}" >&2; exit 1; }
  echo "aarch64-check: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" > /dev/null
}

# The arm64 libraries Trident links (the arm64 twins of scripts/deps.sh's -dev packages), unpacked
# without being installed: a tree for --sysroot and for qemu's -L. Made once; .complete marks it whole.
sysroot() {
  [[ -f $SYSROOT/.complete ]] && return 0
  echo "aarch64-check: unpacking Debian 12's arm64 libraries into $SYSROOT"
  rm -rf "$SYSROOT"
  mmdebstrap --quiet --arch=arm64 --variant=extract \
    --include=libc6-dev,libstdc++-12-dev,libgcc-12-dev,libgomp1,libopenmpi-dev,openmpi-bin,libhdf5-openmpi-dev,libdnnl-dev,libboost-program-options-dev,libboost-test-dev,libpng-dev,libpcre2-dev,nlohmann-json3-dev \
    bookworm "$SYSROOT" http://deb.debian.org/debian
  touch "$SYSROOT/.complete"
}

# The Makefile's own rules with the cross compiler for mpicxx, and the tree's MPI and HDF5 flags
# (pkg-config reading the tree's .pc files) for the host's.
build() {
  mkdir -p "$BUILD_ARM64"
  local pc=(env PKG_CONFIG_SYSROOT_DIR="$SYSROOT" PKG_CONFIG_LIBDIR="$SYSROOT/usr/lib/aarch64-linux-gnu/pkgconfig" pkg-config)
  flock -o /tmp/trident-build.lock make --no-print-directory -j"$(nproc)" BUILD="$BUILD_ARM64" CUDA=0 ARCH="$ARM64_ARCH" \
    CXX="aarch64-linux-gnu-g++ --sysroot=$SYSROOT" \
    HDF5_CFLAGS="$("${pc[@]}" --cflags hdf5-openmpi ompi-c)" HDF5_LIBS="$("${pc[@]}" --libs hdf5-openmpi ompi-c)" \
    binaries > "$BUILD_ARM64/build.log" 2>&1 ||
    { tail -30 "$BUILD_ARM64/build.log"; echo "aarch64-check: the build failed (log: $BUILD_ARM64/build.log)" >&2; exit 1; }
  readelf -h "$BUILD_ARM64/bin/trident" | grep -q 'Machine: *AArch64' || { echo "aarch64-check: $BUILD_ARM64/bin/trident is not an AArch64 program" >&2; exit 1; }
}

# A build directory of the paths tests/run.sh runs, each a script that starts qemu on the arm64
# program. Open MPI's shared-memory transport reads the peer's memory with process_vm_readv,
# which qemu-user lacks: its copy-in/copy-out path instead.
runners() {
  local run=$BUILD_ARM64/qemu path
  mkdir -p "$run/bin" "$run/tests"
  for path in bin/trident tests/unit_tests tests/mpi_tests; do
    printf '#!/bin/sh\n# %s for AArch64, run by qemu-user (scripts/aarch64-check.sh)\nexport OMPI_MCA_btl_vader_single_copy_mechanism=none\nexec qemu-aarch64 -cpu %s -L %s %s "$@"\n' \
      "$path" "$ARM64_CPU" "$SYSROOT" "$ROOT/$BUILD_ARM64/$path" > "$run/$path"
    chmod +x "$run/$path"
  done
  echo "$run"
}

tools
sysroot
build
RUN=$(runners)
"$RUN/bin/trident" version | sed -n '1,4p'
BUILD=$RUN tests/run.sh "${GROUPS_WANTED[@]}" | tee "$BUILD_ARM64/tests.log" || true  # counted below
# The reference runs in portable arithmetic, whose x86-64 record is to hold on any CPU (the native
# ones have no AArch64 record). Outside tests/run.sh, whose 15-minute cap a run reaches here.
# REFERENCE_RUNS="" leaves them out; "... bf16-portable" adds the 16-bit one (as long as the default).
REFERENCE_RUNS=${REFERENCE_RUNS-tp2pp2dp2-portable default-portable}
if [[ -n $REFERENCE_RUNS ]]; then
  RUNS=$REFERENCE_RUNS BUILD=$RUN scripts/reference-runs.sh check | tee "$BUILD_ARM64/reference.log" || true
fi
# One line for the whole: the suite's counts plus the reference runs' PASS/FAIL/SKIP lines.
read -r p f s < <(tail -1 "$BUILD_ARM64/tests.log" | awk '{print $1, $3, $5}')
lines() { grep -c "^$1 " "$BUILD_ARM64/reference.log" 2> /dev/null || true; }
if [[ -n $REFERENCE_RUNS ]]; then p=$((p + $(lines PASS))) f=$((f + $(lines FAIL))) s=$((s + $(lines SKIP))); fi
echo "$p passed, $f failed, $s skipped"
[[ $f == 0 && $p != 0 ]]
