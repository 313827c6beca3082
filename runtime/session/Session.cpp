//===- Session.cpp - One rank's training, driven in process ---------------===//
//
// fsdp_session.h's functions over a Trainer (runner/Trainer.h). The
// options are fsdprt-run's, minus what belongs to its own loop (--nproc:
// a session is one rank, launch processes with torchrun; --save-every and
// --trace: the caller's loop decides; --generate: generate() does it),
// plus --eval-program alone (the caller gives the eval batches).
//
//===----------------------------------------------------------------------===//
#include "fsdp_session.h"

#include "runner/Checkpoint.h"
#include "runner/Data.h"
#include "runner/Metrics.h"
#include "runner/RunOptions.h"
#include "runner/StepLibrary.h"
#include "runner/Trainer.h"

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace fsdp::driver;

thread_local std::string lastError;

/// A model input: the program's entries of it, one per micro-batch.
struct ModelInput {
  std::string dtype;
  std::vector<int64_t> shape;     // this rank's: rows of every micro-batch
  std::vector<size_t> entries;    // indices into program.inputs, by micro-batch
  int64_t entryBytes = 0;
};

struct Session {
  RunOptions options;
  std::unique_ptr<StepProgram> program, evalProgram;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<DataSource> data;
  std::vector<ModelInput> inputs[2]; // the training and the eval program's
  std::string metricsJson;
  std::vector<int64_t> generated;
};

std::mutex sessionsMutex;
std::map<int64_t, std::unique_ptr<Session>> sessions;
int64_t nextHandle = 1;

Session &get(int64_t handle) {
  std::lock_guard<std::mutex> lock(sessionsMutex);
  auto it = sessions.find(handle);
  if (it == sessions.end())
    throw std::runtime_error("no open session " + std::to_string(handle));
  return *it->second;
}

template <typename F> int32_t guarded(F &&f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    lastError = e.what();
  } catch (...) {
    lastError = "unknown error";
  }
  return 1;
}

std::vector<ModelInput> modelInputs(const Program &p) {
  std::map<int64_t, ModelInput> byIndex;
  for (size_t e = 0; e < p.inputs.size(); ++e) {
    const InputInfo &in = p.inputs[e];
    ModelInput &m = byIndex[in.index];
    m.dtype = in.dtype;
    if (m.entries.size() <= size_t(in.microBatch))
      m.entries.resize(in.microBatch + 1);
    m.entries[in.microBatch] = e;
    m.shape = in.shape;
    m.entryBytes = tensorBytes(in.shape, in.dtype);
  }
  std::vector<ModelInput> out;
  for (auto &[index, m] : byIndex) {
    m.shape[0] *= int64_t(m.entries.size());
    out.push_back(std::move(m));
  }
  return out;
}

/// The per-entry byte vectors of a program from one array per model input.
std::vector<std::vector<uint8_t>>
splitInputs(const Program &p, const std::vector<ModelInput> &model,
            const void *const *inputs, const int64_t *bytes, int32_t count) {
  if (size_t(count) != model.size())
    throw std::runtime_error("the model takes " + std::to_string(model.size()) +
                             " inputs, the call was given " +
                             std::to_string(count));
  std::vector<std::vector<uint8_t>> entries(p.inputs.size());
  for (size_t i = 0; i < model.size(); ++i) {
    const ModelInput &m = model[i];
    int64_t want = m.entryBytes * int64_t(m.entries.size());
    if (bytes[i] != want)
      throw std::runtime_error("input " + std::to_string(i) + " has " +
                               std::to_string(bytes[i]) +
                               " bytes, the program takes " +
                               std::to_string(want));
    const auto *base = static_cast<const uint8_t *>(inputs[i]);
    for (size_t k = 0; k < m.entries.size(); ++k)
      entries[m.entries[k]].assign(base + k * m.entryBytes,
                                   base + (k + 1) * m.entryBytes);
  }
  return entries;
}

