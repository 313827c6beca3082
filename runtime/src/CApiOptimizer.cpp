//===- CApiOptimizer.cpp - C ABI: optimizer steps and gradient norms ------===//
#include "CApiSupport.h"

#include "fsdp/rt/backend/OptimizerScalars.h"
#include "fsdp/rt/fsdprt.h"

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

static void requireFinite(double v, const char *what) {
  if (!std::isfinite(v))
    fail(Status::InvalidArgument, what, " must be finite");
}

static void requireStep(int64_t step) {
  if (step < 1)
    fail(Status::InvalidArgument, "step must be >= 1 (1-based), got ", step);
}

static void requireBetas(double beta1, double beta2) {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    fail(Status::InvalidArgument, "betas must be in [0, 1), got (", beta1,
         ", ", beta2, ")");
}

/// torch.optim.Adafactor's ranges.
static void requireAdafactor(double beta2Decay, double eps1, double eps2,
                             double d) {
  if (!(beta2Decay <= 0) || !(eps1 >= 0) || !(eps2 >= 0) || !(d >= 1) ||
      !std::isfinite(eps1) || !std::isfinite(eps2) || !std::isfinite(d))
    fail(Status::InvalidArgument,
         "Adafactor needs beta2_decay <= 0, finite eps1, eps2 >= 0 and d >= "
         "1, got (",
         beta2Decay, ", ", eps1, ", ", eps2, ", ", d, ")");
}

/// A valid Adafactor layout of `count` integers.
static AdafactorLayout adafactorLayout(const int64_t *values, int64_t count) {
  if (!values)
    fail(Status::InvalidArgument, "the Adafactor layout is null");
  AdafactorLayout layout;
  std::string error = AdafactorLayout::parse(values, count, layout);
  if (!error.empty())
    fail(Status::InvalidArgument, "Adafactor ", error);
  return layout;
}

/// The found-inf flag an update skips on (buffer 0: none).
static const float *skipFlag(Launch &l, int64_t skip, int64_t skipOff) {
  if (skip == 0)
    return nullptr;
  return static_cast<const float *>(
      l.operand(skip, skipOff, 1, DType::F32, "skip"));
}

/// A gradient reduced into one f32 by `reduce` (the sum of squares, the
/// non-finite flag), written or accumulated into `out`.
static int32_t reduceGrad(const char *fn, const char *op,
                          void (Backend::*reduce)(DType, const void *, int64_t,
                                                  float *, bool),
                          int64_t ctx, int64_t stream, int32_t dtype,
                          int64_t grad, int64_t grad_off, int64_t numel,
                          int64_t out, int64_t out_off, int32_t accumulate) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(numel, "numel");
    const void *pg = l.operand(grad, grad_off, numel, "grad");
    auto *po =
        static_cast<float *>(l.operand(out, out_off, 1, DType::F32, "out"));
    Backend &be = l.backend();
    DType dt = l.dtype();
    bool acc = accumulate != 0;
    l.enqueue([=, &be] { (be.*reduce)(dt, pg, numel, po, acc); });
  });
}

/// The tensors of an update: `count` sets of (param, grad, then the
/// states named in `states` when `withStates`) as (buffer, byte offset)
/// pairs in `buffers` and `offsets`, numels[k] elements each.
static std::vector<UpdateTensors>
updateTensors(Launch &l, int64_t count, const int64_t *buffers,
              const int64_t *offsets, const int64_t *numels,
              std::initializer_list<const char *> states, bool withStates) {
  requirePositive(count, "count");
  if (!buffers || !offsets || !numels)
    fail(Status::InvalidArgument, "the buffer, offset and numel arrays must "
                                  "not be null");
  int64_t perTensor = 2 + static_cast<int64_t>(states.size());
  std::vector<UpdateTensors> tensors(count);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t *buf = buffers + k * perTensor, *off = offsets + k * perTensor;
    auto name = [&](const char *what) {
      return count == 1 ? std::string(what)
                        : std::string(what) + " of tensor " + std::to_string(k);
    };
    int64_t n = nonNegative(numels[k], name("numel").c_str());
    UpdateTensors &t = tensors[k];
    t.n = n;
    t.param = static_cast<float *>(
        l.operand(buf[0], off[0], n, DType::F32, name("param").c_str()));
    t.grad = l.operand(buf[1], off[1], n, name("grad").c_str());
    t.state[0] = t.state[1] = nullptr;
    int i = 0;
    for (const char *state : states) {
      if (withStates)
        t.state[i] = static_cast<float *>(l.operand(
            buf[2 + i], off[2 + i], n, DType::F32, name(state).c_str()));
      ++i;
    }
  }
  return tensors;
}

