#include "sim/output_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace lockstep::sim {

namespace {

// The folder and the file name of a path ("." for a bare name).
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// A name nobody can predict: a temporary planted in advance is met only by chance, and then
// O_EXCL refuses it and another name is drawn. Not output: the name never reaches a report.
std::string random_suffix() {
  uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    bits = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ULL ^ reinterpret_cast<uintptr_t>(&bits);
  }
  return fmt::format("{:016x}", bits);
}

}  // namespace

OutputFile::~OutputFile() { abandon(); }

void OutputFile::abandon() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

std::string OutputFile::open(const std::string& path) {
  abandon();
  path_ = path;
  const auto failed = [](int error) { return std::string(std::strerror(error)); };
  if (path.empty()) return failed(ENOENT);
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    if (S_ISDIR(target.st_mode)) return failed(EISDIR);
    if (S_ISSOCK(target.st_mode)) return "it is a socket";
    // A device, a FIFO: written in place, never replaced.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return failed(errno);
    file_ = ::fdopen(fd, "wb");
    if (file_ == nullptr) {
      const int error = errno;
      ::close(fd);
      return failed(error);
    }
    return "";
  }
  const auto [folder, name] = split_path(path);
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temporary = fmt::format("{}/.{}.{}.tmp", folder, name.substr(0, 200), random_suffix());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return failed(errno);
    }
    file_ = ::fdopen(fd, "wb");
    if (file_ == nullptr) {
      const int error = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      return failed(error);
    }
    temporary_ = std::move(temporary);
    return "";
  }
  return failed(EEXIST);
}

std::string OutputFile::commit() {
  if (file_ == nullptr) return "not open";
  const bool write_failed = std::ferror(file_) != 0;
  int error = errno;
  const int closed = std::fclose(file_);
  if (closed != 0) error = errno;
  file_ = nullptr;
  if (write_failed || closed != 0) {
    abandon();
    return std::strerror(error != 0 ? error : EIO);
  }
  if (temporary_.empty()) return "";
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    error = errno;
    abandon();
    return std::strerror(error);
  }
  temporary_.clear();
  return "";
}

std::string write_output_file(const std::string& path, std::string_view content) {
  OutputFile file;
  std::string problem = file.open(path);
  if (!problem.empty()) return problem;
  // A short write leaves the stream's error set: commit() reports it and removes the temporary.
  const size_t written = std::fwrite(content.data(), 1, content.size(), file.stream());
  if (written != content.size() && std::ferror(file.stream()) == 0) return "short write";
  return file.commit();
}

}  // namespace lockstep::sim
