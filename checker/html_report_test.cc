#include "checker/html_report.h"

#include <doctest/doctest.h>

#include <map>

#include <fmt/format.h>

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

// The page of one scenario, checked with the default options.
std::string page_of(const std::string& text, const std::string& name) {
  sim::LoadResult loaded = sim::load_scenario_text(text, name, {});
  REQUIRE(loaded.ok());
  std::vector<InputReport> reports(1);
  reports[0].input = name;
  reports[0].scenario = &*loaded.scenario;
  reports[0].result = check_scenario(*loaded.scenario, {});
  return report_html(reports, engine_options_for({}));
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
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
  const std::string html = report_html(reports, engine_options_for({}));
  Dom dom = read_dom(html);
  CHECK(dom.balanced);
  CHECK(dom.count["section"] == 3);
  CHECK(dom.count["svg"] == 4);  // per class, its graph and its timeline
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

TEST_CASE("html report: the timeline of the last moments, ranks folded, the stuck op red to the end") {
  const std::string uneven =
      "scenario: uneven\nworld: 4\nprogram:\n  - repeat: \"3 - (rank == 3)\"\n    do:\n      - compute: 20ms\n"
      "      - allreduce: {size: 100MiB}\n";
  const std::string html = page_of(uneven, "uneven.yaml");
  CHECK(read_dom(html).balanced);
  CHECK(read_dom(html).count["svg"] == 2);  // the graph and the timeline
  // Ranks 0-2 ran the same ops at the same times: one row; rank 3 finished: another.
  CHECK(html.find("<g class=\"timeline-row\" data-ranks=\"0-2\"><text x=\"4\" y=\"39.0\" class=\"head\">"
                  "ranks 0-2 (3 ranks): waits in allreduce #3 on world</text>") != std::string::npos);
  CHECK(html.find("<g class=\"timeline-row\" data-ranks=\"3\">") != std::string::npos);
  CHECK(html.find("class=\"head\">rank 3: finished at ") != std::string::npos);
  CHECK(occurrences(html, "class=\"timeline-row\"") == 2);
  CHECK(occurrences(html, "<g class=\"span stuck\">") == 1);  // the folded row's all-reduce
  CHECK(html.find("<title>allreduce #3 world (stuck) ") != std::string::npos);
  // The stuck op runs to the right edge: the window ends where the Perfetto trace does.
  const size_t stuck_at = html.find("<g class=\"span stuck\">");
  const size_t rect = html.find("<rect x=\"", stuck_at);
  const double x = std::stod(html.substr(rect + 9));
  const size_t width_at = html.find("width=\"", rect);
  CHECK(x + std::stod(html.substr(width_at + 7)) == doctest::Approx(890.0));
  CHECK(html.find("<p class=\"timeline-note\">The last ") != std::string::npos);
  CHECK(html.find("not drawn") == std::string::npos);
  CHECK(html == page_of(uneven, "uneven.yaml"));  // deterministic
}

TEST_CASE("html report: a timeline has at most MAX_TIMELINE_ROWS rows and says what it leaves out") {
  // 64 ranks, each computing for its own time: no two rows fold, and rank 63 never joins.
  const std::string html = page_of(
      "scenario: skew\nworld: 64\nprogram:\n  - compute: \"(rank + 1) * 1ms\"\n  - if: \"rank != 63\"\n"
      "    then: [{allreduce: {size: 4KiB}}]\n",
      "skew.yaml");
  CHECK(occurrences(html, "class=\"timeline-row\"") == MAX_TIMELINE_ROWS);
  CHECK(html.find("data-ranks=\"63\"") != std::string::npos);  // the rank waited for is drawn
  CHECK(html.find(fmt::format(" {} more rows ({} ranks) not drawn: at most {} rows", 64 - MAX_TIMELINE_ROWS,
                              64 - MAX_TIMELINE_ROWS, MAX_TIMELINE_ROWS)) != std::string::npos);
}

}  // namespace lockstep::checker
