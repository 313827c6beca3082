//===- fsdp-run.cpp - train a lowered FSDP program on N ranks -------------===//
//
//   fsdp-run model.lowered.mlir --nproc 2 --steps 100 --data corpus.txt
//
// With --nproc N it launches N local ranks torchrun-style (RANK, WORLD_SIZE,
// MASTER_ADDR, ...) after printing the pre-launch report; without it, it
// is one rank of a job started by torchrun-style variables, mpirun or srun.
//
//===----------------------------------------------------------------------===//

#include "JitProgram.h"
#include "RunOptions.h"

#include "driver/Launcher.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#include <cstdlib>
#include <iostream>

namespace cl = llvm::cl;

static cl::OptionCategory category("fsdp-run options");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<lowered program .mlir>"),
                                  cl::cat(category));
static cl::opt<int> nproc("nproc", cl::init(0), cl::cat(category),
                          cl::desc("Launch this many local ranks"));
static cl::opt<int64_t> steps("steps", cl::init(10), cl::cat(category),
                              cl::desc("Train until this many optimizer "
                                       "steps were taken"));
static cl::opt<int64_t> batchSize(
    "batch-size", cl::init(0), cl::cat(category),
    cl::desc("Global batch size (must match the compiled program)"));
static cl::opt<int64_t> microBatches(
    "micro-batches", cl::init(0), cl::cat(category),
    cl::desc("Micro-batches per step (must match the compiled program)"));
static cl::opt<std::string> data(
    "data", cl::init("synthetic"), cl::cat(category),
    cl::desc("synthetic, a token file (.bin uint16, .u32 uint32), a text "
             "file read as bytes, or a .safetensors tensor dataset "
             "(input.<i>: [N, ...] per model input)"));
static cl::opt<uint64_t> seed("seed", cl::init(0), cl::cat(category),
                              cl::desc("Seed of initialisation and data"));
static cl::opt<std::string> load("load", cl::cat(category),
                                 cl::desc("Start from a checkpoint (a full "
                                          "file or a sharded directory)"));
static cl::opt<std::string> save("save", cl::cat(category),
                                 cl::desc("Directory for checkpoints"));
static cl::opt<int64_t> saveEvery("save-every", cl::init(0), cl::cat(category),
                                  cl::desc("Also save every K steps"));
static cl::opt<std::string> saveFormat("save-format", cl::init("full"),
                                       cl::cat(category),
                                       cl::desc("full or sharded"));
static cl::opt<std::string> metrics("metrics", cl::cat(category),
                                    cl::desc("Write per-step JSON lines here"));
static cl::opt<std::string> trace("trace", cl::cat(category),
                                  cl::desc("Write a Chrome/Perfetto trace"));
static cl::opt<int64_t> traceSteps(
    "trace-steps", cl::init(5), cl::cat(category),
    cl::desc("Steps recorded by --trace, from the first (default 5)"));
static cl::opt<std::string> backend("backend", cl::init("cpu"),
                                    cl::cat(category),
                                    cl::desc("cpu or cuda"));
static cl::opt<int> threads("rank-threads", cl::init(0), cl::cat(category),
                            cl::desc("Compute threads per rank (0: cores / "
                                     "local ranks)"));
static cl::opt<bool> quiet("quiet", cl::init(false), cl::cat(category),
                           cl::desc("Print errors only"));

/// The command line without --nproc, for the ranks.
static std::vector<std::string> childArgs(int argc, char **argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc" || a == "-nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("-nproc=", 0) == 0)
      continue;
    args.push_back(a);
  }
  return args;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdp-run: train a lowered FSDP program\n");
  if (backend != "cpu" && backend != "cuda") {
    std::cerr << "fsdp-run: error: --backend must be cpu or cuda\n";
    return 2;
  }
  std::unique_ptr<fsdp::JitProgram> jit = fsdp::JitProgram::load(input);
  if (!jit)
    return 1;
  const fsdp::driver::Program &program = jit->program();

  bool launchedByUs = std::getenv("FSDP_RUN_LOCAL_RANKS") != nullptr;
  const char *rankEnv = std::getenv("RANK");
  bool printReport = !quiet && !launchedByUs &&
                     (nproc > 0 || !rankEnv || std::string(rankEnv) == "0");
  if (printReport)
    std::cout << program.report << std::flush;

  if (nproc > 0 && !launchedByUs) {
    if (nproc != program.worldSize) {
      std::cerr << "fsdp-run: error: --nproc " << nproc
                << " contradicts the program, compiled for world-size="
                << program.worldSize << "\n";
      return 2;
    }
    return fsdp::driver::launchLocalRanks(nproc, childArgs(argc, argv));
  }

  fsdp::RunOptions options;
  options.input = input;
  options.steps = steps;
  options.batchSize = batchSize;
  options.microBatches = microBatches;
  options.data = data;
  options.seed = seed;
  options.load = load;
  options.save = save;
  options.saveEvery = saveEvery;
  options.saveFormat = saveFormat;
  options.metrics = metrics;
  options.trace = trace;
  options.traceSteps = traceSteps;
  options.backend = backend;
  options.threads = threads;
  options.quiet = quiet;
  return fsdp::runRank(options, *jit);
}
