// An input file's bytes without copying them: a regular file is mapped read-only, anything else
// (a pipe, /dev/stdin) is read into memory. The importers and the trace loader parse the view
// in place; a loaded trace keeps its mapping as Scenario::text (sim/scenario.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::sim {

class InputFile {
 public:
  InputFile() = default;
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Opens `path`; false (and error() says why) when it cannot be read or holds more than
  // `max_bytes`.
  bool open(const std::string& path, int64_t max_bytes);
  // Maps `path` only: false, with nothing read, unless it is a non-empty regular file of at
  // most `max_bytes` that can be mapped (a caller then reads it its own way).
  bool map(const std::string& path, int64_t max_bytes);
  std::string_view text() const { return text_; }
  const std::string& error() const { return error_; }
  // Gives the bytes back (the view becomes empty).
  void close();

 private:
  // Opens `path` and maps it when it is a non-empty regular file of at most `max_bytes` (true).
  // Otherwise false, with `fd` the open file to read instead, or -1 when there is nothing to
  // read (error() says why).
  bool open_and_map(const std::string& path, int64_t max_bytes, int& fd);

  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string owned_;
  std::string_view text_;
  std::string error_;
};

}  // namespace lockstep::sim
