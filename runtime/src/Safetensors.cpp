//===- Safetensors.cpp - Checkpoint files in safetensors format -----------===//
#include "fsdp/rt/Safetensors.h"
#include "fsdp/rt/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp {
namespace rt {

using nlohmann::json;

void SafetensorsWriter::add(const std::string &name, DType dtype,
                            const Shape &shape, const void *data) {
  if (name.empty() || name == "__metadata__")
    fail(Status::InvalidArgument, "invalid tensor name '", name, "'");
  if (tensors_.count(name))
    fail(Status::InvalidArgument, "duplicate tensor name '", name, "'");
  int64_t bytes = numelOf(shape) * dtypeSize(dtype);
  if (bytes > 0 && !data)
    fail(Status::InvalidArgument, "tensor '", name, "': null data");
  Entry e{dtype, shape, std::vector<char>(bytes)};
  if (bytes > 0)
    std::memcpy(e.bytes.data(), data, bytes);
  tensors_.emplace(name, std::move(e));
}

void SafetensorsWriter::setMetadata(const std::string &key,
                                    const std::string &value) {
  metadata_[key] = value;
}

static std::string errnoText() { return std::strerror(errno); }

static void writeAll(int fd, const char *data, size_t size,
                     const std::string &path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail(Status::IO, "write to '", path, "' failed: ", errnoText());
    data += n;
    size -= static_cast<size_t>(n);
  }
}