/// "--eval-program X" (or "=X") taken out of `args`: a session's own option
/// (fsdprt-run wants it with --eval-every and --eval-data).
std::string takeEvalProgram(std::vector<std::string> &args) {
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string flag = "--eval-program";
    if (args[i] == flag && i + 1 < args.size()) {
      path = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      break;
    }
    if (args[i].rfind(flag + "=", 0) == 0) {
      path = args[i].substr(flag.size() + 1);
      args.erase(args.begin() + i);
      break;
    }
  }
  return path;
}

std::unique_ptr<StepProgram> openStepLibrary(const std::string &path) {
  if (!isStepLibraryPath(path))
    throw std::runtime_error("'" + path + "' is not a step library (.so): "
                             "compile it with fsdp-compile");
  return loadStepLibrary(path);
}

void refuse(bool given, const char *option, const char *why) {
  if (given)
    throw std::runtime_error(std::string(option) + " is not a session "
                             "option: " + why);
}

} // namespace

extern "C" {

const char *fsdp_session_last_error(void) { return lastError.c_str(); }

int32_t fsdp_session_open(int32_t argc, const char *const *argv,
                          int64_t *out_session) {
  return guarded([&] {
    std::vector<std::string> args(argv, argv + argc);
    auto s = std::make_unique<Session>();
    std::string evalPath = takeEvalProgram(args);
    s->options = parseRunOptions(args);
    const RunOptions &o = s->options;
    refuse(o.nproc > 0, "--nproc",
           "a session is one rank; start one process per rank (torchrun)");
    refuse(o.saveEvery > 0, "--save-every", "call save() in your loop");
    refuse(!o.trace.empty(), "--trace", "not traced in process yet");
    refuse(o.generate > 0, "--generate", "use fsdprt-run --generate");
    s->program = openStepLibrary(o.input);
    if (!evalPath.empty()) {
      s->evalProgram = openStepLibrary(evalPath);
      s->options.evalData = "synthetic"; // the caller gives the batches
    }
    fsdp::rt::LaunchInfo launch = fsdp::rt::LaunchInfo::fromEnvironment();
    s->options.load = startingCheckpoint(o);
    s->trainer = std::make_unique<Trainer>(s->options, *s->program,
                                           s->evalProgram.get(), launch);
    s->data = std::make_unique<DataSource>(o.data, s->program->program(),
                                           o.seed);
    s->inputs[0] = modelInputs(s->program->program());
    if (s->evalProgram)
      s->inputs[1] = modelInputs(s->trainer->evaluator()->program());
    std::lock_guard<std::mutex> lock(sessionsMutex);
    *out_session = nextHandle++;
    sessions.emplace(*out_session, std::move(s));
  });
}

int32_t fsdp_session_close(int64_t session) {
  return guarded([&] {
    std::unique_ptr<Session> s;
    {
      std::lock_guard<std::mutex> lock(sessionsMutex);
      auto it = sessions.find(session);
      if (it == sessions.end())
        throw std::runtime_error("no open session " + std::to_string(session));
      s = std::move(it->second);
      sessions.erase(it);
    }
  });
}

int32_t fsdp_session_report(int64_t session, const char **out_text) {
  return guarded(
      [&] { *out_text = get(session).program->program().report.c_str(); });
}

static const std::vector<ModelInput> &inputsOf(Session &s, int32_t program) {
  if (program != 0 && program != 1)
    throw std::runtime_error("program " + std::to_string(program) +
                             ": 0 (training) or 1 (eval)");
  if (program == 1 && !s.evalProgram)
    throw std::runtime_error("the session has no eval program");
  return s.inputs[program];
}

int32_t fsdp_session_num_inputs(int64_t session, int32_t program,
                                int32_t *out_count) {
  return guarded([&] {
    *out_count = int32_t(inputsOf(get(session), program).size());
  });
}

int32_t fsdp_session_input(int64_t session, int32_t program, int32_t index,
                           const char **out_dtype, int32_t *out_rank,
                           const int64_t **out_shape) {
  return guarded([&] {
    const std::vector<ModelInput> &inputs = inputsOf(get(session), program);
    if (index < 0 || size_t(index) >= inputs.size())
      throw std::runtime_error("input " + std::to_string(index) +
                               " of a model with " +
                               std::to_string(inputs.size()));
    const ModelInput &m = inputs[index];
    *out_dtype = m.dtype.c_str();
    *out_rank = int32_t(m.shape.size());
    *out_shape = m.shape.data();
  });
}

int32_t fsdp_session_step(int64_t session, const void *const *inputs,
                          const int64_t *bytes, int32_t count,
                          const char **out_metrics_json) {
  return guarded([&] {
    Session &s = get(session);
    StepMetrics m = s.trainer->step(
        splitInputs(s.trainer->program(), s.inputs[0], inputs, bytes, count),
        s.data->tokensPerStep());
    s.metricsJson = metricsJson(m);
    *out_metrics_json = s.metricsJson.c_str();
    s.trainer->stopIfDiverged(m);
  });
}

int32_t fsdp_session_evaluate(int64_t session, const void *const *inputs,
                              const int64_t *bytes, int32_t count,
                              double *out_loss) {
  return guarded([&] {
    Session &s = get(session);
    const std::vector<ModelInput> &model = inputsOf(s, 1);
    *out_loss = s.trainer->evaluate(splitInputs(
        s.trainer->evaluator()->program(), model, inputs, bytes, count));
  });
}

int32_t fsdp_session_generate(int64_t session, const int64_t *prompt,
                              int64_t prompt_len, int64_t new_tokens,
                              int64_t num_samples, double temperature,
                              int64_t top_k, uint64_t seed,
                              const int64_t **out_tokens) {
  return guarded([&] {
    Session &s = get(session);
    if (new_tokens < 0 || top_k < 0 || !(temperature >= 0))
      throw std::runtime_error("generate: new tokens, top_k and the "
                               "temperature must be >= 0");
    std::vector<std::vector<int64_t>> contexts = s.trainer->generate(
        std::vector<int64_t>(prompt, prompt + prompt_len), num_samples,
        new_tokens, SamplingOptions{temperature, top_k, seed});
    s.generated.clear();
    for (const std::vector<int64_t> &ctx : contexts)
      s.generated.insert(s.generated.end(), ctx.begin() + prompt_len,
                         ctx.end());
    *out_tokens = s.generated.data();
  });
}

int32_t fsdp_session_batch(int64_t session, int64_t step,
                           void *const *outputs, const int64_t *bytes,
                           int32_t count) {
  return guarded([&] {
    Session &s = get(session);
    if (size_t(count) != s.inputs[0].size())
      throw std::runtime_error("the model takes " +
                               std::to_string(s.inputs[0].size()) + " inputs");
    const fsdp::rt::LaunchInfo &launch = s.trainer->launch();
    std::vector<std::vector<uint8_t>> entries;
    s.data->fill(step, launch.rank, launch.worldSize, entries);
    for (size_t i = 0; i < s.inputs[0].size(); ++i) {
      const ModelInput &m = s.inputs[0][i];
      if (bytes[i] != m.entryBytes * int64_t(m.entries.size()))
        throw std::runtime_error("output " + std::to_string(i) +
                                 " has the wrong size");
      auto *base = static_cast<uint8_t *>(outputs[i]);
      for (size_t k = 0; k < m.entries.size(); ++k)
        std::copy(entries[m.entries[k]].begin(), entries[m.entries[k]].end(),
                  base + k * m.entryBytes);
    }
  });
}

int32_t fsdp_session_save(int64_t session) {
  return guarded([&] {
    Session &s = get(session);
    if (s.options.save.empty())
      throw std::runtime_error("the session was opened without --save DIR");
    s.trainer->save();
  });
}

int32_t fsdp_session_step_count(int64_t session, int64_t *out_steps) {
  return guarded([&] { *out_steps = get(session).trainer->stepCount(); });
}

int32_t fsdp_session_set_lr(int64_t session, double lr) {
  return guarded([&] {
    Session &s = get(session);
    if (!std::isnan(lr) && !(lr >= 0 && std::isfinite(lr)))
      throw std::runtime_error("a learning rate must be finite and >= 0");
    s.trainer->setLearningRate(std::isnan(lr) ? std::nullopt
                                              : std::optional<double>(lr));
  });
}

} // extern "C"
