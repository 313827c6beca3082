//===- Hd.h - Host/device annotation for shared math bodies -----*- C++ -*-===//
//
// Every elementwise or reduction body is written once, in this directory, as
// an inline function marked FSDPRT_HD. The CPU backend calls it from plain
// loops; a CUDA backend compiled by nvcc calls the very same body from its
// kernels, so the two backends cannot drift apart numerically.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_HD_H
#define FSDP_RT_MATH_HD_H

#if defined(__CUDACC__)
#define FSDPRT_HD __host__ __device__
#else
#define FSDPRT_HD
#endif

#endif // FSDP_RT_MATH_HD_H
