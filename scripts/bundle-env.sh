# env.sh — of a Trident bundle (scripts/bundle.sh); source it (bash): . bundle/env.sh
# Unpacks root.tar.gz beside itself on first use, points PATH, LD_LIBRARY_PATH and Open MPI's
# relocation variables at it, and finds the CUDA libraries the bundle leaves to the node —
# cuBLASLt, NCCL, cuDNN — in what LD_LIBRARY_PATH and ldconfig already hold, the CUDA toolkit,
# or python3's nvidia-* wheels, saying which it used. TRIDENT_BUNDLE_QUIET=1 says nothing.
_tb_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_tb_say() { [ "${TRIDENT_BUNDLE_QUIET:-0}" = 1 ] || echo "env.sh: $*" >&2; }
# Unpacked beside env.sh, or under TRIDENT_UNPACK_DIR (keep the bundle folder small where it is
# carried); again whenever root.tar.gz is not the archive it was unpacked from.
_tb_unpack=${TRIDENT_UNPACK_DIR:-$_tb_dir}
_tb_root=$_tb_unpack/root
_tb_from=$(stat -c '%Y-%s' "$_tb_dir/root.tar.gz" 2> /dev/null)
if [ ! -x "$_tb_root/bin/trident" ] || [ "$(cat "$_tb_root/.unpacked-from" 2> /dev/null)" != "$_tb_from" ]; then
  rm -rf "$_tb_root" && mkdir -p "$_tb_unpack" &&
    tar -C "$_tb_unpack" -xzf "$_tb_dir/root.tar.gz" && echo "$_tb_from" > "$_tb_root/.unpacked-from" ||
    { _tb_say "cannot unpack $_tb_dir/root.tar.gz into $_tb_unpack"; return 1; }
fi
_tb_arch=usr/lib/x86_64-linux-gnu
export TRIDENT_BUNDLE=$_tb_root
export PATH="$_tb_root/bin:$_tb_root/usr/bin:$PATH"
# Open MPI from its Debian packages, relocated: every directory it knows relative to its prefix
# follows OPAL_PREFIX; the configuration directory (/etc/openmpi) is absolute, PMIx and hwloc
# have prefixes of their own.
export OPAL_PREFIX="$_tb_root/usr"
export OPAL_SYSCONFDIR="$_tb_root/etc/openmpi"
export PMIX_PREFIX="$_tb_root/$_tb_arch/pmix2"
export PMIX_LIBDIR="$PMIX_PREFIX/lib" PMIX_PKGLIBDIR="$PMIX_PREFIX/lib/pmix" PMIX_DATADIR="$PMIX_PREFIX/share"
export PMIX_PKGDATADIR="$PMIX_PREFIX/share/pmix"
# Open MPI starts a daemon even for a rank started without mpirun, through ssh/rsh's path; a node
# with neither gets a path that exists (nothing is ever run by it on one host).
if ! command -v ssh > /dev/null 2>&1 && ! command -v rsh > /dev/null 2>&1; then
  export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-/bin/false}
fi
export HWLOC_PLUGINS_PATH="$_tb_root/$_tb_arch/hwloc"
_tb_libs="$_tb_root/lib:$_tb_root/$_tb_arch:$_tb_root/$_tb_arch/openmpi/lib:$_tb_root/$_tb_arch/pmix2/lib"

# _tb_find SONAME: the directory that holds it — already on the loader's path, the toolkit, or a
# wheel of python3's nvidia package (nvidia/*/lib, nvidia/cu13/lib).
_tb_find() {
  _tb_d=""
  for _tb_p in $(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
    [ -e "$_tb_p/$1" ] && { _tb_d=$_tb_p; _tb_how="LD_LIBRARY_PATH"; return 0; }
  done
  _tb_p=$(ldconfig -p 2> /dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
  [ -n "$_tb_p" ] && { _tb_d=$(dirname "$_tb_p"); _tb_how="ldconfig"; return 0; }
  for _tb_p in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib" /usr/local/cuda/lib64 \
               /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$_tb_p/$1" ] && { _tb_d=$_tb_p; _tb_how="the CUDA toolkit"; return 0; }
  done
  if [ -z "${_tb_wheels+x}" ]; then
    _tb_wheels=$(python3 -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2> /dev/null || true)
  fi
  for _tb_p in $_tb_wheels; do
    _tb_p=$(find "$_tb_p" -maxdepth 4 -name "$1" 2> /dev/null | head -1)
    [ -n "$_tb_p" ] && { _tb_d=$(dirname "$_tb_p"); _tb_how="python3's nvidia wheels"; return 0; }
  done
  return 1
}
_tb_missing=""
for _tb_so in libcublasLt.so.13 libnccl.so.2 libcudnn.so.9 libnvrtc.so.13; do
  if _tb_find "$_tb_so"; then
    _tb_say "$_tb_so from $_tb_d ($_tb_how)"
    case ":$_tb_libs:" in *":$_tb_d:"*) ;; *) _tb_libs="$_tb_libs:$_tb_d" ;; esac
  else
    _tb_missing="$_tb_missing $_tb_so"
  fi
done
[ -z "$_tb_missing" ] || _tb_say "not found on this node:$_tb_missing (kernels.device = cuda needs cuBLASLt, its fused attention cuDNN and NVRTC, comm.backend = nccl NCCL; trident opens them when a run needs them, and runs on the CPU without them)"
export LD_LIBRARY_PATH="$_tb_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _tb_dir _tb_unpack _tb_from _tb_root _tb_arch _tb_libs _tb_d _tb_p _tb_how _tb_so _tb_missing _tb_wheels
unset -f _tb_find _tb_say
