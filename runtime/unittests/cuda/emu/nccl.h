//===- nccl.h - Host emulation of NCCL (tests only) -----------------------===//
//
// The subset of NCCL's API the runtime calls (comm/nccl/NcclCommunicator.cpp),
// with NCCL's semantics, for the NCCL communicator compiled against the CUDA
// host emulation (cuda_runtime.h here) and registered as "nccl_emu": the
// real communicator code runs at 2-4 ranks, ranks being processes, on a
// machine without a GPU (fsdprt-run-cuda-emu --nproc N).
//
// What it keeps of NCCL:
// - A collective is enqueued on its stream and returns at once; it
//   completes when every rank of the communicator has reached its matching
//   call (calls match by launch order per communicator). Until then the
//   stream is busy: cudaStreamQuery says cudaErrorNotReady, later work on
//   it waits. A rank that never reaches the call leaves it pending (a hang,
//   which only ncclCommAbort ends).
// - Calls that do not match (another collective, count, type, operator or
//   root at the same position) fail on every rank with ncclInvalidUsage and
//   a message naming both calls (ncclGetLastError), instead of NCCL's
//   undefined behaviour, so that an order bug is a test failure.
// - A rank that dies (its connection closes) fails the pending and later
//   collectives of every other rank with ncclRemoteError, as NCCL's socket
//   transport reports a closed peer.
// - Non-blocking communicators (config.blocking = 0): init returns
//   ncclInProgress and ncclCommGetAsyncError says ncclInProgress until every
//   rank joined. ncclGroupStart / ncclGroupEnd, ncclRedOpCreatePreMulSum
//   (host scalars), ncclAvg on floating types as NCCL computes it (each
//   input pre-multiplied by 1/nranks, then summed), 16-bit data reduced in
//   16-bit storage between ranks, ncclCommAbort that unblocks.
// - Stream capture: a collective called on a capturing stream is a node of
//   the graph; every launch of the graph issues it anew, in the
//   communicator's launch order at that time.
// - ncclCommSplit: collective over the parent, in its launch order (the
//   colours and keys are gathered through it); members of a colour ordered
//   by key, then parent rank; NCCL_SPLIT_NOCOLOR gives no communicator.
// - Device memory: each communicator holds 8 MiB of driver
//   memory (outside the stream-ordered pool, as NCCL's), which
//   cudaMemGetInfo's free memory shows.
// Not emulated: device-resident scalars.
//
// Transport: every rank connects to the communicator's rank 0 over TCP on
// loopback (the unique id names its port); rank 0 checks that the calls
// match, reduces, and sends each rank its result. One proxy thread per
// communicator per rank runs the collectives in launch order.
//
// Test hooks: FSDPRT_NCCL_EMU_MISMATCH=<rank>:<n> makes <rank> describe its
// n-th collective (0-based, per communicator) with one element more, as if
// the program had issued another collective there;
// FSDPRT_NCCL_EMU_DELAY_MS=<ms> makes each collective take <ms> longer on
// its stream (a slow link), after its stream reached it.
//
// Declared in namespace ncclemu (brought in by a using-directive), so that
// nothing clashes with the real NCCL that libfsdp_runtime links.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_NCCL_H
#define FSDPRT_CUDA_EMU_NCCL_H

#include "cuda_runtime.h"

#include <climits>
#include <cstddef>

namespace ncclemu {

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/// The fields of NCCL's config the runtime sets; the rest are NCCL's
/// tuning knobs, which the emulation has no use for.
typedef struct {
  int blocking;
  int splitShare; // accepted; the emulation has no resources to share
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1, 0}
#define NCCL_SPLIT_NOCOLOR -1

struct EmuComm;
typedef EmuComm *ncclComm_t;

const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                      ncclDataType_t datatype,
                                      ncclScalarResidence_t residence,
                                      ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

} // namespace ncclemu

using namespace ncclemu;

#endif // FSDPRT_CUDA_EMU_NCCL_H
