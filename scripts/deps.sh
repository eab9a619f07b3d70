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
  python3-venv                                         # the Hugging Face check environment below
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
if ((${#missing[@]} == 0)); then hf_env; exit 0; fi
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
echo "deps: done"
