// The text of `lockstep --help` and `lockstep VERB --help`, laid out from the options as
// cli/command_line.cc declares them: a name column, then the option's description.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace lockstep::cli {

// One way to call a verb: its arguments and what it does (lines separated by '\n').
struct Synopsis {
  std::string args;
  std::string summary;
};

struct VerbUsage {
  std::string name;
  std::vector<Synopsis> usage;
};

// The options of one group of a verb's app, under the group's name.
struct HelpSection {
  std::string group;
  const CLI::App* app = nullptr;
};

// A verb's help: its synopses, every option by group, the help flag, the app's footer.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(VerbUsage verb) : verb_(std::move(verb)) {}
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;

 private:
  VerbUsage verb_;
};

// `lockstep --help`: every verb's synopses, then the given sections, then `footer`.
std::string top_level_help(const std::vector<VerbUsage>& verbs, const std::vector<HelpSection>& sections,
                           const std::string& footer);

}  // namespace lockstep::cli
