#include "record/recordings.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

namespace lockstep::record {

namespace {

std::string located(const std::string& file, int line, const char* kind, const std::string& text) {
  return line > 0 ? fmt::format("{}:{}: {}: {}", file, line, kind, text) : fmt::format("{}: {}: {}", file, kind, text);
}

}  // namespace

void Problems::error(const std::string& file, int line, const std::string& text) {
  if (errors_.size() < max_) errors_.push_back(located(file, line, "error", text));
}

void Problems::warning(const std::string& file, int line, const std::string& text) {
  if (warnings_.size() < max_) warnings_.push_back(located(file, line, "warning", text));
}

std::vector<std::pair<std::string, std::string>> read_recordings(std::vector<std::string> paths, size_t max_files,
                                                                 int64_t max_file_bytes, Problems& problems) {
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> files;
  if (paths.size() > max_files) {
    problems.error("(recordings)", 0, fmt::format("{} files; at most {} (MergeOptions::max_files)", paths.size(), max_files));
    return files;
  }
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
      problems.error(path, 0, "cannot read file");
      continue;
    }
    const std::streamoff size = in.tellg();
    if (size > max_file_bytes) {
      problems.error(path, 0, fmt::format("{} bytes; at most {} (MergeOptions::max_file_bytes)", size, max_file_bytes));
      continue;
    }
    std::string text(static_cast<size_t>(std::max<std::streamoff>(size, 0)), '\0');
    in.seekg(0);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    files.emplace_back(path, std::move(text));
  }
  if (problems.any()) files.clear();
  return files;
}

bool recordings_present(size_t files, size_t max_files, const char* none, Problems& problems) {
  if (files == 0) {
    problems.error("(recordings)", 0, none);
  } else if (files > max_files) {
    problems.error("(recordings)", 0, fmt::format("{} files; at most {} (MergeOptions::max_files)", files, max_files));
  }
  return files > 0 && files <= max_files;
}

std::vector<TextLine> split_lines(const std::string& text) {
  std::vector<TextLine> lines;
  size_t pos = 0;
  int number = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool cut = end == std::string::npos;
    if (cut) end = text.size();
    TextLine line{++number, text.substr(pos, end - pos), cut};
    if (!line.text.empty() && line.text.back() == '\r') line.text.pop_back();
    lines.push_back(std::move(line));
    pos = end + 1;
  }
  return lines;
}

}  // namespace lockstep::record
