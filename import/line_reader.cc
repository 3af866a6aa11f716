#include "import/line_reader.h"

#include <cerrno>
#include <cstring>

namespace lockstep::import {

namespace {
constexpr size_t CHUNK_BYTES = size_t{1} << 22;
}

LineReader::LineReader(const std::string& path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) error_ = std::strerror(errno);
}

LineReader::~LineReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool LineReader::fill() {
  if (eof_) return false;
  buffer_.erase(0, begin_);
  begin_ = 0;
  const size_t old = buffer_.size();
  buffer_.resize(old + CHUNK_BYTES);
  const size_t got = std::fread(buffer_.data() + old, 1, CHUNK_BYTES, file_);
  buffer_.resize(old + got);
  if (got < CHUNK_BYTES) {
    if (std::ferror(file_) != 0) error_ = std::strerror(errno);
    eof_ = true;
  }
  return got > 0;
}

bool LineReader::next(std::string_view& line) {
  if (file_ == nullptr || !error_.empty()) return false;
  size_t scanned = begin_;
  while (true) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', buffer_.size() - scanned);
    if (nl != nullptr) {
      const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - buffer_.data());
      line = std::string_view(buffer_).substr(begin_, end - begin_);
      begin_ = end + 1;
      break;
    }
    if (buffer_.size() - begin_ > MAX_LINE_BYTES) {
      error_ = "a line longer than 16 MiB";
      return false;
    }
    scanned = buffer_.size() - begin_;
    if (!fill()) {
      if (!error_.empty() || begin_ >= buffer_.size()) return false;
      line = std::string_view(buffer_).substr(begin_);  // the last line has no newline
      begin_ = buffer_.size();
      break;
    }
    // fill() moved the unread part to the front.
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++line_number_;
  return true;
}

}  // namespace lockstep::import
