//===- ConformanceBackend.cpp - The backend a test binary checks ----------===//
//
// Compiled into each conformance binary with FSDPRT_CONFORMANCE_BACKEND set
// to its backend's name (runtime/unittests/CMakeLists.txt; "cpu" by
// default), so that the suites themselves compile once for every backend.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#ifndef FSDPRT_CONFORMANCE_BACKEND
#define FSDPRT_CONFORMANCE_BACKEND "cpu"
#endif

std::vector<std::string> fsdp::rt::test::conformanceBackends() {
  return {FSDPRT_CONFORMANCE_BACKEND};
}
