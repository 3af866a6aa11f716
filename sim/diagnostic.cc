#include "sim/diagnostic.h"

#include <algorithm>

#include "sim/utf8.h"

namespace lockstep::sim {

namespace {


const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::ERROR: return "error";
    case Severity::WARNING: return "warning";
    case Severity::NOTE: return "note";
  }
  return "error";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string_view source_line(std::string_view text, uint32_t line) {
  size_t begin = 0;
  for (uint32_t i = 1; i < line; ++i) {
    const size_t nl = text.find('\n', begin);
    if (nl == std::string_view::npos) return {};
    begin = nl + 1;
  }
  size_t end = text.find('\n', begin);
  if (end == std::string_view::npos) end = text.size();
  std::string_view result = text.substr(begin, end - begin);
  if (!result.empty() && result.back() == '\r') result.remove_suffix(1);
  return result;
}

std::string format_location(std::string_view file, SourceLoc loc) {
  std::string out(file);
  if (loc.line > 0) {
    out += ':' + std::to_string(loc.line);
    if (loc.col > 0) out += ':' + std::to_string(loc.col);
  }
  return out;
}

std::string format_diagnostic(const Diagnostic& diagnostic, std::string_view source_text) {
  std::string out = format_location(diagnostic.file, diagnostic.loc);
  out += ": ";
  out += severity_name(diagnostic.severity);
  out += ": ";
  out += diagnostic.message;
  out += '\n';
  if (diagnostic.loc.line > 0 && !source_text.empty()) {
    std::string_view line = source_line(source_text, diagnostic.loc.line);
    if (!line.empty()) {
      // A long line (a flow map of 10^5 params on one line) is shown as a window of at most
      // MAX_ECHO_BYTES around the column, with "..." where it was cut.
      constexpr size_t MAX_ECHO_BYTES = 160;
      size_t col = diagnostic.loc.col > 0 ? diagnostic.loc.col - 1 : 0;  // 0-based
      std::string_view before, after;
      if (line.size() > MAX_ECHO_BYTES) {
        const size_t start = col > MAX_ECHO_BYTES / 2 ? std::min(col - MAX_ECHO_BYTES / 2, line.size() - MAX_ECHO_BYTES) : 0;
        if (start > 0) before = "...";
        if (start + MAX_ECHO_BYTES < line.size()) after = "...";
        line = line.substr(start, MAX_ECHO_BYTES);
        col = col - start + before.size();
      }
      // Invalid UTF-8 as '?', one byte for one: the caret stays under its column.
      const std::string shown = std::string(before) + valid_utf8(line, "?") + std::string(after);
      out += "  ";
      out += shown;
      out += "\n  ";
      for (size_t i = 0; i < col && i < shown.size(); ++i) out += shown[i] == '\t' ? '\t' : ' ';
      out += "^\n";
    }
  }
  return out;
}

// Built by appending: g++ 12 -O3 warns falsely on "'" + std::string(...).
std::string quoted(std::string_view name) {
  std::string out = "'";
  out += name;
  out += '\'';
  return out;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string hint = closest_name(name, candidates);
  return hint.empty() ? std::string() : " (did you mean " + quoted(hint) + "?)";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string format_ranks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j - i >= 2) {
      out += "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

bool is_identifier(std::string_view name) {
  const auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), word_char);
}

}  // namespace lockstep::sim
