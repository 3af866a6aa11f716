// Output files written safely (docs/outputs.md): a report, a counterexample, a timeline or an
// imported trace is either whole or absent, and writing it never replaces or follows what the
// user did not name.
//
// - A regular file (or a new name) is written to a temporary beside it, created with
//   O_CREAT|O_EXCL|O_NOFOLLOW under a random name (a file or link planted there is never
//   opened), then renamed over the target. On any failure the temporary is removed and the
//   target is as it was.
// - Anything else that exists at the name (/dev/null, /dev/stdout, a FIFO, a terminal) is
//   written in place, as a shell redirection would: it is never replaced by a regular file.
//   A folder or a socket is refused.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace lockstep::sim {

class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile();  // an output neither committed nor failed is abandoned: its temporary removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Opens `path` for writing; "" or the operating error (the reason, as strerror words it).
  std::string open(const std::string& path);
  // The stream to write to, once open.
  std::FILE* stream() { return file_; }
  // Flushes and closes; renames the temporary over the target. "" or the operating error.
  std::string commit();

 private:
  void abandon();

  std::string path_;
  std::string temporary_;  // empty when written in place
  std::FILE* file_ = nullptr;
};

// The whole of `content` to `path` through an OutputFile. "" or the operating error.
std::string write_output_file(const std::string& path, std::string_view content);

}  // namespace lockstep::sim
