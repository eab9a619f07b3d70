#!/usr/bin/env bash
# The bundle (scripts/bundle.sh) proven where it is meant to run: a bare Debian 12 root
# (debootstrap --variant=minbase: none of Open MPI, oneDNN, HDF5, Boost, OpenMP's runtime, not
# even python3) with only the CUDA toolkit bind-mounted in from this machine, as a GPU node has
# one (after a first run with no CUDA library at all: `trident version` and a CPU training run).
# Inside it, through the bundle's env.sh alone: `trident version`, `trident prepare`, a
# 2-rank mpirun training run of inputs/tiny.deck on the CPU, and its metrics.h5, read back with
# h5py (outside the root, which has no python3). Outside it: no AVX-512 instruction in its
# binaries, and scripts/gpu-check.sh's training commands accepted by the bundle's trident
# (--check). PASS/FAIL lines; run by `make test-bundle`.
#   TRIDENT_BARE_ROOT=DIR   where the root is made once and kept (default /var/cache/trident/bare-bookworm;
#                           making it needs Debian's package repositories and a few minutes)
. tests/e2e/lib.sh
BUNDLE=${BUNDLE:-$ROOT/bundle}
BARE=${TRIDENT_BARE_ROOT:-/var/cache/trident/bare-bookworm}
CUDA_DIR=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")

if [[ ! -x $BARE/bin/bash ]]; then
  command -v debootstrap > /dev/null || apt-get install -y -q debootstrap > "$WORK/apt.log" 2>&1
  rm -rf "$BARE" && mkdir -p "$(dirname "$BARE")"
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2> /dev/null)  # apt's own
  if ! debootstrap --variant=minbase bookworm "$BARE" "${mirror:-http://deb.debian.org/debian}" > "$WORK/debootstrap.log" 2>&1; then
    fail bare_root "debootstrap failed: $(tail -3 "$WORK/debootstrap.log")"
    rm -rf "$BARE"
    exit 0
  fi
fi
# Bare: none of what the build installs, and no OpenMP runtime or python3.
present=$(chroot "$BARE" dpkg-query -W -f '${Package}\n' 2> /dev/null |
          grep -E '^(openmpi|libopenmpi|libhdf5|libdnnl|libboost|libgomp|python3|libpmix|libhwloc)' | tr '\n' ' ')
[[ -z $present ]] && pass "bare_root ($(chroot "$BARE" dpkg-query -W -f '.' | wc -c) packages, none of the build's)" ||
  fail bare_root "the root has $present"

