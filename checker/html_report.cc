#include "checker/html_report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "checker/bug_class.h"
#include "checker/report.h"
#include "sim/diagnostic.h"
#include "sim/utf8.h"

namespace lockstep::checker {

namespace {

// HTML text: the XML escapes of the JUnit report (control characters as '?') serve it too.
std::string html_escape(std::string_view raw) { return xml_escape(raw); }

// The folded wait-for graph as SVG: nodes on a circle (a cycle's ranks in order), arrows
// labelled with the op; a mismatch's two ops joined by a red line.
std::string graph_svg(const WaitForGraph& graph, const std::string& id) {
  const size_t n = graph.nodes.size();
  const double width = 760, height = n <= 2 ? 220 : 420;
  const double cx = width / 2, cy = height / 2, radius = n <= 2 ? 230 : 150;
  std::vector<std::pair<double, double>> at(n);
  for (size_t i = 0; i < n; ++i) {
    const double angle = n == 1 ? 0 : 3.14159265358979 * (1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n));
    at[i] = {cx + (n == 1 ? 0 : radius * std::cos(angle)), cy + (n <= 2 ? 0 : radius * std::sin(angle))};
  }
  std::string out = fmt::format(
      "<svg class=\"wait-for\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">"
      "<defs><marker id=\"{}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" "
      "orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/></marker></defs>\n",
      width, height, width, height, id);
  for (const WaitForGraph::Edge& edge : graph.edges) {
    auto [x1, y1] = at[edge.from];
    auto [x2, y2] = at[edge.to];
    if (edge.from != edge.to) {  // two ranks waiting for each other: the two arrows side by side
      const auto [lx, ly] = at[std::min(edge.from, edge.to)];
      const auto [hx, hy] = at[std::max(edge.from, edge.to)];
      const double length = std::hypot(hx - lx, hy - ly);
      const double side = edge.from < edge.to ? -8.0 : 8.0;
      const double ox = length > 0 ? -(hy - ly) / length * side : 0, oy = length > 0 ? (hx - lx) / length * side : 0;
      x1 += ox, x2 += ox, y1 += oy, y2 += oy;
    }
    // Stop the arrow at the target box's edge (boxes are 150 x 44).
    const double dx = x2 - x1, dy = y2 - y1;
    const double scale = std::max(std::abs(dx) / 75.0, std::abs(dy) / 22.0);
    const double ex = scale > 1 ? x2 - dx / scale : x2, ey = scale > 1 ? y2 - dy / scale : y2;
    const std::string label = edge.label + (edge.count > 1 ? fmt::format(" (x{})", edge.count) : "");
    out += fmt::format("<g class=\"edge{}\"><line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"{}/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text></g>\n",
                       edge.mismatch ? " mismatch" : "", x1, y1, ex, ey, edge.mismatch ? "#c00" : "#555",
                       edge.mismatch ? "" : " marker-end=\"url(#" + id + ")\"", (x1 + x2) / 2,
                       (y1 + y2) / 2 + (edge.from < edge.to ? -6 : 14),
                       html_escape(label));
  }
  for (size_t i = 0; i < n; ++i) {
    const WaitForGraph::Node& node = graph.nodes[i];
    const std::string state = node.state.substr(0, node.state.find('\n'));
    out += fmt::format("<g class=\"node{}\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"150\" height=\"44\" rx=\"6\" "
                       "fill=\"#fff\" stroke=\"{}\"/><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text></g>\n",
                       node.cycle ? " cycle" : "", at[i].first - 75, at[i].second - 22, node.cycle ? "#c00" : "#333",
                       at[i].first, at[i].second - 4, html_escape(node_label(node)), at[i].first, at[i].second + 12,
                       html_escape(state));
  }
  return out + "</svg>\n";
}

// The source lines a bug points at, each with its number.
std::string source_lines(const sim::Scenario& scenario, const Bug& bug) {
  std::set<uint32_t> lines;
  for (const sim::StuckOp& s : bug.stuck) {
    if (s.op.op.stmt) lines.insert(s.op.op.stmt->loc.line);
  }
  if (bug.mismatch) {
    for (const sim::OpRecord* rec : {&bug.mismatch->op_a, &bug.mismatch->op_b}) {
      if (rec->op.stmt) lines.insert(rec->op.stmt->loc.line);
    }
  }
  const std::string_view text = scenario.text;
  std::string out;
  for (uint32_t line : lines) {
    size_t start = 0;
    for (uint32_t i = 1; i < line && start != std::string_view::npos; ++i) {
      start = text.find('\n', start);
      if (start != std::string_view::npos) ++start;
    }
    if (start == std::string_view::npos || start >= text.size()) continue;
    const size_t end = text.find('\n', start);
    out += fmt::format("<span class=\"line\">{}:{}: {}</span>\n", html_escape(scenario.path), line,
                       html_escape(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
    if (lines.size() > 16) break;
  }
  return out;
}

}  // namespace

std::string report_html(const std::vector<InputReport>& reports) {
  std::string body;
  size_t with_bugs = 0;
  for (const InputReport& report : reports) {
    const std::string verdict =
        report.failed_to_load() ? "error" : std::string(sim::verdict_name(report.result->verdict));
    if (!report.failed_to_load() && !report.result->bugs.empty()) ++with_bugs;
    const std::string first_line = report_text(report, true);
    body += fmt::format("<section class=\"input\" data-verdict=\"{}\">\n<h2>{}</h2>\n", verdict,
                        html_escape(first_line.substr(0, first_line.find('\n'))));
    if (report.failed_to_load()) {
      body += "<pre class=\"errors\">" + html_escape(report_text(report, false)) + "</pre>\n</section>\n";
      continue;
    }
    const sim::Scenario& scenario = *report.scenario;
    const std::vector<Bug>& bugs = report.result->bugs;
    const std::vector<BugClass> classes = group_bugs(bugs);
    for (size_t c = 0; c < classes.size(); ++c) {
      const Bug& bug = bugs[classes[c].representative];
      body += fmt::format("<div class=\"bug-class\" data-kind=\"{}\" data-variants=\"{}\">\n<h3>bug {} of {}: {}{}</h3>\n",
                          sim::verdict_name(bug.kind), classes[c].members.size(), c + 1, classes.size(),
                          sim::verdict_name(bug.kind),
                          classes[c].members.size() > 1 ? fmt::format(", {} variants; smallest shown", classes[c].members.size()) : "");
      body += "<pre class=\"explanation\">";
      for (const std::string& line : bug.explanation) body += html_escape(line) + "\n";
      body += "</pre>\n";
      const std::vector<std::string> choices = describe_choices(scenario, bug);
      if (!choices.empty()) {
        body += "<ul class=\"choices\">";
        for (const std::string& choice : choices) body += "<li>" + html_escape(choice) + "</li>";
        body += "</ul>\n";
      }
      body += "<pre class=\"source\">" + source_lines(scenario, bug) + "</pre>\n";
      body += graph_svg(fold_wait_for(scenario, bug), fmt::format("arrow-{}-{}", &report - reports.data() + 1, c + 1));
      body += "</div>\n";
    }
    body += "</section>\n";
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>lockstep check</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 2em; color: #222; }}\n"
      "section.input {{ border-top: 1px solid #ccc; padding-top: 0.5em; }}\n"
      "section.input[data-verdict=\"ok\"] h2 {{ color: #2a7; }}\n"
      "section.input h2 {{ font-size: 1.1em; color: #c22; font-family: monospace; }}\n"
      "pre {{ background: #f6f6f6; padding: 0.5em; overflow-x: auto; }}\n"
      "pre.source .line {{ display: block; }}\n"
      "svg.wait-for text {{ font-size: 10px; font-family: monospace; }}\n"
      "</style>\n</head>\n<body>\n<h1>lockstep check: {} input{}, {} with bugs</h1>\n{}<footer>lockstep {}</footer>\n"
      "</body>\n</html>\n",
      reports.size(), reports.size() == 1 ? "" : "s", with_bugs, body, lockstep_version());
}

}  // namespace lockstep::checker
