// NCCL, opened on first use (core/shared_library.hpp says why): a rank on comm.backend = mpi
// never loads it. Each NCCL function the communicator calls is defined here as a call through
// NCCL's own; the soname is the major version of the nccl.h this binary was compiled against.
#if TRIDENT_NCCL
#include <nccl.h>

#include <string>

#include "comm/nccl/nccl_library.hpp"

namespace trident::comm {

SharedLibrary& nccl_library() {
  static SharedLibrary library("libnccl.so." + std::to_string(NCCL_MAJOR), "comm.backend = nccl");
  return library;
}

}  // namespace trident::comm

using trident::comm::nccl_library;

TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclGetVersion, (int* version), (version))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclCommInitRankConfig,
                (ncclComm_t * comm, int ranks, ncclUniqueId id, int rank, ncclConfig_t* config),
                (comm, ranks, id, rank, config))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * error),
                (comm, error))
TRIDENT_FORWARD(nccl_library(), const char*, ncclGetErrorString, (ncclResult_t result), (result))
TRIDENT_FORWARD(nccl_library(), const char*, ncclGetLastError, (ncclComm_t comm), (comm))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclGroupStart, (), ())
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclGroupEnd, (), ())
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclAllReduce,
                (const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                 cudaStream_t stream),
                (send, receive, count, type, op, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclReduce,
                (const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                 ncclComm_t comm, cudaStream_t stream),
                (send, receive, count, type, op, root, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclReduceScatter,
                (const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                 cudaStream_t stream),
                (send, receive, count, type, op, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclAllGather,
                (const void* send, void* receive, size_t count, ncclDataType_t type, ncclComm_t comm,
                 cudaStream_t stream),
                (send, receive, count, type, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclBroadcast,
                (const void* send, void* receive, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                 cudaStream_t stream),
                (send, receive, count, type, root, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclSend,
                (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream),
                (send, count, type, peer, comm, stream))
TRIDENT_FORWARD(nccl_library(), ncclResult_t, ncclRecv,
                (void* receive, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream),
                (receive, count, type, peer, comm, stream))
#endif
