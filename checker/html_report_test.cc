#include "checker/html_report.h"

#include <doctest/doctest.h>

#include <map>

#include "checker/explore.h"
#include "sim/loader.h"

namespace lockstep::checker {

namespace {

// Start tags by name, and whether every element the page opens is closed in order (the page
// has no void elements but <meta>, and writes SVG's empty elements as <x/>).
struct Dom {
  std::map<std::string, size_t> count;
  bool balanced = true;
};

Dom read_dom(const std::string& html) {
  Dom dom;
  std::vector<std::string> open;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    const size_t end = html.find('>', at);
    REQUIRE(end != std::string::npos);
    const std::string tag = html.substr(at + 1, end - at - 1);
    if (tag.starts_with("!")) continue;
    const bool closing = tag.starts_with("/");
    const std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" />", closing ? 1 : 0) - (closing ? 1 : 0));
    if (closing) {
      if (open.empty() || open.back() != name) dom.balanced = false;
      if (!open.empty()) open.pop_back();
      continue;
    }
    ++dom.count[name];
    if (!tag.ends_with("/") && name != "meta") open.push_back(name);
  }
  dom.balanced = dom.balanced && open.empty();
  return dom;
}

}  // namespace

TEST_CASE("html report: a page per run, a section per input, a class with its graph as SVG") {
  sim::LoadResult stop = sim::load_scenario_text(
      "scenario: stop\nworld: 4\nprogram:\n  - allreduce: {size: 4}\n  - sync\n  - choose:\n      stop: [exit]\n"
      "      go: []\n  - allreduce: {size: 4}\n",
      "a<b>.yaml", {});
  sim::LoadResult sizes = sim::load_scenario_text(
      "scenario: sizes\nworld: 2\nprogram:\n  - allreduce: {size: \"rank == 0 ? 4 : 8\"}\n", "sizes.yaml", {});
  REQUIRE(stop.ok());
  REQUIRE(sizes.ok());
  std::vector<InputReport> reports(3);
  reports[0].input = "a<b>.yaml";
  reports[0].scenario = &*stop.scenario;
  reports[0].result = check_scenario(*stop.scenario, {});
  reports[1].input = "sizes.yaml";
  reports[1].scenario = &*sizes.scenario;
  reports[1].result = check_scenario(*sizes.scenario, {});
  reports[2].input = "broken.yaml";
  reports[2].errors = {"broken.yaml:1:1: error: missing required key 'scenario'\n"};
  const std::string html = report_html(reports);
  Dom dom = read_dom(html);
  CHECK(dom.balanced);
  CHECK(dom.count["section"] == 3);
  CHECK(dom.count["svg"] == 2);
  CHECK(html.starts_with("<!DOCTYPE html>\n"));
  CHECK(html.find("<script") == std::string::npos);  // self-contained, nothing to run
  CHECK(html.find("<h1>lockstep check: 3 inputs, 2 with bugs</h1>") != std::string::npos);
  CHECK(html.find("<h2>a&lt;b&gt;.yaml: hang (no expectation) [") != std::string::npos);
  CHECK(html.find("data-kind=\"hang\" data-variants=\"14\"") != std::string::npos);
  CHECK(html.find("<li>rank 0 took branch 1 (`stop`) of the choose at a&lt;b&gt;.yaml:6:5</li>") != std::string::npos);
  CHECK(html.find("<span class=\"line\">a&lt;b&gt;.yaml:9:   - allreduce: {size: 4}</span>") != std::string::npos);
  CHECK(html.find("<g class=\"edge mismatch\">") != std::string::npos);
  CHECK(html.find(">differs in size</text>") != std::string::npos);
  CHECK(html.find("data-verdict=\"error\"") != std::string::npos);
  CHECK(html.find("missing required key &#39;scenario&#39;") == std::string::npos);
  CHECK(html.find("missing required key 'scenario'") != std::string::npos);
}

}  // namespace lockstep::checker
