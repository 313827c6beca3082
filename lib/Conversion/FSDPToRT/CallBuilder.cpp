//===- CallBuilder.cpp - the runtime calls of a lowered step --------------===//

#include "CallBuilder.h"

#include "fsdp/rt/fsdprt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::fsdp;

int32_t fsdp::dtypeCode(Type type) {
  if (type.isF32())
    return FSDPRT_F32;
  if (type.isBF16())
    return FSDPRT_BF16;
  if (type.isF16())
    return FSDPRT_F16;
  if (type.isInteger(32))
    return FSDPRT_I32;
  if (type.isInteger(64))
    return FSDPRT_I64;
  return -1;
}

int32_t fsdp::dtypeOf(Value tensor) {
  return dtypeCode(cast<RankedTensorType>(tensor.getType()).getElementType());
}

Value CallBuilder::i32(int64_t v) {
  Value &c = intConstants[{32, v}];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  return c;
}

Value CallBuilder::i64(int64_t v) {
  Value &c = intConstants[{64, v}];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  return c;
}

Value CallBuilder::f64(double v) {
  Value &c = floatConstants[v];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  return c;
}

Value CallBuilder::nullBuffer() {
  if (!null)
    null = rt::NullOp::create(b, loc, rt::BufferType::get(b.getContext()));
  return null;
}

Value CallBuilder::array(ArrayRef<int64_t> values) {
  SmallVector<Value> elements;
  for (int64_t v : values)
    elements.push_back(i64(v));
  return array(ArrayRef<Value>(elements));
}

Value CallBuilder::array(ArrayRef<Value> values) {
  if (values.empty()) // a rank-0 shape: the callee reads nothing
    return array(ArrayRef<Value>{i64(0)});
  return rt::ArrayOp::create(b, loc, rt::ArrayType::get(b.getContext()),
                             values);
}

Value CallBuilder::string(StringRef text) {
  return rt::StringOp::create(b, loc, rt::StringType::get(b.getContext()),
                              b.getStringAttr(text));
}

TensorRef CallBuilder::ref(Value tensor) const {
  auto it = refs.find(tensor);
  assert(it != refs.end() && "tensor used before it was placed");
  return it->second;
}

void CallBuilder::pushTensor(SmallVectorImpl<Value> &args, Value tensor) {
  TensorRef r = ref(tensor);
  args.push_back(r.buffer);
  args.push_back(i64(r.offset));
}

void CallBuilder::pushNull(SmallVectorImpl<Value> &args) {
  args.push_back(nullBuffer());
  args.push_back(i64(0));
}

void CallBuilder::call(StringRef name, ArrayRef<Value> args) {
  SmallVector<Value> operands{step.ctx, current};
  operands.append(args.begin(), args.end());
  rt::CallOp::create(b, loc, TypeRange(),
                     FlatSymbolRefAttr::get(b.getContext(), name), operands);
}

Value CallBuilder::rngKey(int64_t rngId) {
  Value first =
      arith::MulIOp::create(b, loc, step.rank, i64(step.randomSites));
  return arith::AddIOp::create(b, loc, first, i64(rngId));
}