/// What every update call takes besides its hyperparameters: `count`
/// tensors as updateTensors reads them, the step (from 1) and the found-inf
/// flag it skips on.
struct UpdateOperands {
  int64_t ctx, stream;
  int32_t gradDtype;
  int64_t count;
  const int64_t *buffers, *offsets, *numels;
  int64_t step, skip, skipOff;
};

/// An update call: validate() checks the hyperparameters; the tensors
/// (param, grad, then `states` when `withStates`) are resolved and
/// (be.*apply)(tensors, scalars) is queued, scalars(lrFactor, step)
/// forming them for the context's lr factor at that step (and again at
/// each replay of a step graph).
template <typename Scalars, typename Validate, typename MakeScalars>
static int32_t update(const char *fn, const char *op, const UpdateOperands &u,
                      std::initializer_list<const char *> states,
                      bool withStates, Validate validate, MakeScalars scalars,
                      void (Backend::*apply)(DType, const UpdateTensors *,
                                             int64_t, const Scalars &,
                                             const Scalars *, const float *)) {
  return guarded(fn, [&] {
    Launch l(u.ctx, u.stream, u.gradDtype, op);
    requireStep(u.step);
    validate();
    std::vector<UpdateTensors> tensors = updateTensors(
        l, u.count, u.buffers, u.offsets, u.numels, states, withStates);
    Backend &be = l.backend();
    const DelayConfig &delays = l.context().delays();
    DType dt = l.dtype();
    int64_t step = u.step;
    Scalars sc = scalars(l.context().lrFactor(), step);
    const Scalars *live = l.live<Scalars>([=](const StepValues &v) {
      return scalars(v.lrFactor, step + v.stepsSinceCapture);
    });
    const float *ps = skipFlag(l, u.skip, u.skipOff);
    l.enqueue([=, &be, &delays] {
      delays.apply(DelayPoint::Optimizer);
      (be.*apply)(dt, tensors.data(), static_cast<int64_t>(tensors.size()),
                  sc, live, ps);
    });
  });
}

static int32_t sgdUpdate(const char *fn, const UpdateOperands &u, double lr,
                         double momentum, double dampening,
                         double weight_decay, int32_t nesterov) {
  return update<SgdScalars>(
      fn, "sgd_step", u, {"momentum_buf"}, momentum != 0,
      [&] {
        requireFinite(lr, "lr"), requireFinite(momentum, "momentum");
        requireFinite(dampening, "dampening");
        requireFinite(weight_decay, "weight_decay");
        if (nesterov && (momentum <= 0 || dampening != 0))
          fail(Status::InvalidArgument,
               "nesterov momentum requires a momentum and zero dampening");
      },
      [=](double lrFactor, int64_t t) {
        return sgdScalars(SgdOptions{lr * lrFactor, momentum, dampening,
                                     weight_decay, nesterov != 0},
                          t);
      },
      &Backend::sgdStep);
}

static int32_t adamwUpdate(const char *fn, const UpdateOperands &u, double lr,
                           double beta1, double beta2, double eps,
                           double weight_decay, int32_t l2) {
  return update<AdamWScalars>(
      fn, "adamw_step", u, {"exp_avg", "exp_avg_sq"}, true,
      [&] {
        requireFinite(lr, "lr"), requireFinite(eps, "eps");
        requireFinite(weight_decay, "weight_decay");
        requireBetas(beta1, beta2);
      },
      [=](double lrFactor, int64_t t) {
        return adamwScalars(AdamWOptions{lr * lrFactor, beta1, beta2, eps,
                                         weight_decay, l2 != 0},
                            t);
      },
      &Backend::adamwStep);
}

static int32_t lionUpdate(const char *fn, const UpdateOperands &u, double lr,
                          double beta1, double beta2, double weight_decay) {
  return update<LionScalars>(
      fn, "lion_step", u, {"exp_avg"}, true,
      [&] {
        requireFinite(lr, "lr"), requireFinite(weight_decay, "weight_decay");
        requireBetas(beta1, beta2);
      },
      [=](double lrFactor, int64_t) {
        return lionScalars(
            LionOptions{lr * lrFactor, beta1, beta2, weight_decay});
      },
      &Backend::lionStep);
}

