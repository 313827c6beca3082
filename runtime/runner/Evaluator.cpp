//===- Evaluator.cpp - An eval program beside the training program --------===//

#include "runner/Evaluator.h"

#include "runner/Generate.h"
#include "runner/UnitGather.h"

#include "fsdp/rt/fsdprt.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fsdp {
namespace driver {
namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error("--eval-program: " + why);
}

bool sameParams(const UnitInfo &a, const UnitInfo &b) {
  if (a.params.size() != b.params.size())
    return false;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].name != b.params[i].name ||
        a.params[i].shape != b.params[i].shape ||
        a.params[i].flatOffset != b.params[i].flatOffset)
      return false;
  return true;
}

/// `eval`'s program once it is known to evaluate `train`'s model.
const Program &checkedEvalProgram(const Program &train, StepProgram &program) {
  const Program &eval = program.program();
  if (train.mode == "eval")
    fail("the program to train is an eval program (mode=eval); give the "
         "training program first and the eval program to --eval-program");
  if (eval.mode != "eval")
    fail("it is a training program; compile the model with mode=eval");
  if (eval.lossDtype != "f32")
    fail("its loss is " + eval.lossDtype + "; f32 is read");
  if (eval.model != train.model)
    fail("it evaluates model '" + eval.model + "', the run trains '" +
         train.model + "'");
  // Whole weights (a shard group of one) read any training layout.
  bool whole = eval.shard == 1 && eval.replicate == train.worldSize;
  if (eval.worldSize != train.worldSize ||
      (!whole &&
       (eval.replicate != train.replicate || eval.shard != train.shard)))
    fail("it was compiled for a mesh of " + std::to_string(eval.replicate) +
         " x " + std::to_string(eval.shard) + " ranks, the training program " +
         "for " + std::to_string(train.replicate) + " x " +
         std::to_string(train.shard));
  return eval;
}

} // namespace

Evaluator::Evaluator(const RunOptions &o, const Program &train,
                     StepProgram &eval)
    : train_(train), eval_(checkedEvalProgram(train, eval)),
      step_(eval.step()),
      data_(o.evalData, eval_, o.seed),
      base_(arenaAligned(train.persistentBytes)),
      batches_(o.evalBatches), seed_(o.seed) {
  for (const UnitInfo &u : eval_.units) {
    const UnitInfo *match = nullptr;
    bool gather = false;
    for (const UnitInfo &t : train.units) {
      if (t.name != u.name || t.dtype != u.dtype ||
          t.rankLocal != u.rankLocal || !sameParams(t, u))
        continue;
      bool wholeHere = !u.rankLocal && u.shardNumel == u.paddedNumel &&
                       t.shardNumel < t.paddedNumel &&
                       t.flatNumel == u.flatNumel;
      if (t.shardNumel == u.shardNumel || wholeHere) {
        match = &t;
        gather = wholeHere;
      }
    }
    if (gather) {
      gathers_.push_back({match, u.offset});
      continue;
    }
    if (!match)
      fail("unit '" + u.name +
           "' is laid out differently in the two "
           "programs (a training unit keeps its frozen parameters in a flat "
           "parameter of their own); evaluate a checkpoint instead: fsdp-run "
           "EVAL --load CKPT --data VAL");
    copies_.push_back(
        {match->offset, u.offset, u.shardNumel * dtypeBytes(u.dtype)});
  }
  for (const BufferInfo &b : eval_.buffers) {
    const BufferInfo *match = nullptr;
    for (const BufferInfo &t : train.buffers)
      if (t.name == b.name && t.shape == b.shape && t.dtype == b.dtype)
        match = &t;
    if (!match)
      fail("buffer '" + b.name + "' differs between the two programs");
    copies_.push_back({match->offset, b.offset, tensorBytes(b.shape, b.dtype)});
  }
}

double Evaluator::evaluate(RankRuntime &rt, int rank, int worldSize) {
  return run(rt, rank, batches_,
             [&](int64_t b, std::vector<std::vector<uint8_t>> &inputs) {
               data_.fill(b, rank, worldSize, inputs);
             });
}

double Evaluator::evaluateOn(RankRuntime &rt, int rank,
                             const std::vector<std::vector<uint8_t>> &batch) {
  if (batch.size() != eval_.inputs.size())
    throw std::runtime_error("the eval program takes " +
                             std::to_string(eval_.inputs.size()) +
                             " input arrays, not " +
                             std::to_string(batch.size()));
  return run(rt, rank, 1,
             [&](int64_t, std::vector<std::vector<uint8_t>> &inputs) {
               inputs = batch;
             });
}

std::vector<const UnitInfo *> Evaluator::gatheredUnits() const {
  std::vector<const UnitInfo *> units;
  for (const Gather &g : gathers_)
    units.push_back(g.train);
  return units;
}

int64_t Evaluator::arenaBytes() const {
  return base_ + eval_.arenaBytes +
         UnitGatherer::scratchBytes(train_, gatheredUnits());
}

