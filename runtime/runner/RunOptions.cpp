//===- RunOptions.cpp - The command line of fsdp-run and fsdprt-run -------===//
//
// Hand-written rather than a library: the runner must build on training
// hosts with nothing but CUDA (no LLVM, no CLI package), and the grammar is
// the small subset of llvm::cl that fsdp-run always accepted.
//
//===----------------------------------------------------------------------===//
#include "runner/RunOptions.h"

#include "fsdp/rt/LrSchedule.h"

#include "fsdp/rt/backend/Backend.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <sstream>

namespace fsdp {
namespace driver {
namespace {

struct OptionSpec {
  const char *name;
  const char *value; // nullptr: a flag
  const char *help;
  std::function<void(RunOptions &, const std::string &)> set;
};

template <typename T>
T parseInteger(const std::string &name, const std::string &text) {
  T value{};
  const char *end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end)
    throw UsageError("--" + name + " expects an integer, got '" + text + "'");
  return value;
}

double parseNumber(const std::string &name, const std::string &text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw UsageError("--" + name + " expects a number, got '" + text + "'");
  return value;
}

bool parseBool(const std::string &name, const std::string &text) {
  if (text == "true" || text == "1")
    return true;
  if (text == "false" || text == "0")
    return false;
  throw UsageError("--" + name + " expects true or false, got '" + text + "'");
}

const std::vector<OptionSpec> &optionSpecs() {
  using O = RunOptions;
  using S = const std::string &;
  static const std::vector<OptionSpec> specs = {
      {"nproc", "N", "Launch this many local ranks",
       [](O &o, S v) { o.nproc = parseInteger<int>("nproc", v); }},
      {"steps", "N", "Train until this many optimizer steps were taken",
       [](O &o, S v) { o.steps = parseInteger<int64_t>("steps", v); }},
      {"batch-size", "N", "Global batch size (must match the compiled program)",
       [](O &o, S v) { o.batchSize = parseInteger<int64_t>("batch-size", v); }},
      {"micro-batches", "N",
       "Micro-batches per step (must match the compiled program)",
       [](O &o, S v) {
         o.microBatches = parseInteger<int64_t>("micro-batches", v);
       }},
      {"data", "SOURCE",
       "synthetic, a token file (.bin uint16, .u32 uint32), a text file read "
       "as bytes, or a .safetensors tensor dataset (input.<i>: [N, ...] per "
       "model input)",
       [](O &o, S v) { o.data = v; }},
      {"seed", "N", "Seed of initialisation and data",
       [](O &o, S v) { o.seed = parseInteger<uint64_t>("seed", v); }},
      {"load", "CKPT",
       "Start from a checkpoint (a full file or a sharded directory)",
       [](O &o, S v) { o.load = v; }},
      {"resume", "latest",
       "Start from the newest complete checkpoint in --save's directory, or "
       "from scratch if it has none (a restart under torchrun --max-restarts "
       "continues where the group stopped)",
       [](O &o, S v) {
         if (v != "latest")
           throw UsageError("--resume takes 'latest', got '" + v + "'");
         o.resume = v;
       }},
      {"save", "DIR", "Directory for checkpoints",
       [](O &o, S v) { o.save = v; }},
      {"save-every", "K", "Also save every K steps",
       [](O &o, S v) { o.saveEvery = parseInteger<int64_t>("save-every", v); }},
      {"save-format", "FORMAT", "full or sharded",
       [](O &o, S v) { o.saveFormat = v; }},
      {"metrics", "FILE", "Write per-step JSON lines here",
       [](O &o, S v) { o.metrics = v; }},
      {"trace", "FILE", "Write a Chrome/Perfetto trace",
       [](O &o, S v) { o.trace = v; }},
      {"trace-steps", "N", "Steps recorded by --trace (default 5)",
       [](O &o, S v) {
         o.traceSteps = parseInteger<int64_t>("trace-steps", v);
       }},
      {"trace-skip", "N",
       "Steps run before --trace starts recording, leaving out first-step "
       "work such as building cuDNN graphs (default 0)",
       [](O &o, S v) { o.traceSkip = parseInteger<int64_t>("trace-skip", v); }},
      {"lr-schedule", "KIND",
       "constant, cosine or linear (default: the program's, compiled with "
       "fsdp-pipeline's lr-schedule)",
       [](O &o, S v) { o.lrSchedule = v; }},
      {"warmup-steps", "N", "Linear warmup of the learning rate over N steps",
       [](O &o, S v) {
         o.warmupSteps = parseInteger<int64_t>("warmup-steps", v);
       }},
      {"decay-steps", "N",
       "Steps of the decay after the warmup (0: to the last step)",
       [](O &o, S v) {
         o.decaySteps = parseInteger<int64_t>("decay-steps", v);
       }},
      {"min-lr-ratio", "R", "The decay's floor, a fraction of the peak lr",
       [](O &o, S v) { o.minLrRatio = parseNumber("min-lr-ratio", v); }},
      {"loss-scale-init", "S",
       "Initial dynamic loss scale (programs compiled with loss-scale="
       "dynamic; default 65536)",
       [](O &o, S v) { o.lossScaleInit = parseNumber("loss-scale-init", v); }},
      {"loss-scale-growth-interval", "N",
       "Good steps before the loss scale doubles (default 2000)",
       [](O &o, S v) {
         o.lossScaleGrowthInterval =
             parseInteger<int64_t>("loss-scale-growth-interval", v);
       }},
      {"eval-program", "EVAL",
       "An eval program (mode=eval) of the same model and mesh, run beside "
       "training on the same sharded weights",
       [](O &o, S v) { o.evalProgram = v; }},
      {"eval-every", "K", "Evaluate after every K steps and the last one",
       [](O &o, S v) { o.evalEvery = parseInteger<int64_t>("eval-every", v); }},
      {"eval-data", "SOURCE", "The evaluation's data (as --data)",
       [](O &o, S v) { o.evalData = v; }},
      {"eval-batches", "N",
       "Batches per evaluation, from the data's start "
       "(default 10)",
       [](O &o, S v) {
         o.evalBatches = parseInteger<int64_t>("eval-batches", v);
       }},
      {"generate", "N",
       "Sample N new tokens with an eval program returning \"logits\" "
       "(causal LMs; recomputes the last T tokens, no KV cache)",
       [](O &o, S v) { o.generate = parseInteger<int64_t>("generate", v); }},
      {"prompt", "TEXT", "Generation's prompt as bytes (byte-level models)",
       [](O &o, S v) { o.prompt = v; }},
      {"prompt-ids", "I,J,..", "Generation's prompt as token ids",
       [](O &o, S v) { o.promptIds = v; }},
      {"temperature", "T", "Sampling temperature (default 1; 0: greedy)",
       [](O &o, S v) { o.temperature = parseNumber("temperature", v); }},
      {"top-k", "K", "Sample among the K most likely tokens (0: all)",
       [](O &o, S v) { o.topK = parseInteger<int64_t>("top-k", v); }},
      {"num-samples", "S", "Independent samples of the prompt (default 1)",
       [](O &o, S v) {
         o.numSamples = parseInteger<int64_t>("num-samples", v);
       }},
      {"backend", "NAME", "cpu or cuda", [](O &o, S v) { o.backend = v; }},
      {"cuda-graphs", "on|off",
       "On the cuda backend, capture the training step as one CUDA graph at "
       "its second step and replay it from then on (default on; every rank "
       "agrees; not with --trace or CPU offload)",
       [](O &o, S v) {
         if (v != "on" && v != "off")
           throw UsageError("--cuda-graphs expects on or off, got '" + v + "'");
         o.cudaGraphs = v == "on";
       }},
      {"allow-tf32", nullptr,
       "On the cuda backend, let f32 GEMMs and cuDNN convolutions round "
       "their inputs to TF32, as torch.backends.cuda.matmul.allow_tf32 and "
       "torch.backends.cudnn.allow_tf32 (default off)",
       [](O &o, S v) { o.allowTf32 = parseBool("allow-tf32", v); }},
      {"rank-threads", "N", "Compute threads per rank (0: cores / local ranks)",
       [](O &o, S v) { o.threads = parseInteger<int>("rank-threads", v); }},
      {"quiet", nullptr, "Print errors only",
       [](O &o, S v) { o.quiet = parseBool("quiet", v); }},
      {"help", nullptr, "Print this list",
       [](O &o, S v) { o.help = parseBool("help", v); }},
  };
  return specs;
}

const OptionSpec *findSpec(const std::string &name) {
  for (const OptionSpec &spec : optionSpecs())
    if (name == spec.name)
      return &spec;
  return nullptr;
}

/// "--name", "--name=value", "-name" → name and value ("" if none).
bool splitOption(const std::string &arg, std::string &name, std::string &value,
                 bool &hasValue) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--")
    return false;
  std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
  size_t eq = body.find('=');
  hasValue = eq != std::string::npos;
  name = body.substr(0, eq);
  value = hasValue ? body.substr(eq + 1) : "";
  return true;
}

} // namespace