# Our binaries in it are for any x86-64 CPU with AVX2 (make bundle's BUNDLE_ARCH): not one
# AVX-512 (EVEX) instruction — zmm registers, xmm/ymm 16–31, mask registers, embedded
# broadcasts — which a GPU node's CPU without AVX-512 would stop on. (oneDNN's library has them
# and chooses at run time.)
mkdir -p "$WORK/unpacked" && tar -xzf "$BUNDLE/root.tar.gz" -C "$WORK/unpacked" root/bin
evex=""
for binary in "$WORK"/unpacked/root/bin/*; do
  n=$(objdump -d --no-show-raw-insn "$binary" | grep -cE '%zmm|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|%k[0-7]\b|\{1to')
  ((n == 0)) || evex+="$(basename "$binary") has $n; "
done
[[ -z $evex && -n $(ls "$WORK/unpacked/root/bin" 2> /dev/null) ]] &&
  pass "bundle_binaries_run_on_avx2 ($(ls "$WORK/unpacked/root/bin" | wc -l) binaries, no AVX-512 instruction)" ||
  fail bundle_binaries_run_on_avx2 "AVX-512 instructions: ${evex:-no binaries unpacked}"

# The bundle copied in (env.sh unpacks it there), the toolkit, /proc, /sys, /dev and /dev/shm
# (Open MPI's shared-memory transport) mounted, as on a node; all undone at exit.
inside=$(mktemp -d "$BARE/tmp/bundle-test.XXXXXX")
mounts=()
cleanup() {
  local m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2> /dev/null; done
  rm -rf "$inside" "$WORK"
}
trap cleanup EXIT
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2" && mount --bind "$1" "$2" && mounts+=("$2") && { [[ ${3:-} != ro ]] || mount -o remount,bind,ro "$2"; }
}
mount -t proc proc "$BARE/proc" && mounts+=("$BARE/proc")
bind /sys "$BARE/sys" ro  # hwloc reads the CPU topology there
bind /dev "$BARE/dev"
mount -t tmpfs tmpfs "$BARE/dev/shm" && mounts+=("$BARE/dev/shm")
cp -r "$BUNDLE" "$inside/bundle"
cp "$ROOT/inputs/tiny.deck" "$inside/"
rel=${inside#"$BARE"}

# in_root NAME COMMAND: runs COMMAND with bash in the root after sourcing env.sh; output in $WORK/NAME.out.
in_root() {
  timeout -k 5 300 chroot "$BARE" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMP_NUM_THREADS=1 \
    /bin/bash -c "cd $rel && . bundle/env.sh && $2" > "$WORK/$1.out" 2>&1
}
# First with no CUDA library on the node at all (the toolkit not yet mounted): the bundle's trident
# starts, says which it cannot load, and trains on the CPU — it opens them when a run needs them.
if in_root no_toolkit "trident version && trident prepare data/default /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 &&
                       trident train tiny.deck --train.steps=2 --train.run_dir=runs/no_toolkit" &&
   grep -q '^CUDA: runtime .*cuBLASLt not loadable (libcublasLt.so' "$WORK/no_toolkit.out" &&
   grep -qE '^step +2/2' "$WORK/no_toolkit.out"; then
  pass "bundle_runs_on_the_cpu_without_cuda_libraries ($(grep -m1 -oE 'NCCL [^(]*' "$WORK/no_toolkit.out"))"
else
  fail bundle_runs_on_the_cpu_without_cuda_libraries "$(grep -vE '^(step|  )' "$WORK/no_toolkit.out" | tail -5)"
fi
rm -rf "$inside/data" "$inside/runs"
bind "$CUDA_DIR" "$BARE/usr/local/cuda" ro
if in_root version "trident version" && grep -q '^trident ' "$WORK/version.out" && grep -q '^CUDA: runtime' "$WORK/version.out"; then
  pass "bundle_trident_version ($(grep -m1 '^trident ' "$WORK/version.out"))"
else
  fail bundle_trident_version "$(tail -5 "$WORK/version.out")"
fi
grep '^env.sh:' "$WORK/version.out" | sed 's/^/  /'
if in_root train "trident prepare data/default /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 &&
                  mpirun -np 2 trident train tiny.deck --parallel.data=2 --train.steps=10 --checkpoint.at_end=true" &&
   grep -q '^step     10/10' "$WORK/train.out"; then
  pass "bundle_mpirun_two_ranks_trains ($(grep -m1 '^step     10/10' "$WORK/train.out" | cut -d'|' -f1-2))"
else
  fail bundle_mpirun_two_ranks_trains "$(grep -vE '^(step|  )' "$WORK/train.out" | tail -8)"
fi
metrics="$inside/runs/tiny/metrics.h5"
if [[ -f $metrics ]] && /usr/bin/python3 -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
steps = list(f['step'][:])
assert steps == list(range(1, 11)), steps
print('metrics.h5: %d steps, last loss %.4f' % (len(steps), f['loss'][-1]))" "$metrics" > "$WORK/h5.out" 2>&1; then
  pass "bundle_metrics_h5_reads ($(cat "$WORK/h5.out"))"
else
  fail bundle_metrics_h5_reads "$(tail -3 "$WORK/h5.out" 2> /dev/null)"
fi
if in_root inspect "trident inspect runs/tiny/checkpoints/step-00000010.full.h5" && grep -q 'checksums: all verified' "$WORK/inspect.out"; then
  pass bundle_checkpoint_verifies
else
  fail bundle_checkpoint_verifies "$(tail -3 "$WORK/inspect.out")"
fi

# scripts/gpu-check.sh's one GPU run, its commands tried here through the bundle: every training
# run of it with --check on the guarded backend (the deck, the overrides, the data, the memory),
# so that an argument the node would refuse at start-up is refused here instead.
if REF="$WORK/ref" "$ROOT/scripts/gpu-check.sh" data > "$WORK/gpu-data.log" 2>&1 &&
   CHECK=1 DEVICE=guard NO_GPU_OK=1 PY=/usr/bin/python3 REF="$WORK/ref" BUNDLE="$BUNDLE" OUT="$WORK/gpu-check" \
     "$ROOT/scripts/gpu-check.sh" > "$WORK/gpu-check.log" 2>&1; then
  pass "gpu_check_commands_accepted ($(grep -c '^PASS' "$WORK/gpu-check/summary.txt") parts checked)"
else
  fail gpu_check_commands_accepted "$(grep -sv '^PASS' "$WORK/gpu-check/summary.txt" | head -3 | tr '\n' ' ')$(tail -2 "$WORK/gpu-data.log")"
fi
# Each GPT-2 run's verdict carries the planner's figures for it (the bundle's trident plan on the
# node's profile; not the f32 attention products' diagnostic run, which the planner does not
# model), and the variants' plans differ from the default's where their kernels do.
runs=$(grep -s '^PASS gpt2_124m' "$WORK/gpu-check/summary.txt" | grep -vc f32_attention)
planned=$(grep -s '^PASS gpt2_124m' "$WORK/gpu-check/summary.txt" | grep -c 'planned [0-9.]* ms a step, MFU [0-9.]*% (h100-80gb-dgx)')
distinct=$(grep -so 'planned [0-9.]* ms' "$WORK/gpu-check/summary.txt" | sort -u | wc -l)
if ((runs >= 5 && planned == runs && distinct >= 4)); then
  pass "gpu_check_plans_each_gpt2_run ($runs runs, $distinct distinct step times)"
else
  fail gpu_check_plans_each_gpt2_run "$planned of $runs runs planned, $distinct distinct: $(grep -s gpt2_124m "$WORK/gpu-check/summary.txt" | head -2 | tr '\n' ' ')"
fi
