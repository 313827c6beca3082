//===- KernelCallsPointwise.cpp - elementwise calls -----------------------===//
//
// The elementwise family (CApiPointwise.cpp): binary ops with broadcasting,
// unary math, scaling, activations and their gradients, dropout and casts,
// each as the runtime's op code and an element count.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

static int32_t geluKind(nn::GeluApproximation a) {
  return a == nn::GeluApproximation::tanh ? FSDPRT_GELU_TANH : FSDPRT_GELU;
}
/// The fsdprt activation code of an activation op or of its gradient.
static int32_t activationKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, int32_t>(op)
      .Case<nn::ReluOp, nn::ReluGradOp>([](auto) { return FSDPRT_RELU; })
      .Case<nn::SiluOp, nn::SiluGradOp>([](auto) { return FSDPRT_SILU; })
      .Case<nn::GeluOp, nn::GeluGradOp>(
          [](auto o) { return geluKind(o.getApproximate()); })
      .Default([](Operation *) -> int32_t {
        llvm_unreachable("not an activation");
      });
}

/// nn::UnaryFn lists the functions in FSDPRT_UNARY_* order.
static int32_t unaryKind(nn::UnaryFn fn) {
  static_assert(
      static_cast<int32_t>(nn::UnaryFn::tanh) == FSDPRT_UNARY_TANH &&
      static_cast<int32_t>(nn::UnaryFn::sigmoid) == FSDPRT_UNARY_SIGMOID &&
      static_cast<int32_t>(nn::UnaryFn::exp) == FSDPRT_UNARY_EXP &&
      static_cast<int32_t>(nn::UnaryFn::log) == FSDPRT_UNARY_LOG &&
      static_cast<int32_t>(nn::UnaryFn::sqrt) == FSDPRT_UNARY_SQRT &&
      static_cast<int32_t>(nn::UnaryFn::rsqrt) == FSDPRT_UNARY_RSQRT &&
      static_cast<int32_t>(nn::UnaryFn::abs) == FSDPRT_UNARY_ABS &&
      static_cast<int32_t>(nn::UnaryFn::pow) == FSDPRT_UNARY_POW &&
      static_cast<int32_t>(nn::UnaryFn::clamp) == FSDPRT_UNARY_CLAMP &&
      static_cast<int32_t>(nn::UnaryFn::erf) == FSDPRT_UNARY_ERF &&
      static_cast<int32_t>(nn::UnaryFn::sin) == FSDPRT_UNARY_SIN &&
      static_cast<int32_t>(nn::UnaryFn::cos) == FSDPRT_UNARY_COS &&
      static_cast<int32_t>(nn::UnaryFn::acos) == FSDPRT_UNARY_ACOS &&
      static_cast<int32_t>(nn::UnaryFn::asin) == FSDPRT_UNARY_ASIN &&
      static_cast<int32_t>(nn::UnaryFn::atan) == FSDPRT_UNARY_ATAN);
  return static_cast<int32_t>(fn);
}

/// out = lhs (code) rhs with broadcasting: binary_forward.
template <typename OpTy>
static void addBinary(KernelEmitters &k, int32_t code) {
  k.add<OpTy>([code](CallBuilder &l, OpTy op) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    Args{l}
        .i32(dtypeOf(op->getResult(0)))
        .i32(code)
        .t(lhs)
        .shape(lhs)
        .t(rhs)
        .shape(rhs)
        .t(op->getResult(0))
        .call("binary_forward");
    return success();
  });
}

void fsdp::addPointwiseKernels(KernelEmitters &k) {
  // The runtime's code of each elementwise binary op (fsdprt.h).
  addBinary<nn::AddOp>(k, FSDPRT_ADD);
  addBinary<nn::SubOp>(k, FSDPRT_SUB);
  addBinary<nn::MulOp>(k, FSDPRT_MUL);
  addBinary<nn::DivOp>(k, FSDPRT_DIV);
  addBinary<nn::FmodOp>(k, FSDPRT_FMOD);
  addBinary<nn::MaximumOp>(k, FSDPRT_MAX);
  addBinary<nn::MinimumOp>(k, FSDPRT_MIN);
  addBinary<nn::MaxWeightOp>(k, FSDPRT_MAX_WEIGHT);
  addBinary<nn::MinWeightOp>(k, FSDPRT_MIN_WEIGHT);
  addBinary<nn::KeepOp>(k, FSDPRT_KEEP);
  addBinary<nn::LtOp>(k, FSDPRT_LT);
  addBinary<nn::LeOp>(k, FSDPRT_LE);
  addBinary<nn::GtOp>(k, FSDPRT_GT);
  addBinary<nn::GeOp>(k, FSDPRT_GE);
  addBinary<nn::EqOp>(k, FSDPRT_EQ);
  addBinary<nn::NeOp>(k, FSDPRT_NE);
  addBinary<nn::FloorDivOp>(k, FSDPRT_FLOOR_DIV);
  k.add<nn::TanhOp, nn::SigmoidOp, nn::ExpOp, nn::LogOp, nn::SqrtOp,
        nn::RsqrtOp, nn::AbsOp, nn::PowOp, nn::ClampOp, nn::ErfOp, nn::SinOp,
        nn::CosOp, nn::AcosOp, nn::AsinOp, nn::AtanOp>(
      [](CallBuilder &calls, auto o) {
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .i32(unaryKind(o.getFn()))
            .t(o.getInput())
            .t(o.getResult())
            .i64(numel(o.getResult()))
            .f64(o.getParamA())
            .f64(o.getParamB())
            .call("unary_forward");
        return success();
      });
  k.add<nn::UnaryGradOp>([](CallBuilder &calls, nn::UnaryGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(unaryKind(o.getFn()))
        .t(o.getInput())
        .t(o.getGrad())
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .f64(o.getA().convertToDouble())
        .f64(o.getB().convertToDouble())
        .call("unary_backward");
    return success();
  });
  k.add<nn::ScaleOp>([](CallBuilder &calls, nn::ScaleOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .f64(o.getFactor().convertToDouble())
        .call("scale_forward");
    return success();
  });
  k.add<nn::ReluOp, nn::SiluOp, nn::GeluOp>([](CallBuilder &calls, auto o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(activationKind(o))
        .t(o.getInput())
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .call("activation_forward");
    return success();
  });
  k.add<nn::ReluGradOp, nn::SiluGradOp, nn::GeluGradOp>(
      [](CallBuilder &calls, auto o) {
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .i32(activationKind(o))
            .t(o.getInput())
            .t(o.getGrad())
            .t(o.getResult())
            .i64(numel(o.getResult()))
            .call("activation_backward");
        return success();
      });
  k.add<nn::DropoutOp>([](CallBuilder &calls, nn::DropoutOp o) {
    // The backward is the same op on the cotangent: same key, same mask.
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .f64(o.getP().convertToDouble())
        .randomKey(int64_t(o.getRngId()))
        .call("dropout_forward");
    return success();
  });
  k.add<nn::RandomOp>([](CallBuilder &calls, nn::RandomOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(o.getDistribution() == nn::Distribution::uniform
                 ? FSDPRT_RNG_UNIFORM
                 : FSDPRT_RNG_NORMAL)
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .f64(o.getA().convertToDouble())
        .f64(o.getB().convertToDouble())
        .randomKey(int64_t(o.getRngId()))
        .call("rng_fill");
    return success();
  });
  k.add<nn::CastOp>([](CallBuilder &calls, nn::CastOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .i32(dtypeOf(o.getResult()))
        .t(o.getResult())
        .i64(numel(o.getResult()))
        .call("cast");
    return success();
  });
}
