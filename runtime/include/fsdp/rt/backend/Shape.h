//===- Shape.h - Dims helpers -----------------------------------*- C++ -*-===//
#ifndef FSDP_RT_SHAPE_H
#define FSDP_RT_SHAPE_H

#include <cstdint>
#include <vector>

namespace fsdp {
namespace rt {

using Shape = std::vector<int64_t>;

/// Product of dims (1 for rank 0); throws on negative dims or overflow.
int64_t numelOf(const Shape &shape);
/// Numpy trailing broadcast of two shapes; throws if incompatible.
Shape broadcastShapes(const Shape &a, const Shape &b);
/// Reads a C ABI (rank, dims) pair into a Shape, validating both.
Shape shapeFromAbi(int32_t rank, const int64_t *dims, const char *what);
/// Row-major strides.
std::vector<int64_t> stridesOf(const Shape &shape);
/// Row-major strides of `operand` right-aligned in `shape`, 0 along the
/// dims where it broadcasts.
std::vector<int64_t> broadcastStrides(const Shape &operand, const Shape &shape);
/// `shape` with the reduced `dims` set to 1 (a reduction's result with
/// keepdim); `count` is the number of elements each result reduces.
Shape keptShape(const Shape &shape, const std::vector<int64_t> &dims,
                int64_t &count);

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_SHAPE_H