extern "C" {

int32_t fsdprt_sgd_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                        int64_t param, int64_t param_off, int64_t grad,
                        int64_t grad_off, int64_t momentum_buf, int64_t mb_off,
                        int64_t numel, int64_t step, double lr, double momentum,
                        double dampening, double weight_decay,
                        int32_t nesterov, int64_t skip, int64_t skip_off) {
  const int64_t buffers[] = {param, grad, momentum_buf},
                offsets[] = {param_off, grad_off, mb_off};
  return sgdUpdate(__func__,
                   {ctx, stream, grad_dtype, 1, buffers, offsets, &numel, step,
                    skip, skip_off},
                   lr, momentum, dampening, weight_decay, nesterov);
}

int32_t fsdprt_sgd_multi_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                              int64_t count, const int64_t *buffers,
                              const int64_t *offsets, const int64_t *numels,
                              int64_t step, double lr, double momentum,
                              double dampening, double weight_decay,
                              int32_t nesterov, int64_t skip,
                              int64_t skip_off) {
  return sgdUpdate(__func__,
                   {ctx, stream, grad_dtype, count, buffers, offsets, numels,
                    step, skip, skip_off},
                   lr, momentum, dampening, weight_decay, nesterov);
}

int32_t fsdprt_adamw_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                          int64_t param, int64_t param_off, int64_t grad,
                          int64_t grad_off, int64_t exp_avg, int64_t ea_off,
                          int64_t exp_avg_sq, int64_t eas_off, int64_t numel,
                          int64_t step, double lr, double beta1, double beta2,
                          double eps, double weight_decay, int32_t l2,
                          int64_t skip, int64_t skip_off) {
  const int64_t buffers[] = {param, grad, exp_avg, exp_avg_sq},
                offsets[] = {param_off, grad_off, ea_off, eas_off};
  return adamwUpdate(__func__,
                     {ctx, stream, grad_dtype, 1, buffers, offsets, &numel,
                      step, skip, skip_off},
                     lr, beta1, beta2, eps, weight_decay, l2);
}

int32_t fsdprt_adamw_multi_step(int64_t ctx, int64_t stream,
                                int32_t grad_dtype, int64_t count,
                                const int64_t *buffers, const int64_t *offsets,
                                const int64_t *numels, int64_t step, double lr,
                                double beta1, double beta2, double eps,
                                double weight_decay, int32_t l2, int64_t skip,
                                int64_t skip_off) {
  return adamwUpdate(__func__,
                     {ctx, stream, grad_dtype, count, buffers, offsets, numels,
                      step, skip, skip_off},
                     lr, beta1, beta2, eps, weight_decay, l2);
}

int32_t fsdprt_lion_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                         int64_t param, int64_t param_off, int64_t grad,
                         int64_t grad_off, int64_t exp_avg, int64_t ea_off,
                         int64_t numel, int64_t step, double lr, double beta1,
                         double beta2, double weight_decay, int64_t skip,
                         int64_t skip_off) {
  const int64_t buffers[] = {param, grad, exp_avg},
                offsets[] = {param_off, grad_off, ea_off};
  return lionUpdate(__func__,
                    {ctx, stream, grad_dtype, 1, buffers, offsets, &numel,
                     step, skip, skip_off},
                    lr, beta1, beta2, weight_decay);
}

int32_t fsdprt_lion_multi_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                               int64_t count, const int64_t *buffers,
                               const int64_t *offsets, const int64_t *numels,
                               int64_t step, double lr, double beta1,
                               double beta2, double weight_decay, int64_t skip,
                               int64_t skip_off) {
  return lionUpdate(__func__,
                    {ctx, stream, grad_dtype, count, buffers, offsets, numels,
                     step, skip, skip_off},
                    lr, beta1, beta2, weight_decay);
}

