#include "cli/help_format.h"

#include <algorithm>

namespace lockstep::cli {

namespace {

constexpr size_t OPTION_COLUMN = 25;  // where an option's description starts
constexpr size_t SUMMARY_COLUMN = 51;  // where a verb's summary starts

// "-o, --output FILE"; a flag has no value name.
std::string option_label(const CLI::Option& option) {
  std::string label;
  for (const std::string& name : option.get_snames()) label += (label.empty() ? "-" : ", -") + name;
  for (const std::string& name : option.get_lnames()) label += (label.empty() ? "--" : ", --") + name;
  if (option.get_type_size() != 0 && !option.get_type_name().empty()) label += " " + option.get_type_name();
  return label;
}

// `text`'s lines, the first after `first` (padded to `column`), the others indented to it.
std::string hanging(const std::string& first, const std::string& text, size_t column) {
  std::string out = first;
  if (out.size() + 2 > column) out += "\n" + std::string(column, ' ');
  else out += std::string(column - out.size(), ' ');
  for (char c : text) out += c == '\n' ? "\n" + std::string(column, ' ') : std::string(1, c);
  return out + "\n";
}

std::string option_line(const CLI::Option& option) {
  return hanging("  " + option_label(option), option.get_description(), OPTION_COLUMN);
}

// The options of `app` in `group`, in the order they were declared.
std::string group_text(const CLI::App& app, const std::string& group) {
  std::string out;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group() == group && option != app.get_help_ptr()) out += option_line(*option);
  }
  return out;
}

std::string verb_lines(const VerbUsage& verb) {
  std::string out;
  for (const Synopsis& synopsis : verb.usage) {
    std::string call = "  lockstep " + verb.name;
    call += std::string(std::max<size_t>(call.size() + 1, 20) - call.size(), ' ') + synopsis.args;
    out += hanging(call, synopsis.summary, SUMMARY_COLUMN);
  }
  return out;
}

}  // namespace

std::string HelpFormatter::make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const {
  std::string out = "usage:\n" + verb_lines(verb_);
  std::vector<std::string> groups;
  for (const CLI::Option* option : app->get_options()) {
    const std::string& group = option->get_group();
    if (group.empty() || option == app->get_help_ptr()) continue;
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
  }
  for (const std::string& group : groups) out += "\n" + group + ":\n" + group_text(*app, group);
  if (const CLI::Option* help = app->get_help_ptr()) out += "\n" + option_line(*help);
  if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
  return out;
}

std::string top_level_help(const std::vector<VerbUsage>& verbs, const std::vector<HelpSection>& sections,
                           const std::string& footer) {
  std::string out = "usage: lockstep VERB ...\n\n";
  for (const VerbUsage& verb : verbs) out += verb_lines(verb);
  for (const HelpSection& section : sections) out += "\n" + section.group + ":\n" + group_text(*section.app, section.group);
  return out + "\n" + footer;
}

}  // namespace lockstep::cli
