//===- Trace.cpp - Merging the ranks' Chrome traces -----------------------===//
#include "runner/Trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace fsdp {
namespace driver {

using nlohmann::json;

namespace {

struct Input {
  json events;                  // array
  std::optional<double> origin; // otherData.clock_origin_unix_us
};

Input readTrace(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read trace '" + path +
                             "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error &e) {
    throw std::runtime_error("trace '" + path +
                             "' is not valid JSON: " + e.what());
  }
  Input input;
  if (doc.is_array()) {
    input.events = std::move(doc);
  } else if (doc.is_object() && doc.contains("traceEvents") &&
             doc["traceEvents"].is_array()) {
    input.events = std::move(doc["traceEvents"]);
    const json *other = doc.contains("otherData") ? &doc["otherData"] : nullptr;
    if (other && other->is_object() &&
        other->contains("clock_origin_unix_us") &&
        (*other)["clock_origin_unix_us"].is_number())
      input.origin = (*other)["clock_origin_unix_us"].get<double>();
  } else {
    throw std::runtime_error("trace '" + path +
                             "' is neither a JSON object with a "
                             "\"traceEvents\" array nor an array of events");
  }
  for (const json &e : input.events)
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string() ||
        (e.contains("ts") && !e["ts"].is_number()))
      throw std::runtime_error("trace '" + path + "' has a malformed event " +
                               e.dump() +
                               " (expected an object with a string \"ph\" "
                               "and a numeric \"ts\")");
  return input;
}

void writeAtomically(const std::string &path, const std::string &text) {
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error("cannot create '" + tmp +
                               "': " + std::strerror(errno));
    out << text << '\n';
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename '" + tmp + "' to '" + path +
                             "': " + why);
  }
}

} // namespace

void mergeChromeTraces(const std::vector<std::string> &inputs,
                       const std::string &output) {
  if (inputs.empty())
    throw std::runtime_error("no traces to merge into '" + output + "'");
  std::vector<Input> traces;
  for (const std::string &path : inputs)
    traces.push_back(readTrace(path));

  // Origins are wall-clock times of context creation; shift onto the
  // earliest so that simultaneous work lines up across ranks (exactly on
  // one host, within clock sync across hosts).
  bool align = std::all_of(traces.begin(), traces.end(),
                           [](const Input &t) { return t.origin.has_value(); });
  double earliest = 0;
  if (align) {
    earliest = *traces.front().origin;
    for (const Input &t : traces)
      earliest = std::min(earliest, *t.origin);
  }

  json events = json::array();
  for (Input &t : traces) {
    double shift = align ? *t.origin - earliest : 0;
    for (json &e : t.events) {
      if (shift != 0 && e.contains("ts"))
        e["ts"] = e["ts"].get<double>() + shift;
      events.push_back(std::move(e));
    }
  }
  json merged = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (align)
    merged["otherData"] = {{"clock_origin_unix_us", earliest}};
  writeAtomically(output, merged.dump());
}

} // namespace driver
} // namespace fsdp