RunOptions parseRunOptions(const std::vector<std::string> &args) {
  RunOptions o;
  bool haveInput = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name, value;
    bool hasValue = false;
    if (!splitOption(args[i], name, value, hasValue)) {
      if (haveInput)
        throw UsageError("more than one input: '" + o.input + "' and '" +
                         args[i] + "'");
      o.input = args[i];
      haveInput = true;
      continue;
    }
    const OptionSpec *spec = findSpec(name);
    if (!spec)
      throw UsageError("unknown option '" + args[i] + "' (see --help)");
    if (!spec->value && !hasValue)
      value = "true";
    else if (spec->value && !hasValue) {
      if (i + 1 == args.size())
        throw UsageError("--" + name + " expects a value (" + spec->value +
                         ")");
      value = args[++i];
    }
    spec->set(o, value);
  }
  if (!haveInput && !o.help)
    throw UsageError("no input: give a lowered program (.mlir) or a step "
                     "library (.so)");
  std::vector<std::string> backends = rt::registeredBackends();
  if (std::find(backends.begin(), backends.end(), o.backend) ==
      backends.end()) {
    std::string known;
    for (const std::string &name : backends)
      known += (known.empty() ? "" : ", ") + name;
    throw UsageError("--backend must be one this runtime was built with (" +
                     known + "), not '" + o.backend + "'");
  }
  if (o.nproc < 0)
    throw UsageError("--nproc must be positive");
  if (!o.resume.empty() && o.save.empty())
    throw UsageError("--resume latest looks in --save's directory: give "
                     "--save DIR");
  if (!o.resume.empty() && !o.load.empty())
    throw UsageError("give --load CKPT or --resume latest, not both");
  // The fields given, checked as the schedule checks them (the program's
  // own fields are checked when it is read).
  rt::LrSchedule given;
  given.kind = o.lrSchedule.value_or(given.kind);
  given.warmupSteps = o.warmupSteps.value_or(0);
  given.decaySteps = o.decaySteps.value_or(0);
  given.minLrRatio = o.minLrRatio.value_or(0.0);
  if (std::string why = given.invalidBecause(); !why.empty())
    throw UsageError("--" + why);
  if (o.lossScaleInit &&
      !(std::isfinite(*o.lossScaleInit) && *o.lossScaleInit > 0))
    throw UsageError("--loss-scale-init must be finite and > 0");
  if (o.evalEvery < 0 || o.evalBatches < 1)
    throw UsageError("--eval-every must be >= 0 and --eval-batches >= 1");
  bool anyEval =
      !o.evalProgram.empty() || o.evalEvery > 0 || !o.evalData.empty();
  if (anyEval &&
      (o.evalProgram.empty() || o.evalEvery == 0 || o.evalData.empty()))
    throw UsageError("evaluating while training needs --eval-program EVAL, "
                     "--eval-every K and --eval-data SOURCE together");
  if (!o.evalProgram.empty() && o.generate)
    throw UsageError("--eval-program is for training runs, not --generate");
  if (o.generate < 0 || o.numSamples < 1)
    throw UsageError("--generate must be >= 0 and --num-samples >= 1");
  if (o.prompt && o.promptIds)
    throw UsageError("give the prompt as --prompt or --prompt-ids, not both");
  if (!o.generate && (o.prompt || o.promptIds))
    throw UsageError("--prompt and --prompt-ids need --generate N");
  if (!(std::isfinite(o.temperature) && o.temperature >= 0))
    throw UsageError("--temperature must be finite and >= 0");
  if (o.topK < 0)
    throw UsageError("--top-k must be >= 0");
  if (o.lossScaleGrowthInterval.value_or(1) < 1)
    throw UsageError("--loss-scale-growth-interval must be >= 1");
  return o;
}

std::string runOptionsHelp(const std::string &tool) {
  std::ostringstream out;
  out << "USAGE: " << tool << " [options] <program>\n\n"
      << "<program>: a lowered module (.mlir, fsdp-run only) or a step "
         "library made by fsdp-compile (.so)\n\nOPTIONS:\n";
  for (const OptionSpec &spec : optionSpecs()) {
    std::string left = std::string("  --") + spec.name;
    if (spec.value)
      left += std::string(" ") + spec.value;
    out << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ')
        << spec.help << "\n";
  }
  return out.str();
}

std::vector<std::string> withoutNproc(const std::vector<std::string> &args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--nproc" || a == "-nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("-nproc=", 0) == 0)
      continue;
    out.push_back(a);
  }
  return out;
}

} // namespace driver
} // namespace fsdp