static void syncDirectoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty())
    dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsFileWriter::SafetensorsFileWriter(
    const std::string &path, const std::vector<Tensor> &tensors,
    const std::map<std::string, std::string> &metadata)
    : path_(path) {
  json header = json::object();
  int64_t offset = 0;
  for (const Tensor &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      fail(Status::InvalidArgument, "invalid tensor name '", t.name, "'");
    int64_t bytes = numelOf(t.shape) * dtypeSize(t.dtype);
    if (!slots_.emplace(t.name, Slot{offset, bytes}).second)
      fail(Status::InvalidArgument, "duplicate tensor name '", t.name, "'");
    header[t.name] = {{"dtype", dtypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the
  // reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  char lengthBytes[8];
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  dataStart_ = 8 + n;

  static std::atomic<uint64_t> counter{0};
  tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(Status::IO, "cannot create '", tmp_, "': ", errnoText());
  try {
    writeAll(fd_, lengthBytes, 8, tmp_);
    writeAll(fd_, text.data(), text.size(), tmp_);
  } catch (...) { // no destructor for a half-built writer
    ::close(fd_);
    ::unlink(tmp_.c_str());
    throw;
  }
}

SafetensorsFileWriter::~SafetensorsFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void SafetensorsFileWriter::put(const std::string &name, const void *data) {
  auto it = slots_.find(name);
  if (it == slots_.end())
    fail(Status::InvalidArgument, "'", path_, "': tensor '", name,
         "' was not declared");
  Slot &slot = it->second;
  if (slot.written)
    fail(Status::InvalidArgument, "'", path_, "': tensor '", name,
         "' written twice");
  const char *p = static_cast<const char *>(data);
  int64_t done = 0;
  while (done < slot.bytes) {
    ssize_t n = ::pwrite(fd_, p + done, size_t(slot.bytes - done),
                         off_t(dataStart_ + slot.begin + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail(Status::IO, "write to '", tmp_, "' failed: ", errnoText());
    done += n;
  }
  slot.written = true;
}

void SafetensorsFileWriter::commit() {
  for (const auto &[name, slot] : slots_)
    if (!slot.written)
      fail(Status::Internal, "'", path_, "': tensor '", name,
           "' was declared but never written");
  if (::fsync(fd_) != 0)
    fail(Status::IO, "fsync of '", tmp_, "' failed: ", errnoText());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(tmp_.c_str());
    fail(Status::IO, "close of '", tmp_, "' failed: ", errnoText());
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string why = errnoText();
    ::unlink(tmp_.c_str());
    fail(Status::IO, "cannot rename '", tmp_, "' to '", path_, "': ", why);
  }
  syncDirectoryOf(path_); // make the rename itself durable
}

void SafetensorsWriter::write(const std::string &path) const {
  std::vector<SafetensorsFileWriter::Tensor> layout;
  for (const auto &[name, e] : tensors_)
    layout.push_back({name, e.dtype, e.shape});
  SafetensorsFileWriter out(path, layout, metadata_);
  for (const auto &[name, e] : tensors_)
    out.put(name, e.bytes.data());
  out.commit();
}

static int64_t jsonInt(const json &v, const std::string &what) {
  if (!v.is_number_integer())
    fail(Status::Format, what, " is not an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(Status::Format, what, " is too large");
  int64_t i = v.get<int64_t>();
  if (i < 0)
    fail(Status::Format, what, " is negative");
  return i;
}

SafetensorsReader::SafetensorsReader(const std::string &path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(Status::IO, "cannot open '", path, "': ", errnoText());
  in.seekg(0, std::ios::end);
  uint64_t fileSize = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  const std::string where = "'" + path + "': ";
  if (fileSize < 8)
    fail(Status::Format, where, "file is ", fileSize,
         " bytes, too short for the 8-byte header length");
  unsigned char lengthBytes[8];
  in.read(reinterpret_cast<char *>(lengthBytes), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(lengthBytes[i]) << (8 * i);
  if (n > kMaxSafetensorsHeader)
    fail(Status::Format, where, "header length ", n, " exceeds the limit of ",
         kMaxSafetensorsHeader, " bytes");
  if (n > fileSize - 8)
    fail(Status::Format, where, "header length ", n,
         " runs past the end of the file (", fileSize,
         " bytes): truncated file?");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in)
    fail(Status::IO, where, "read of the header failed");
  dataStart_ = 8 + n;
  uint64_t dataSize = fileSize - dataStart_;

  json header;
  try {
    header = json::parse(text);
  } catch (const json::parse_error &e) {
    fail(Status::Format, where, "header is not valid JSON: ", e.what());
  }
  if (!header.is_object())
    fail(Status::Format, where, "header is not a JSON object");

  std::vector<std::pair<int64_t, int64_t>> extents;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        fail(Status::Format, where, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(Status::Format, where, "__metadata__ value of '", m.key(),
               "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      fail(Status::Format, where, what,
           " needs an object with dtype, shape and data_offsets");
    if (!v["dtype"].is_string())
      fail(Status::Format, where, what, ": dtype is not a string");
    std::string dtypeText = v["dtype"].get<std::string>();
    std::optional<DType> dt = dtypeFromName(dtypeText);
    if (!dt)
      fail(Status::Format, where, what, ": unsupported dtype '", dtypeText,
           "' (supported: F32, BF16, F16, I32, I64)");
    if (!v["shape"].is_array())
      fail(Status::Format, where, what, ": shape is not an array");
    Shape shape;
    for (const json &d : v["shape"])
      shape.push_back(jsonInt(d, where + what + " shape entry"));
    const json &offs = v["data_offsets"];
    if (!offs.is_array() || offs.size() != 2)
      fail(Status::Format, where, what,
           ": data_offsets is not a [begin, end] pair");
    int64_t begin = jsonInt(offs[0], where + what + " data_offsets[0]");
    int64_t end = jsonInt(offs[1], where + what + " data_offsets[1]");
    if (begin > end)
      fail(Status::Format, where, what, ": data_offsets [", begin, ", ", end,
           ") are reversed");
    if (static_cast<uint64_t>(end) > dataSize)
      fail(Status::Format, where, what, ": data_offsets end ", end,
           " is past the data section of ", dataSize,
           " bytes: truncated file?");
    int64_t expected;
    try {
      expected = numelOf(shape) * dtypeSize(*dt);
    } catch (const Error &) {
      fail(Status::Format, where, what, ": shape is too large");
    }
    if (end - begin != expected)
      fail(Status::Format, where, what, ": data_offsets span ", end - begin,
           " bytes but shape and dtype need ", expected);
    tensors_[name] = TensorInfo{*dt, shape, begin, end};
    names_.push_back(name);
    extents.emplace_back(begin, end);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].first < extents[i - 1].second)
      fail(Status::Format, where, "tensor data ranges overlap at byte ",
           extents[i].first);
  std::sort(names_.begin(), names_.end());
}

const TensorInfo &SafetensorsReader::info(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    fail(Status::InvalidArgument, "'", path_, "' has no tensor '", name, "'");
  return it->second;
}

void SafetensorsReader::read(const std::string &name, void *dst,
                             int64_t bytes) const {
  const TensorInfo &t = info(name);
  if (bytes != t.end - t.begin)
    fail(Status::InvalidArgument, "tensor '", name, "' has ", t.end - t.begin,
         " bytes, destination has ", bytes);
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    fail(Status::IO, "cannot open '", path_, "': ", errnoText());
  in.seekg(static_cast<std::streamoff>(dataStart_ + t.begin));
  in.read(static_cast<char *>(dst), bytes);
  if (!in)
    fail(Status::IO, "short read of tensor '", name, "' from '", path_,
         "' (file changed since it was opened?)");
}

} // namespace rt
} // namespace fsdp
