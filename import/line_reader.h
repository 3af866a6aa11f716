// Reads a text file line by line in bounded chunks (never the whole file at once).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace lockstep::import {

class LineReader {
 public:
  // At most this many bytes in one line.
  static constexpr size_t MAX_LINE_BYTES = size_t{1} << 24;

  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool ok() const { return file_ != nullptr; }
  const std::string& error() const { return error_; }  // why it could not be opened or read
  // The next line without its "\n" (and "\r"); false at the end of the file or on an error
  // (error() then says which; a line longer than MAX_LINE_BYTES is an error).
  bool next(std::string_view& line);
  uint32_t line_number() const { return line_number_; }

 private:
  bool fill();

  std::FILE* file_ = nullptr;
  std::string error_;
  std::string buffer_;
  size_t begin_ = 0;  // start of the unread part of buffer_
  bool eof_ = false;
  uint32_t line_number_ = 0;
};

}  // namespace lockstep::import
