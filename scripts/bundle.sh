#!/usr/bin/env bash
# bundle.sh — Trident for a bare GPU node (issue 30): a node with a driver, the CUDA toolkit and
# a Python whose wheels hold cuBLAS, cuDNN and NCCL, but no Open MPI, oneDNN, HDF5 or Boost.
#   make bundle            (or scripts/bundle.sh [BUILD] [OUT]; defaults build and bundle)
# writes OUT/ (ignored by git):
#   root.tar.gz    bin/: trident and the GPU test binaries (tests/gpu), without debug info,
#                  compiled for sm_80 and sm_90 and with sm_90's PTX (the Makefile's CUDA_ARCHS); lib/: every shared
#                  library they and Open MPI's plugins load that a bare node lacks; usr/ and
#                  etc/: Open MPI's runtime as its Debian packages install it — mpirun, orted,
#                  the plugins (openmpi3/, pmix2/), the help files and the MCA defaults
#   env.sh         source it: unpacks root.tar.gz beside itself on first use, sets PATH,
#                  LD_LIBRARY_PATH, OPAL_PREFIX (and Open MPI's other relocation variables) and
#                  finds cuBLASLt, cuDNN and NCCL on the node (the toolkit, python3's nvidia-*
#                  wheels, or what LD_LIBRARY_PATH and ldconfig already hold), saying which
#   MANIFEST.txt   what is in it, from which commit, and the largest files
# Left out on purpose: glibc (the node's own; the binary needs GLIBC 2.34 at most, printed in
# MANIFEST.txt) and the CUDA libraries (libcuda comes with the driver; libnccl alone is ~220 MB).
# tests/bundle/run.sh proves it in a bare Debian root (make test-bundle).
set -euo pipefail
BUILD=${1:-${BUILD:-build}}
OUT=${2:-bundle}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BINARIES=("$BUILD/bin/trident" "$BUILD/tests/gpu_tests" "$BUILD/tests/gpu_gemm_rate" "$BUILD/tests/gpu/test_nccl")
for b in "${BINARIES[@]}"; do
  [[ -x $b ]] || { echo "bundle: $b is missing: make CUDA=1 all first (make bundle does)" >&2; exit 2; }
done
# Read whole before matching: grep -q stops at the first match and, under pipefail, the
# writer's SIGPIPE would fail the pipeline (exit 141) however the match went.
version_text=$("${BINARIES[0]}" version)
grep -q '^CUDA: runtime' <<< "$version_text" ||
  { echo "bundle: ${BINARIES[0]} was built without CUDA (nvcc missing, or CUDA=0)" >&2; exit 2; }

STAGE=$(mktemp -d /tmp/trident-bundle.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
tree="$STAGE/root"
mkdir -p "$tree/bin" "$tree/lib"

# 1. Open MPI's runtime, file by file as its packages installed it (dpkg -L): the same tree a
#    `dpkg-deb -x` of the .debs gives, without fetching them again.
MPI_PACKAGES=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libhwloc-plugins)
for package in "${MPI_PACKAGES[@]}"; do
  dpkg -L "$package" | while read -r path; do
    [[ -f $path || -L $path ]] || continue
    case $path in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | */include/*) continue ;; esac
    mkdir -p "$tree$(dirname "$path")"
    cp -a "$path" "$tree$path"
  done
done

# Debian names mpirun and mpiexec through update-alternatives, outside the package: named here.
for name in mpirun mpiexec; do ln -s orterun "$tree/usr/bin/$name"; done

# 2. Our binaries, without debug info.
for b in "${BINARIES[@]}"; do strip --strip-debug -o "$tree/bin/$(basename "$b")" "$b"; done

# 3. Every shared library the binaries and the Open MPI tree load, except glibc's and CUDA's
#    (resolved on this machine by ldd, copied into lib/ under their sonames).
node_provides() {  # glibc, the dynamic loader, and what the CUDA driver / toolkit / wheels provide
  case $1 in
    linux-vdso.so.* | ld-linux* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
      libresolv.so.* | libutil.so.* | libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | \
      libnccl.so.* | libcudnn*.so.* | libnvrtc* | libnvJitLink*) return 0 ;;
  esac
  return 1
}
elves=$(find "$tree" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file -b "$1" | grep -q ELF && echo "$1"' _ {} \;)
for elf in $elves; do
  ldd "$elf" 2> /dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  node_provides "$soname" && continue
  [[ -e $tree/lib/$soname || -e $tree/usr/lib/x86_64-linux-gnu/$soname ]] && continue  # already there
  cp -L "$path" "$tree/lib/$soname"
done

# 4. The archive, env.sh and the manifest.
rm -rf "$OUT" && mkdir -p "$OUT"
tar -C "$STAGE" -I 'gzip -9' -cf "$OUT/root.tar.gz" root  # gzip: every Debian root has it, not always xz
cp scripts/bundle-env.sh "$OUT/env.sh"
{
  echo "trident bundle of $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'), made $(date -u +%FT%TZ) on $(hostname)"
  "$tree/bin/trident" version 2>/dev/null | sed 's/^/  /' || true
  echo "needs on the node: glibc >= $(objdump -T "$tree"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | cut -d_ -f2)," \
       "an NVIDIA driver, libcublasLt, libcudnn 9, libnvrtc and libnccl of CUDA 13"
  echo "archive: $(du -h "$OUT/root.tar.gz" | cut -f1) compressed, $(du -sh "$tree" | cut -f1) unpacked, $(find "$tree" -type f | wc -l) files"
  echo "largest files:"
  find "$tree" -type f -printf '%s %P\n' | sort -rn | awk 'NR <= 12 {printf "  %6.1f MiB  %s\n", $1 / 1048576, $2}'
} > "$OUT/MANIFEST.txt"
cat "$OUT/MANIFEST.txt"
