//===- StepLibraryTest.cpp - Loading step libraries -----------------------===//
//
// The libraries here are built by CMake from Inputs/*.c; real step libraries
// (fsdp-compile) are exercised end to end in test/Run/test_aot.py.
//
//===----------------------------------------------------------------------===//
#include "runner/StepLibrary.h"

#include "fsdp/rt/StepAbi.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

std::string loadError(const std::string &path) {
  try {
    fsdp::driver::loadStepLibrary(path);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

TEST(StepLibrary, RefusesAnotherAbiStampNamingBothVersions) {
  std::string error = loadError(FSDP_WRONG_ABI_STEP);
  EXPECT_NE(error.find("was compiled for runtime ABI 999, step ABI 7"),
            std::string::npos)
      << error;
  std::string ours = "this runtime has runtime ABI " +
                     std::to_string(FSDPRT_ABI_VERSION) + ", step ABI " +
                     std::to_string(FSDPRT_STEP_ABI_VERSION);
  EXPECT_NE(error.find(ours), std::string::npos) << error;
}

TEST(StepLibrary, RefusesASharedObjectThatIsNoStepLibrary) {
  std::string error = loadError(FSDP_NOT_A_STEP);
  EXPECT_NE(error.find("is not a step library: it has no symbol "
                       "'fsdp_abi_stamp'"),
            std::string::npos)
      << error;
}

TEST(StepLibrary, NamesAFileThatCannotBeLoaded) {
  std::string error = loadError("/nonexistent/step.so");
  EXPECT_NE(error.find("cannot load step library '/nonexistent/step.so'"),
            std::string::npos)
      << error;
}

TEST(StepLibrary, RecognisesLibrariesByExtension) {
  EXPECT_TRUE(fsdp::driver::isStepLibraryPath("out/step.so"));
  EXPECT_FALSE(fsdp::driver::isStepLibraryPath("step.mlir"));
  EXPECT_FALSE(fsdp::driver::isStepLibraryPath(".so"));
}

} // namespace
