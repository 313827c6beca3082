//===- Shape.cpp - Dims helpers -------------------------------------------===//
#include "fsdp/rt/backend/Shape.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/fsdprt.h"

#include <algorithm>

namespace fsdp {
namespace rt {

int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      fail(Status::InvalidArgument, "negative dimension ", d);
    if (d != 0 && n > INT64_MAX / d)
      fail(Status::InvalidArgument, "element count overflows int64");
    n *= d;
  }
  return n;
}

static std::string toString(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(Status::InvalidArgument, "shapes ", toString(a), " and ",
           toString(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape shapeFromAbi(int32_t rank, const int64_t *dims, const char *what) {
  if (rank < 0 || rank > FSDPRT_MAX_RANK)
    fail(Status::InvalidArgument, what, ": rank ", rank, " outside [0, ",
         FSDPRT_MAX_RANK, "]");
  if (rank > 0 && !dims)
    fail(Status::InvalidArgument, what, ": null shape pointer");
  Shape s(dims, dims + rank);
  for (int64_t d : s)
    if (d < 0)
      fail(Status::InvalidArgument, what, ": negative dimension ", d);
  numelOf(s);
  return s;
}

std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::vector<int64_t> broadcastStrides(const Shape &operand,
                                      const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  std::vector<int64_t> own = stridesOf(operand);
  size_t lead = shape.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    strides[lead + i] = operand[i] == 1 ? 0 : own[i];
  return strides;
}

Shape keptShape(const Shape &shape, const std::vector<int64_t> &dims,
                int64_t &count) {
  Shape kept = shape;
  count = 1;
  for (int64_t d : dims) {
    count *= shape[d];
    kept[d] = 1;
  }
  return kept;
}

} // namespace rt
} // namespace fsdp
