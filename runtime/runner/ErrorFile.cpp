//===- ErrorFile.cpp - Failures on stderr and for torchrun ----------------===//
#include "runner/ErrorFile.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace fsdp {
namespace driver {

void recordErrorForTorchrun(const std::string &message) {
  const char *path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!path || !*path)
    return;
  std::string text = message;
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  // torch prints py_callstack as the failure's traceback: ours is the
  // message (a native rank has no Python stack).
  nlohmann::json record{
      {"message",
       {{"message", text},
        {"extraInfo",
         {{"py_callstack", text}, {"timestamp", std::to_string(seconds)}}}}}};
  std::ofstream out(path, std::ios::trunc);
  out << record.dump() << "\n";
  if (!out)
    printLine("cannot write TORCHELASTIC_ERROR_FILE '" + std::string(path) +
              "'\n");
}

void printLine(const std::string &line) {
  std::cerr.write(line.data(), std::streamsize(line.size()));
  std::cerr.flush();
}

} // namespace driver
} // namespace fsdp