int32_t fsdprt_adafactor_stats(int64_t ctx, int64_t stream, int32_t grad_dtype,
                               int64_t param, int64_t param_off, int64_t grad,
                               int64_t grad_off, int64_t numel,
                               int64_t flat_begin, int64_t layout_count,
                               const int64_t *layout, int64_t stats,
                               int64_t stats_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, grad_dtype, "adafactor_stats");
    nonNegative(numel, "numel"), nonNegative(flat_begin, "flat_begin");
    AdafactorLayout lay = adafactorLayout(layout, layout_count);
    const auto *pp = static_cast<const float *>(
        l.operand(param, param_off, numel, DType::F32, "param"));
    const void *pg = l.operand(grad, grad_off, numel, "grad");
    auto *ps = static_cast<float *>(
        l.operand(stats, stats_off, lay.statsSize(), DType::F32, "stats"));
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.adafactorStats(dt, pp, pg, numel, flat_begin, lay, ps);
    });
  });
}

int32_t fsdprt_adafactor_factor(
    int64_t ctx, int64_t stream, int32_t grad_dtype, int64_t grad,
    int64_t grad_off, int64_t numel, int64_t flat_begin, int64_t layout_count,
    const int64_t *layout, int64_t state, int64_t state_off, int64_t stats,
    int64_t stats_off, int64_t update_sq, int64_t usq_off, int64_t step,
    double beta2_decay, double eps1, int64_t skip, int64_t skip_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, grad_dtype, "adafactor_factor");
    nonNegative(numel, "numel"), nonNegative(flat_begin, "flat_begin");
    requireStep(step);
    requireAdafactor(beta2_decay, eps1, 0.0, 1.0);
    AdafactorLayout lay = adafactorLayout(layout, layout_count);
    const void *pg = l.operand(grad, grad_off, numel, "grad");
    auto *pstate = static_cast<float *>(
        l.operand(state, state_off, lay.stateSize, DType::F32, "state"));
    const auto *pstats = static_cast<const float *>(
        l.operand(stats, stats_off, lay.statsSize(), DType::F32, "stats"));
    auto *pu = static_cast<float *>(
        l.operand(update_sq, usq_off, static_cast<int64_t>(lay.params.size()),
                  DType::F32, "update_sq"));
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto scalars = [=](int64_t t) {
      return adafactorFactorScalars(beta2_decay, eps1, t);
    };
    AdafactorFactorScalars sc = scalars(step);
    const AdafactorFactorScalars *live =
        l.live<AdafactorFactorScalars>([=](const StepValues &v) {
          return scalars(step + v.stepsSinceCapture);
        });
    const float *ps = skipFlag(l, skip, skip_off);
    l.enqueue([=, &be] {
      be.adafactorFactor(dt, pg, numel, flat_begin, lay, pstate, pstats, pu, sc,
                         live, ps);
    });
  });
}

int32_t fsdprt_adafactor_apply(
    int64_t ctx, int64_t stream, int32_t grad_dtype, int64_t param,
    int64_t param_off, int64_t grad, int64_t grad_off, int64_t numel,
    int64_t flat_begin, int64_t layout_count, const int64_t *layout,
    int64_t state, int64_t state_off, int64_t stats, int64_t stats_off,
    int64_t update_sq, int64_t usq_off, int64_t step, double lr, double eps1,
    double eps2, double d, double weight_decay, int64_t skip,
    int64_t skip_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, grad_dtype, "adafactor_apply");
    nonNegative(numel, "numel"), nonNegative(flat_begin, "flat_begin");
    requireStep(step);
    requireFinite(lr, "lr"), requireFinite(weight_decay, "weight_decay");
    requireAdafactor(0.0, eps1, eps2, d);
    AdafactorLayout lay = adafactorLayout(layout, layout_count);
    auto *pp = static_cast<float *>(
        l.operand(param, param_off, numel, DType::F32, "param"));
    const void *pg = l.operand(grad, grad_off, numel, "grad");
    const auto *pstate = static_cast<const float *>(
        l.operand(state, state_off, lay.stateSize, DType::F32, "state"));
    const auto *pstats = static_cast<const float *>(
        l.operand(stats, stats_off, lay.statsSize(), DType::F32, "stats"));
    const auto *pu = static_cast<const float *>(
        l.operand(update_sq, usq_off, static_cast<int64_t>(lay.params.size()),
                  DType::F32, "update_sq"));
    Backend &be = l.backend();
    const DelayConfig &delays = l.context().delays();
    DType dt = l.dtype();
    auto scalars = [=](double lrFactor, int64_t t) {
      return adafactorApplyScalars(
          AdafactorOptions{lr * lrFactor, eps1, eps2, d, weight_decay}, t);
    };
    AdafactorApplyScalars sc = scalars(l.context().lrFactor(), step);
    const AdafactorApplyScalars *live =
        l.live<AdafactorApplyScalars>([=](const StepValues &v) {
          return scalars(v.lrFactor, step + v.stepsSinceCapture);
        });
    const float *ps = skipFlag(l, skip, skip_off);
    l.enqueue([=, &be, &delays] {
      delays.apply(DelayPoint::Optimizer);
      be.adafactorApply(dt, pp, pg, numel, flat_begin, lay, pstate, pstats, pu,
                        sc, live, ps);
    });
  });
}

