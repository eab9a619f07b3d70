#!/usr/bin/env bash
# deps.sh — install the Debian packages Trident needs; a no-op in about a second when all are present.
set -euo pipefail
PACKAGES=(
  build-essential openmpi-bin libopenmpi-dev           # compiler, MPI (mpicxx, mpirun)
  libhdf5-openmpi-dev hdf5-tools                       # parallel HDF5, h5dump
  libboost-program-options-dev libboost-test-dev       # input decks, unit tests
  libdnnl-dev                                          # oneDNN: CPU matmul and friends
  libpng-dev                                           # trident plan --plot
  nlohmann-json3-dev                                   # JSON (header only): encoder.json, plan --json, safetensors
  libpcre2-dev                                         # the pre-tokenising regular expressions (data/pretokenize.hpp)
  python3-numpy python3-torch libopenblas0-pthread     # reference model and benchmark baseline
  python3-h5py python3-matplotlib bc                   # metrics.h5 in tests and plots; bench arithmetic
  python3-regex                                        # the GPT-2 reference encoder of tests/e2e/generate.sh
  python3-venv python3-pip                             # the Hugging Face check environment, cuDNN's frontend below
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Hugging Face's transformers and tokenizers are not packaged for Debian: a virtual environment
# beside Debian's torch, from PyPI, for the tests that check our files against them
# (tests/e2e/hf_files.sh). Optional: where PyPI cannot be reached, those checks are skipped.
hf_env() {
  local venv=${TRIDENT_HF_VENV:-/var/cache/trident/hf-venv}
  local versions=(transformers==4.45.2 tokenizers==0.20.3)  # the newest that run on Debian 12's torch 1.13
  "$venv/bin/python" -c 'import transformers as a, tokenizers as b; assert (a.__version__, b.__version__) == ("4.45.2", "0.20.3")' \
    2>/dev/null && return 0
  echo "deps: installing transformers and tokenizers from PyPI into $venv (optional)"
  mkdir -p "$(dirname "$venv")" 2>/dev/null &&
    /usr/bin/python3 -m venv --system-site-packages "$venv" &&
    timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check "${versions[@]}" >/dev/null 2>&1 ||
    echo "deps: could not install transformers (no PyPI?): the checks against it will be skipped"
}
# cuDNN's frontend (header only, MIT): the CUDA backend's fused attention builds its graphs with it
# (kernels/cuda/cudnn_attention.cpp). NVIDIA ships the headers in its PyPI wheel, not for Debian:
# the pinned wheel, checked by its hash, unpacked once into a cache every clone shares. Optional:
# without it (no PyPI, or no CUDA toolkit) CUDA builds run our own attention kernels alone.
cudnn_frontend() {
  local version=1.32.0 dir=${TRIDENT_CUDNN_FRONTEND:-/var/cache/trident/cudnn-frontend-1.32.0}
  local sha=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
  [[ -f $dir/include/cudnn_frontend.h ]] && return 0
  [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc > /dev/null || return 0
  echo "deps: fetching cuDNN's frontend headers $version from PyPI into $dir (optional)"
  local tmp
  tmp=$(mktemp -d)
  if timeout 300 python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$version" > /dev/null 2>&1 &&
     echo "$sha  $(ls "$tmp"/*.whl)" | sha256sum -c --quiet - > /dev/null 2>&1 &&
     mkdir -p "$tmp/x" && python3 -m zipfile -e "$tmp"/*.whl "$tmp/x" > /dev/null && [[ -f $tmp/x/include/cudnn_frontend.h ]]; then
    mkdir -p "$(dirname "$dir")" && rm -rf "$dir" && mkdir "$dir" && mv "$tmp/x/include" "$dir/include" &&
      cp "$tmp"/x/*.dist-info/licenses/LICENSE* "$dir/" 2> /dev/null
  else
    echo "deps: could not fetch cuDNN's frontend (no PyPI?): CUDA builds will run our own attention kernels only"
  fi
  rm -rf "$tmp"
}
if ((${#missing[@]} == 0)); then hf_env; cudnn_frontend; exit 0; fi
if [[ $(id -u) != 0 ]]; then
  echo "deps: missing packages: ${missing[*]}" >&2
  echo "deps: run 'make deps' as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
hf_env
cudnn_frontend
echo "deps: done"
