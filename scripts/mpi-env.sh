# shellcheck shell=sh
# Single-host MPI settings for the tests and small runs; sourced by tests/run.sh, tests/e2e/lib.sh
# and other test scripts.
# mpi-env.sh - source before mpirun/srun on small single-host Debian 12 machines
# (CI, dev boxes), as root, with more ranks than cores:
#     . scripts/mpi-env.sh   (from the project root)
#     mpirun -np 8 ./app          # or, on the local Slurm node: srun -n 8 ./app
# Tested with Debian 12 Open MPI 4.1.4 (openmpi-bin 4.1.4-3+b1), -np 8 on 2 cores.
# Single-host only: the btl/pml settings below would break multi-node runs.

# mpirun refuses to start as root unless both are set.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Allow -np larger than the number of cores ("There are not enough slots
# available in the system to satisfy the 8 slots ..." otherwise).
export OMPI_MCA_rmaps_base_oversubscribe=1

# Yield the CPU while waiting inside MPI. mpirun does this by itself when it sees
# oversubscription, but under srun (the local Slurm node advertises 8 CPUs on
# 2 cores) it cannot: 2000 MPI_Allreduce on 8 ranks took 112 s instead of 0.25 s.
export OMPI_MCA_mpi_yield_when_idle=1

# poll, not epoll, in libevent (Debian's Open MPI and PMIx use the system's libevent). When a job
# whose ranks exit with a non-zero status is torn down, the epoll backend now and then prints
# "[warn] Epoll MOD(1) on fd 28 failed ... Bad file descriptor" on mpirun's stderr after the
# program's own error line: 5 of 150 runs of a 4-rank run refusing a bad model file here, 0 of
# 150 with this set (Open MPI's own event base already uses poll: opal_event_include).
export EVENT_NOEPOLL=1

# No pinning: with -np <= cores mpirun binds rank i to core i, so tests running
# concurrently (ctest -j) would all pile onto the same cores.
export OMPI_MCA_hwloc_base_binding_policy=none

# No I/O devices in hwloc's topology: each rank's MPI_Init otherwise reads every PCI device's
# configuration space, which a virtual machine traps (an 8-rank start here took 0.86 s with it,
# 0.76 s without); a single host's shared-memory transport needs only the cores and caches.
export HWLOC_COMPONENTS=-pci,-linuxio

# Shared memory only, ob1 PML: no UCX/verbs/TCP probing and no related warnings
# on hosts that happen to have network adapters.
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_base_warn_component_unused=0

# One thread per rank in OpenBLAS/OpenMP (ranks already fill the cores).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# Containers that forbid cross-process memory access (CMA, process_vm_readv:
# Docker's default seccomp profile without CAP_SYS_PTRACE, or yama ptrace_scope
# >= 2) make large messages fail ("Read -1, expected ..., errno = 1"). Then turn
# off single-copy - and, together with it, osc/rdma: with single copy off,
# MPI_Win_create fails with "MPI_ERR_WIN: invalid window" (seen with Open MPI
# 4.1.4) unless osc/rdma is excluded.
# MPI_ENV_NO_CMA=1 forces this, =0 never, unset = guess from /proc.
if [ -z "${MPI_ENV_NO_CMA:-}" ]; then
    MPI_ENV_NO_CMA=0
    _mpi_env_capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null)
    _mpi_env_ptrace=$(( (0x${_mpi_env_capeff:-0} >> 19) & 1 ))      # CAP_SYS_PTRACE
    _mpi_env_seccomp=$(awk '/^Seccomp:/ {print $2}' /proc/self/status 2>/dev/null)
    _mpi_env_scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
    if [ "$_mpi_env_scope" -ge 3 ] ||
       { [ "$_mpi_env_ptrace" = 0 ] && { [ "${_mpi_env_seccomp:-0}" = 2 ] || [ "$_mpi_env_scope" -ge 2 ]; }; }; then
        MPI_ENV_NO_CMA=1
    fi
    unset _mpi_env_capeff _mpi_env_ptrace _mpi_env_seccomp _mpi_env_scope
fi
if [ "$MPI_ENV_NO_CMA" = 1 ]; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_osc='^rdma'
fi
