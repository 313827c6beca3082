//===- StepLibrary.cpp - A step library made by fsdp-compile --------------===//

#include "runner/StepLibrary.h"

#include "fsdp/rt/StepAbi.h"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

std::string stampText(uint32_t runtimeAbi, uint32_t stepAbi) {
  return "runtime ABI " + std::to_string(runtimeAbi) + ", step ABI " +
         std::to_string(stepAbi);
}

class StepLibrary : public StepProgram {
public:
  // A path without a slash would be searched for like a library name.
  explicit StepLibrary(const std::string &path)
      : path_(path), openPath_(std::filesystem::absolute(path).string()) {
    // The stamp first, with lazy binding, so that a library of another
    // release is named as such rather than by a missing fsdprt_* function;
    // then RTLD_NOW, so that a missing function is an error here and not in
    // the middle of the first step.
    open(RTLD_LAZY);
    try {
      checkStamp();
    } catch (...) {
      dlclose(handle_);
      throw;
    }
    dlclose(handle_);
    open(RTLD_NOW);
    try {
      const char *description =
          static_cast<const char *>(symbol(FSDPRT_STEP_PROGRAM_SYMBOL));
      program_ = parseProgram(description);
      step_ = reinterpret_cast<StepFn>(symbol(program_.entry.c_str()));
    } catch (...) {
      dlclose(handle_);
      throw;
    }
  }
  // The library stays loaded until exit: threads the step started (stream
  // workers) may still hold its code when the runner returns.
  ~StepLibrary() override = default;

  const Program &program() const override { return program_; }
  StepFn step() override { return step_; }

private:
  void open(int binding) {
    handle_ = dlopen(openPath_.c_str(), binding | RTLD_LOCAL);
    if (!handle_)
      throw std::runtime_error("cannot load step library '" + path_ +
                               "': " + dlerror());
  }

  void *symbol(const char *name) {
    void *address = dlsym(handle_, name);
    if (!address)
      throw std::runtime_error("'" + path_ + "' is not a step library: it " +
                               "has no symbol '" + name +
                               "' (make one with fsdp-compile)");
    return address;
  }

  void checkStamp() {
    auto *stamp =
        static_cast<const uint32_t *>(symbol(FSDPRT_STEP_ABI_STAMP_SYMBOL));
    if (stamp[0] != FSDPRT_ABI_VERSION || stamp[1] != FSDPRT_STEP_ABI_VERSION)
      throw std::runtime_error(
          "step library '" + path_ + "' was compiled for " +
          stampText(stamp[0], stamp[1]) + " but this runtime has " +
          stampText(FSDPRT_ABI_VERSION, FSDPRT_STEP_ABI_VERSION) +
          "; recompile it with the fsdp-compile of this release");
  }

  std::string path_, openPath_;
  void *handle_ = nullptr;
  Program program_;
  StepFn step_ = nullptr;
};

} // namespace

bool isStepLibraryPath(const std::string &path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0;
}

std::unique_ptr<StepProgram> loadStepLibrary(const std::string &path) {
  return std::make_unique<StepLibrary>(path);
}

} // namespace driver
} // namespace fsdp
