#include "sim/input_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace lockstep::sim {

InputFile::~InputFile() { close(); }

InputFile::InputFile(InputFile&& other) noexcept { *this = std::move(other); }

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this == &other) return *this;
  close();
  map_ = std::exchange(other.map_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  const bool owned = !other.owned_.empty() && other.text_.data() == other.owned_.data();
  owned_ = std::move(other.owned_);
  text_ = owned ? std::string_view(owned_) : other.text_;
  other.text_ = {};
  error_ = std::move(other.error_);
  return *this;
}

void InputFile::close() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
  owned_.clear();
  owned_.shrink_to_fit();
  text_ = {};
}

bool InputFile::open_and_map(const std::string& path, int64_t max_bytes, int& fd) {
  close();
  error_.clear();
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = std::strerror(errno);
    return false;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    error_ = std::strerror(errno);
    ::close(fd);
    fd = -1;
    return false;
  }
  if (!S_ISREG(info.st_mode)) return false;
  if (info.st_size > max_bytes) {
    error_ = fmt::format("larger than {} bytes", max_bytes);
    ::close(fd);
    fd = -1;
    return false;
  }
  const auto size = static_cast<size_t>(info.st_size);
  if (size == 0) return false;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) return false;
  ::madvise(map, size, MADV_SEQUENTIAL);
  ::close(fd);
  fd = -1;
  map_ = map;
  map_size_ = size;
  text_ = std::string_view(static_cast<const char*>(map), size);
  return true;
}

bool InputFile::map(const std::string& path, int64_t max_bytes) {
  int fd = -1;
  if (open_and_map(path, max_bytes, fd)) return true;
  if (fd >= 0) ::close(fd);
  return false;
}

bool InputFile::open(const std::string& path, int64_t max_bytes) {
  int fd = -1;
  if (open_and_map(path, max_bytes, fd)) return true;
  if (fd < 0) return false;
  // Not a regular file, or it could not be mapped: read it.
  std::array<char, 1 << 16> buffer{};
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      error_ = std::strerror(errno);
      ::close(fd);
      owned_.clear();
      return false;
    }
    if (got == 0) break;
    if (static_cast<int64_t>(owned_.size()) + got > max_bytes) {
      error_ = fmt::format("larger than {} bytes", max_bytes);
      ::close(fd);
      owned_.clear();
      return false;
    }
    owned_.append(buffer.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  text_ = owned_;
  return true;
}

}  // namespace lockstep::sim
