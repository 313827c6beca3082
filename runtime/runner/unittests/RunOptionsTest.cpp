//===- RunOptionsTest.cpp - The runners' command line ---------------------===//

#include "runner/RunOptions.h"

#include <gtest/gtest.h>

namespace {

using fsdp::driver::parseRunOptions;
using fsdp::driver::RunOptions;
using fsdp::driver::UsageError;

std::string usageError(const std::vector<std::string> &args) {
  try {
    parseRunOptions(args);
  } catch (const UsageError &e) {
    return e.what();
  }
  return "";
}

TEST(RunOptions, AcceptsSpaceAndEqualsFormsAndOneDash) {
  RunOptions o = parseRunOptions({"step.so", "--steps", "7", "--seed=3",
                                  "-nproc", "2", "--quiet", "--data=a.txt",
                                  "--save-format", "sharded"});
  EXPECT_EQ(o.input, "step.so");
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(o.seed, 3u);
  EXPECT_EQ(o.nproc, 2);
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(o.data, "a.txt");
  EXPECT_EQ(o.saveFormat, "sharded");
}

TEST(RunOptions, DefaultsMatchFsdpRun) {
  RunOptions o = parseRunOptions({"step.mlir"});
  EXPECT_EQ(o.steps, 10);
  EXPECT_EQ(o.data, "synthetic");
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.traceSteps, 5);
  EXPECT_EQ(o.traceSkip, 0);
  EXPECT_EQ(o.saveFormat, "full");
  EXPECT_FALSE(o.quiet);
  EXPECT_TRUE(o.cudaGraphs);
  EXPECT_FALSE(o.allowTf32);
  EXPECT_TRUE(parseRunOptions({"s.so", "--allow-tf32"}).allowTf32);
}

TEST(RunOptions, CudaGraphsTakeOnOrOff) {
  EXPECT_FALSE(parseRunOptions({"s.so", "--cuda-graphs", "off"}).cudaGraphs);
  EXPECT_TRUE(parseRunOptions({"s.so", "--cuda-graphs=on"}).cudaGraphs);
  EXPECT_EQ(usageError({"s.so", "--cuda-graphs", "false"}),
            "--cuda-graphs expects on or off, got 'false'");
}

TEST(RunOptions, FlagsTakeExplicitBooleans) {
  EXPECT_FALSE(parseRunOptions({"s.so", "--quiet=false"}).quiet);
  EXPECT_EQ(usageError({"s.so", "--quiet=maybe"}),
            "--quiet expects true or false, got 'maybe'");
}

TEST(RunOptions, NamesWhatIsWrong) {
  EXPECT_EQ(usageError({"s.so", "--stepz", "3"}),
            "unknown option '--stepz' (see --help)");
  EXPECT_EQ(usageError({"s.so", "--steps", "ten"}),
            "--steps expects an integer, got 'ten'");
  EXPECT_EQ(usageError({"s.so", "--seed", "-1"}),
            "--seed expects an integer, got '-1'");
  EXPECT_EQ(usageError({"s.so", "--steps"}), "--steps expects a value (N)");
  EXPECT_EQ(usageError({"a.so", "b.so"}),
            "more than one input: 'a.so' and 'b.so'");
  EXPECT_EQ(usageError({"--steps", "1"}),
            "no input: give a lowered program (.mlir) or a step library (.so)");
  // The message lists the backends this runtime was built with.
  std::string backend = usageError({"s.so", "--backend", "tpu"});
  EXPECT_EQ(backend.rfind("--backend must be one this runtime was built "
                          "with (cpu",
                          0),
            0u)
      << backend;
  EXPECT_NE(backend.find("), not 'tpu'"), std::string::npos) << backend;
  EXPECT_EQ(usageError({"s.so", "--lr-schedule", "cos"}),
            "--lr-schedule must be constant, cosine or linear, not 'cos'");
  EXPECT_EQ(usageError({"s.so", "--min-lr-ratio", "0.1x"}),
            "--min-lr-ratio expects a number, got '0.1x'");
  EXPECT_EQ(usageError({"s.so", "--min-lr-ratio", "1.5"}),
            "--min-lr-ratio must be in [0, 1], got 1.5");
  EXPECT_EQ(usageError({"s.so", "--warmup-steps", "-2"}),
            "--warmup-steps must be >= 0, got -2");
  EXPECT_EQ(usageError({"s.so", "--loss-scale-init", "0"}),
            "--loss-scale-init must be finite and > 0");
  EXPECT_EQ(usageError({"s.so", "--loss-scale-growth-interval", "0"}),
            "--loss-scale-growth-interval must be >= 1");
}