int32_t fsdprt_grad_sq_norm(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t grad, int64_t grad_off, int64_t numel,
                            int64_t out, int64_t out_off, int32_t accumulate) {
  return reduceGrad(__func__, "grad_sq_norm", &Backend::gradSqNorm, ctx,
                    stream, dtype, grad, grad_off, numel, out, out_off,
                    accumulate);
}

int32_t fsdprt_nonfinite_flag(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t grad, int64_t grad_off, int64_t numel,
                              int64_t out, int64_t out_off,
                              int32_t accumulate) {
  return reduceGrad(__func__, "nonfinite_flag", &Backend::nonfiniteFlag, ctx,
                    stream, dtype, grad, grad_off, numel, out, out_off,
                    accumulate);
}

int32_t fsdprt_max_abs(int64_t ctx, int64_t stream, int32_t dtype,
                       int64_t grad, int64_t grad_off, int64_t numel,
                       int64_t out, int64_t out_off, int32_t accumulate) {
  return reduceGrad(__func__, "max_abs", &Backend::maxAbs, ctx, stream, dtype,
                    grad, grad_off, numel, out, out_off, accumulate);
}

int32_t fsdprt_loss_scale(int64_t ctx, int64_t stream, int64_t out,
                          int64_t out_off, int32_t inverse) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "loss_scale");
    void *po = l.operand(out, out_off, 1, DType::F32, "out");
    double scale = l.context().lossScale();
    double value = inverse ? 1.0 / scale : scale;
    Backend &be = l.backend();
    // fill's f32 rounding of the value, refreshed at each graph launch.
    const float *live = l.live<float>([inverse](const StepValues &v) {
      return static_cast<float>(inverse ? 1.0 / v.lossScale : v.lossScale);
    });
    if (live)
      return l.enqueue([&be, po, live] {
        be.copy(po, live, 4, CopyKind::DeviceToDevice);
      });
    l.enqueue([&be, po, value] { be.fill(DType::F32, po, 1, value); });
  });
}

int32_t fsdprt_clip_grad(int64_t ctx, int64_t stream, int32_t dtype,
                         int64_t grad, int64_t grad_off, int64_t numel,
                         int64_t total_sq, int64_t total_sq_off,
                         double max_norm) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "clip_grad");
    nonNegative(numel, "numel");
    if (!(max_norm > 0) || !std::isfinite(max_norm))
      fail(Status::InvalidArgument, "max_norm must be positive and finite");
    void *pg = l.operand(grad, grad_off, numel, "grad");
    auto *ps = static_cast<const float *>(
        l.operand(total_sq, total_sq_off, 1, DType::F32, "total_sq"));
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.clipGrad(dt, pg, numel, ps, max_norm); });
  });
}

int32_t fsdprt_clip_coefficient(int64_t ctx, int64_t stream, int64_t total,
                                int64_t total_off, int64_t norm,
                                int64_t norm_off, int64_t coef,
                                int64_t coef_off, double max_norm,
                                double norm_type) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "clip_coefficient");
    if (!(max_norm > 0) || !std::isfinite(max_norm))
      fail(Status::InvalidArgument, "max_norm must be positive and finite");
    if (!(norm_type > 0))
      fail(Status::InvalidArgument, "norm_type must be > 0 or inf, got ",
           norm_type);
    auto *ps = static_cast<const float *>(
        l.operand(total, total_off, 1, DType::F32, "total"));
    auto *pn = static_cast<float *>(l.operand(norm, norm_off, 1, DType::F32, "norm"));
    auto *pc = static_cast<float *>(l.operand(coef, coef_off, 1, DType::F32, "coef"));
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.clipCoefficient(ps, pn, pc, max_norm, norm_type); });
  });
}

} // extern "C"
