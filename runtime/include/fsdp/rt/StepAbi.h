/*===- StepAbi.h - The contract between a compiled step and its runner -*- C -*-===*\
|*                                                                            *|
|* A lowered training step is either JIT-compiled by fsdp-run or compiled     *|
|* ahead of time by fsdp-compile into a step library (a shared object) that  *|
|* a runner without LLVM (fsdprt-run) dlopens. Both call the step through    *|
|* the signature below. A step library also exports its program description  *|
|* (the `fsdp.program` JSON) and an ABI stamp, which the runner checks       *|
|* against its own before calling anything.                                  *|
\*===----------------------------------------------------------------------===*/
#ifndef FSDP_RT_STEPABI_H
#define FSDP_RT_STEPABI_H

#include <stdint.h>

/* Bump FSDPRT_ABI_VERSION when a declaration of fsdprt.h changes in a way  */
/* that compiled steps notice (an argument, a code, a removed function);    */
/* bump FSDPRT_STEP_ABI_VERSION when the step signature below or the        */
/* meaning of the program description (ProgramKeys.def) changes.         */
#define FSDPRT_ABI_VERSION 3
#define FSDPRT_STEP_ABI_VERSION 4

/* Symbols of a step library besides the step itself (whose name is the     */
/* description's "entry"): `const uint32_t fsdp_abi_stamp[2]` holding       */
/* {FSDPRT_ABI_VERSION, FSDPRT_STEP_ABI_VERSION} of the compiler that made  */
/* it, and `const char fsdp_program[]`, the NUL-terminated description.     */
#define FSDPRT_STEP_ABI_STAMP_SYMBOL "fsdp_abi_stamp"
#define FSDPRT_STEP_PROGRAM_SYMBOL "fsdp_program"

/* The step (every handle an fsdprt int64 handle; returns an fsdprt status; */
/* the runner synchronises the context afterwards). step_count is the       */
/* number of optimizer steps already taken (0 for the first);               */
/* replicate_comm is 0 unless the mesh has a replicate dimension;          */
/* post_forward_comm is the group of "post_forward_group" consecutive ranks */
/* this rank is in (reshard_after_forward = N), 0 without one; seed (the    */
/* run's --seed) and rank key the dropout masks. CPU offload ("cpu_offload" */
/* in the description): `host` is the host buffer of "host_bytes" bytes     */
/* (fsdprt_buffer_alloc_host), the copies run on the host_to_device and     */
/* device_to_host streams and the optimizer on host_compute (a host stream, */
/* fsdprt_stream_create_host); without offload all four are 0 (unused).     */
typedef int32_t (*fsdprt_step_fn)(int64_t ctx, int64_t persistent,
                                  int64_t compute_stream,
                                  int64_t all_gather_stream,
                                  int64_t reduce_scatter_stream,
                                  int64_t shard_comm, int64_t replicate_comm,
                                  int64_t post_forward_comm,
                                  int64_t step_count, int64_t seed,
                                  int64_t rank, int64_t host,
                                  int64_t host_to_device_stream,
                                  int64_t device_to_host_stream,
                                  int64_t host_compute_stream);

/* The same arguments by name (StepAbi.def, whose rows the compiler checks  */
/* against fsdprt_step_fn): what a runner fills before calling the step.    */
typedef struct fsdprt_step_args {
#define FSDPRT_STEP_ARG(name, kind) int64_t name;
#include "fsdp/rt/StepAbi.def"
} fsdprt_step_args;

#endif /* FSDP_RT_STEPABI_H */
