// What both merges of `lockstep record` share: bounded problem lists in the form
// "FILE[:LINE]: error|warning: TEXT", and reading the recorded files within their bounds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::record {

// Collects errors and warnings, at most `max` of each.
class Problems {
 public:
  Problems(std::vector<std::string>& errors, std::vector<std::string>& warnings, size_t max)
      : errors_(errors), warnings_(warnings), max_(max) {}
  void error(const std::string& file, int line, const std::string& text);
  void warning(const std::string& file, int line, const std::string& text);
  bool any() const { return !errors_.empty(); }
  bool full() const { return errors_.size() >= max_; }

 private:
  std::vector<std::string>& errors_;
  std::vector<std::string>& warnings_;
  size_t max_;
};

// The files at `paths`, sorted by name (so that nothing depends on the order a folder lists
// them in), as (name, content). A file that cannot be read, more than `max_files` files or a file
// over `max_file_bytes` is an error, and nothing is returned.
std::vector<std::pair<std::string, std::string>> read_recordings(std::vector<std::string> paths, size_t max_files,
                                                                 int64_t max_file_bytes, Problems& problems);

// The lines of `text` without their line ends ('\n', and a '\r' before it), numbered from 1;
// `last_cut` says whether the last line had no '\n' (what a killed writer leaves).
struct TextLine {
  int number = 0;
  std::string text;
  bool last_cut = false;
};
std::vector<TextLine> split_lines(const std::string& text);

}  // namespace lockstep::record