void Evaluator::withWeights(RankRuntime &rt,
                            const std::function<void(StateBuffers &)> &body) {
  int64_t s = rt.streams[0];
  StateBuffers bufs;
  check(fsdprt_context_set_arena_base(rt.ctx, base_), "placing the eval");
  check(fsdprt_buffer_alloc_at(rt.ctx, 0, eval_.persistentBytes,
                               &bufs.persistent),
        "allocating the eval program's persistent buffer");
  if (eval_.cpuOffload)
    check(fsdprt_buffer_alloc_host(rt.ctx, eval_.hostBytes, &bufs.host),
          "allocating the eval program's host buffer");
  for (const Copy &c : copies_) {
    BufferRef from = locate(train_, rt.buffers(), c.from);
    BufferRef to = locate(eval_, bufs, c.to);
    check(fsdprt_copy(rt.ctx, s, to.buffer, to.offset, from.buffer,
                      from.offset, c.bytes),
          "copying the weights to the eval program");
  }
  {
    UnitGatherer gatherer(train_, rt.ctx, s, rt.buffers(), rt.shard,
                          gatheredUnits(), "eval");
    for (const Gather &g : gathers_) {
      const UnitInfo &t = *g.train;
      BufferRef whole = gatherer.gather(t, t.offset);
      BufferRef to = locate(eval_, bufs, g.to);
      check(fsdprt_copy(rt.ctx, s, to.buffer, to.offset, whole.buffer,
                        whole.offset, t.flatNumel * dtypeBytes(t.dtype)),
            "copying the gathered unit '" + t.name + "' into place");
    }
  }
  // The step's first reads of its flat parameters are on the all-gather
  // stream: the weights must be in place before it starts.
  check(fsdprt_stream_synchronize(rt.ctx, s), "copying the weights");
  body(bufs);
  check(fsdprt_buffer_free(rt.ctx, s, bufs.persistent),
        "freeing the eval buffer");
  if (bufs.host)
    check(fsdprt_buffer_free(rt.ctx, s, bufs.host), "freeing the eval buffer");
  check(fsdprt_context_synchronize(rt.ctx), "evaluating");
  check(fsdprt_context_set_arena_base(rt.ctx, 0), "placing the eval");
  // The training steps' peak is measured without the evaluation's.
  check(fsdprt_arena_reset_high_water(rt.ctx), "restarting the peak");
}

double Evaluator::run(RankRuntime &rt, int rank, int64_t batches,
                      const BatchFill &fill) {
  int64_t s = rt.streams[0];
  float mean = 0;
  withWeights(rt, [&](StateBuffers &bufs) {
    std::vector<std::vector<uint8_t>> inputs;
    float sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      fill(b, inputs);
      for (size_t i = 0; i < inputs.size(); ++i)
        check(fsdprt_copy_from_host(rt.ctx, s, bufs.persistent,
                                    eval_.inputs[i].offset, inputs[i].data(),
                                    int64_t(inputs[i].size())),
              "copying eval inputs");
      rt.runStep(step_, bufs, 0, seed_, rank);
      float loss = 0;
      check(fsdprt_copy_to_host(rt.ctx, s, &loss, bufs.persistent,
                                eval_.lossOffset, 4),
            "reading the eval loss");
      check(fsdprt_stream_synchronize(rt.ctx, s), "reading the eval loss");
      sum += loss;
    }
    // Equal rows on every rank: the mean over ranks is the global mean.
    mean = sum / float(batches);
    int64_t scratch = 0;
    check(fsdprt_buffer_alloc(rt.ctx, 4, &scratch), "allocating scratch");
    check(fsdprt_copy_from_host(rt.ctx, s, scratch, 0, &mean, 4), "eval loss");
    check(fsdprt_all_reduce(rt.ctx, s, rt.world, FSDPRT_F32, FSDPRT_COMM_AVG,
                            scratch, 0, scratch, 0, 1),
          "averaging the eval loss");
    check(fsdprt_copy_to_host(rt.ctx, s, &mean, scratch, 0, 4), "eval loss");
    check(fsdprt_buffer_free(rt.ctx, s, scratch), "freeing scratch");
  });
  return mean;
}

std::vector<std::vector<int64_t>>
Evaluator::generate(RankRuntime &rt, int rank,
                    const std::vector<int64_t> &prompt, int64_t numSamples,
                    int64_t newTokens, const SamplingOptions &sampling) {
  LanguageModelShape lm = languageModelShape(eval_);
  if (numSamples < 1 || numSamples > lm.rows)
    throw std::runtime_error("generate: " + std::to_string(numSamples) +
                             " samples; the eval program takes 1 to " +
                             std::to_string(lm.rows) + " per rank");
  if (prompt.empty())
    throw std::runtime_error("generate: the prompt is empty");
  for (int64_t id : prompt)
    if (id < 0 || id >= lm.vocab)
      throw std::runtime_error("generate: token id " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(lm.vocab) + ")");
  std::vector<std::vector<int64_t>> contexts;
  withWeights(rt, [&](StateBuffers &bufs) {
    contexts = generateTokens(rt, step_, bufs, eval_, prompt, numSamples,
                              newTokens, sampling, seed_, rank);
  });
  return contexts;
}

} // namespace driver
} // namespace fsdp
