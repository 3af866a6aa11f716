// What both merges of `lockstep record` share: bounded problem lists in the form
// "FILE[:LINE]: error|warning: TEXT", and reading the recorded files within their bounds.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

// Whether a merge can start: at least one file (else `none`, what no recording means) and at
// most `max_files`; the problem is recorded otherwise.
bool recordings_present(size_t files, size_t max_files, const char* none, Problems& problems);

// The lines of `text` without their line ends ('\n', and a '\r' before it), numbered from 1;
// `last_cut` says whether the last line had no '\n' (what a killed writer leaves).
struct TextLine {
  int number = 0;
  std::string text;
  bool last_cut = false;
};
std::vector<TextLine> split_lines(const std::string& text);

// What a recording's first line says it is.
struct RecordingFormat {
  const char* version_key;  // "lockstep_record", "lockstep_torch"
  int64_t version;          // the one this lockstep reads
  const char* writer;       // "lockstep's recorder", in "not a recording of ..."
};

// Reads one recording (JSON Lines: a header, then records with a "seq" each). `on_header(json)`
// returns "" or what is wrong with the header (which stops the file); `parse(json, rec)` fills a
// record and returns "" or what is wrong with it (an error, the file goes on); `accept(rec)`
// takes a record whose sequence number is new, within `max_records` of all files. A line that is
// not JSON is an error, except the last one of a file cut short after its header (what a killed
// writer leaves: a warning, and `truncated`). False when an error stopped the file.
template <typename Rec, typename Header, typename Parse, typename Accept>
bool read_recording(const std::string& name, const std::string& text, const RecordingFormat& format, Problems& problems,
                    uint64_t& records, uint64_t max_records, bool& truncated, Header&& on_header, Parse&& parse,
                    Accept&& accept) {
  bool header = false;
  std::set<uint64_t> seqs;
  for (const TextLine& line : split_lines(text)) {
    if (problems.full()) break;
    if (line.text.find_first_not_of(" \t") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line.text, nullptr, false);
    if (j.is_discarded()) {
      if (line.last_cut && header) {
        problems.warning(name, line.number, "the last record is cut short (the process was killed while writing); ignored");
        truncated = true;
        break;
      }
      problems.error(name, line.number, "not a JSON object");
      continue;
    }
    if (!header) {
      auto version = j.is_object() ? j.find(format.version_key) : j.end();
      if (version == j.end()) {
        problems.error(name, line.number, fmt::format("not a recording of {}: the first line has no \"{}\"", format.writer,
                                                      format.version_key));
        return false;
      }
      if (!version->is_number_integer() || version->template get<int64_t>() != format.version) {
        problems.error(name, line.number, fmt::format("unknown recording version {}; this lockstep reads version {}",
                                                      version->dump(), format.version));
        return false;
      }
      const std::string problem = on_header(j);
      if (!problem.empty()) {
        problems.error(name, line.number, problem);
        return false;
      }
      header = true;
      continue;
    }
    Rec r;
    const std::string problem = parse(j, line.number, r);
    if (!problem.empty()) {
      problems.error(name, line.number, problem);
      continue;
    }
    if (!seqs.insert(r.seq).second) {
      problems.error(name, line.number, fmt::format("sequence number {} appears twice", r.seq));
      continue;
    }
    if (++records > max_records) {
      problems.error(name, line.number, fmt::format("more than {} records in all files (MergeOptions::max_records)", max_records));
      return false;
    }
    accept(std::move(r));
  }
  if (!header && !problems.full()) {
    problems.error(name, 0, "empty: no header line");
    return false;
  }
  return true;
}

}  // namespace lockstep::record