TEST(RunOptions, ResumeTakesLatestAndNeedsSaveWithoutLoad) {
  EXPECT_EQ(parseRunOptions({"s.so", "--resume", "latest", "--save", "ck"})
                .resume,
            "latest");
  EXPECT_EQ(usageError({"s.so", "--resume", "newest", "--save", "ck"}),
            "--resume takes 'latest', got 'newest'");
  EXPECT_EQ(usageError({"s.so", "--resume", "latest"}),
            "--resume latest looks in --save's directory: give --save DIR");
  EXPECT_EQ(usageError({"s.so", "--resume", "latest", "--save", "ck",
                        "--load", "ck/step-2.safetensors"}),
            "give --load CKPT or --resume latest, not both");
}

TEST(RunOptions, ScheduleFieldsAreSetOnlyWhenGiven) {
  RunOptions plain = parseRunOptions({"s.so"});
  EXPECT_FALSE(plain.lrSchedule || plain.warmupSteps || plain.decaySteps ||
               plain.minLrRatio);
  RunOptions o = parseRunOptions({"s.so", "--lr-schedule=linear",
                                  "--warmup-steps", "100", "--min-lr-ratio",
                                  "0.05"});
  EXPECT_EQ(o.lrSchedule, "linear");
  EXPECT_EQ(o.warmupSteps, 100);
  EXPECT_FALSE(o.decaySteps);
  EXPECT_EQ(o.minLrRatio, 0.05);
}

TEST(RunOptions, HelpNeedsNoInputAndListsEveryOption) {
  EXPECT_TRUE(parseRunOptions({"--help"}).help);
  std::string help = fsdp::driver::runOptionsHelp("fsdprt-run");
  for (const char *name : {"--nproc N", "--steps N", "--batch-size N",
                           "--micro-batches N", "--data SOURCE", "--seed N",
                           "--load CKPT", "--save DIR", "--save-every K",
                           "--save-format FORMAT", "--metrics FILE",
                           "--trace FILE", "--trace-steps N", "--trace-skip N",
                           "--backend NAME", "--cuda-graphs on|off",
                           "--allow-tf32",
                           "--rank-threads N", "--lr-schedule KIND",
                           "--warmup-steps N", "--decay-steps N",
                           "--min-lr-ratio R", "--loss-scale-init S",
                           "--loss-scale-growth-interval N", "--quiet"})
    EXPECT_NE(help.find(name), std::string::npos) << name;
}

TEST(RunOptions, RanksGetTheCommandLineWithoutNproc) {
  EXPECT_EQ(fsdp::driver::withoutNproc(
                {"s.so", "--nproc", "2", "--steps", "3", "--nproc=2"}),
            (std::vector<std::string>{"s.so", "--steps", "3"}));
}

} // namespace

namespace {

TEST(RunOptions, GenerationOptions) {
  RunOptions o = parseRunOptions({"eval.mlir", "--generate", "50", "--prompt",
                                  "ROMEO:", "--temperature", "0.8", "--top-k",
                                  "40", "--num-samples=3"});
  EXPECT_EQ(o.generate, 50);
  EXPECT_EQ(o.prompt.value_or(""), "ROMEO:");
  EXPECT_DOUBLE_EQ(o.temperature, 0.8);
  EXPECT_EQ(o.topK, 40);
  EXPECT_EQ(o.numSamples, 3);
  EXPECT_EQ(usageError({"e.mlir", "--generate", "5", "--prompt", "a",
                        "--prompt-ids", "1"}),
            "give the prompt as --prompt or --prompt-ids, not both");
  EXPECT_EQ(usageError({"e.mlir", "--prompt", "a"}),
            "--prompt and --prompt-ids need --generate N");
  EXPECT_EQ(usageError({"e.mlir", "--generate", "5", "--temperature", "-1"}),
            "--temperature must be finite and >= 0");
  EXPECT_EQ(usageError({"e.mlir", "--generate", "5", "--top-k", "-2"}),
            "--top-k must be >= 0");
  EXPECT_EQ(usageError({"e.mlir", "--generate", "5", "--num-samples", "0"}),
            "--generate must be >= 0 and --num-samples >= 1");
}

TEST(RunOptions, EvaluationBesideTrainingNeedsItsThreeOptions) {
  RunOptions o = parseRunOptions({"t.mlir", "--eval-program", "e.mlir",
                                  "--eval-every", "100", "--eval-data",
                                  "val.txt", "--eval-batches", "20"});
  EXPECT_EQ(o.evalProgram, "e.mlir");
  EXPECT_EQ(o.evalEvery, 100);
  EXPECT_EQ(o.evalData, "val.txt");
  EXPECT_EQ(o.evalBatches, 20);
  const std::string together = "evaluating while training needs "
                               "--eval-program EVAL, --eval-every K and "
                               "--eval-data SOURCE together";
  EXPECT_EQ(usageError({"t.mlir", "--eval-program", "e.mlir"}), together);
  EXPECT_EQ(usageError({"t.mlir", "--eval-every", "5", "--eval-data", "v"}),
            together);
  EXPECT_EQ(usageError({"t.mlir", "--eval-program", "e", "--eval-every", "5",
                        "--eval-data", "v", "--eval-batches", "0"}),
            "--eval-every must be >= 0 and --eval-batches >= 1");
}

} // namespace
