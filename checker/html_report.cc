#include "checker/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "checker/bug_class.h"
#include "checker/counterexample.h"
#include "checker/rank_set.h"
#include "checker/report.h"
#include "sim/diagnostic.h"
#include "sim/timeline.h"
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
  // Each box as wide as its longer line (10px monospace, about 6.2px a character), within what
  // its neighbours leave it.
  std::vector<double> half(n);
  for (size_t i = 0; i < n; ++i) {
    const WaitForGraph::Node& node = graph.nodes[i];
    const size_t chars = std::max(node_label(node).size(), node.state.substr(0, node.state.find('\n')).size());
    half[i] = std::clamp(6.2 * static_cast<double>(chars) + 14, 150.0, n <= 2 ? 320.0 : 220.0) / 2;
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
    // Stop the arrow at the target box's edge (boxes are 44 high).
    const double dx = x2 - x1, dy = y2 - y1;
    const double scale = std::max(std::abs(dx) / half[edge.to], std::abs(dy) / 22.0);
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
    out += fmt::format("<g class=\"node{}\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"44\" rx=\"6\" "
                       "fill=\"#fff\" stroke=\"{}\"/><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text></g>\n",
                       node.cycle ? " cycle" : "", at[i].first - half[i], at[i].second - 22, 2 * half[i],
                       node.cycle ? "#c00" : "#333",
                       at[i].first, at[i].second - 4, html_escape(node_label(node)), at[i].first, at[i].second + 12,
                       html_escape(state));
  }
  return out + "</svg>\n";
}

// The timeline of a bug's last moments: the window, and per row of folded ranks its lanes.
struct TimelineLane {
  std::string track;  // "main", "comm:world", "thread bg"
  std::vector<sim::TimelineSpan> spans;
};
struct TimelineRow {
  std::vector<int32_t> ranks;
  size_t node = 0;  // its wait-for graph node
  std::vector<TimelineLane> lanes;
  std::string end;     // "finished at 41.000ms", "" when it did not end
  int64_t end_ns = -1;
  size_t hidden = 0;   // its spans in the window left out (past MAX_ROW_SPANS)
};

// The window starts at the earliest of the last LAST_OPS ops of each stalled rank (those with a
// stuck op; a mismatch's two ranks; else every rank).
constexpr size_t LAST_OPS = 3;
constexpr size_t MAX_ROW_SPANS = 16;

std::string timeline_svg(const sim::Scenario& scenario, const Bug& bug, const WaitForGraph& graph,
                         const sim::ExecutionResult& result) {
  const size_t world = result.ops.size();
  const int64_t stall = sim::timeline_last_event_ns(result);
  int64_t horizon = sim::timeline_horizon_ns(result);
  // Each rank's started ops as spans, in start order.
  std::vector<std::vector<std::pair<const sim::OpRecord*, sim::TimelineSpan>>> spans(world);
  for (size_t r = 0; r < world; ++r) {
    for (const sim::OpRecord& rec : result.ops[r]) {
      if (std::optional<sim::TimelineSpan> span = sim::timeline_span(scenario, rec, horizon)) {
        spans[r].emplace_back(&rec, std::move(*span));
      }
    }
    std::stable_sort(spans[r].begin(), spans[r].end(),
                     [](const auto& a, const auto& b) { return a.second.start_ns < b.second.start_ns; });
  }
  std::set<int32_t> stalled;
  for (const sim::StuckOp& s : bug.stuck) stalled.insert(s.rank);
  if (bug.mismatch) stalled.insert({bug.mismatch->rank_a, bug.mismatch->rank_b});
  if (stalled.empty()) {
    for (size_t r = 0; r < world; ++r) stalled.insert(static_cast<int32_t>(r));
  }
  int64_t from = stall;
  for (int32_t rank : stalled) {
    if (rank < 0 || static_cast<size_t>(rank) >= world || spans[static_cast<size_t>(rank)].empty()) continue;
    const auto& ops = spans[static_cast<size_t>(rank)];
    from = std::min(from, ops[ops.size() - std::min(ops.size(), LAST_OPS)].second.start_ns);
  }
  if (horizon <= from) horizon = from + 1'000;

  // Ranks fold into one row when they are one node of the wait-for graph and ran the same ops
  // at the same times in the window.
  std::vector<size_t> node_of(world, 0);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int32_t rank : graph.nodes[n].ranks) {
      if (rank >= 0 && static_cast<size_t>(rank) < world) node_of[static_cast<size_t>(rank)] = n;
    }
  }
  std::vector<TimelineRow> rows;
  std::map<std::string, size_t> row_of;
  for (size_t r = 0; r < world; ++r) {
    TimelineRow row;
    row.node = node_of[r];
    std::vector<const sim::TimelineSpan*> drawn;
    std::vector<const sim::OpRecord*> records;
    for (const auto& [rec, span] : spans[r]) {
      if (span.end_ns > from || span.start_ns >= from) {
        drawn.push_back(&span);
        records.push_back(rec);
      }
    }
    row.hidden = drawn.size() > MAX_ROW_SPANS ? drawn.size() - MAX_ROW_SPANS : 0;
    std::string key = fmt::format("{}|{}", row.node, row.hidden);
    for (size_t i = row.hidden; i < drawn.size(); ++i) {
      const std::string track = records[i]->stream.empty() ? "thread " + records[i]->thread : records[i]->stream;
      auto lane = std::find_if(row.lanes.begin(), row.lanes.end(), [&](const TimelineLane& l) { return l.track == track; });
      if (lane == row.lanes.end()) lane = row.lanes.insert(row.lanes.end(), TimelineLane{track, {}});
      lane->spans.push_back(*drawn[i]);
      key += fmt::format("|{}|{}|{}|{}", track, drawn[i]->name, drawn[i]->start_ns, drawn[i]->end_ns);
    }
    if (r < result.rank_status.size()) {
      const sim::RankStatus status = result.rank_status[r];
      if (status == sim::RankStatus::FINISHED || status == sim::RankStatus::EXITED || status == sim::RankStatus::CRASHED) {
        row.end_ns = r < result.rank_end_ns.size() ? result.rank_end_ns[r] : -1;
        row.end = fmt::format("{} at {}", sim::rank_status_name(status), format_duration(std::max<int64_t>(row.end_ns, 0)));
        key += "|" + row.end;
      }
    }
    auto [it, inserted] = row_of.emplace(key, rows.size());
    if (inserted) rows.push_back(std::move(row));
    rows[it->second].ranks.push_back(static_cast<int32_t>(r));
  }
  // Past the bound, rows are kept (and drawn) by what their ranks are to the bug: waited for
  // (or on the cycle, or mismatched) first, then waiting, then the rest; in each, by first rank.
  std::vector<int> tier(graph.nodes.size(), 2);
  for (const WaitForGraph::Edge& edge : graph.edges) {
    tier[edge.to] = 0;
    if (edge.mismatch) tier[edge.from] = 0;
    tier[edge.from] = std::min(tier[edge.from], 1);
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].cycle) tier[n] = 0;
  }
  std::vector<size_t> shown;
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < rows.size() && shown.size() < MAX_TIMELINE_ROWS; ++i) {
      if (tier[rows[i].node] == pass) shown.push_back(i);
    }
  }
  // All drawn: in the order of their first rank; past the bound, in the order kept.
  if (shown.size() == rows.size()) std::sort(shown.begin(), shown.end());
  size_t left_rows = rows.size() - shown.size(), left_ranks = world;
  for (size_t i : shown) left_ranks -= rows[i].ranks.size();

  // Layout: a header line per row (its ranks and state), then a lane per stream or thread.
  constexpr double LEFT = 130, RIGHT = 890, WIDTH = 900, LANE = 16, HEAD = 15, GAP = 6, TOP = 28;
  const double scale = (RIGHT - LEFT) / static_cast<double>(horizon - from);
  auto x_of = [&](int64_t ns) { return LEFT + static_cast<double>(std::clamp(ns, from, horizon) - from) * scale; };
  double height = TOP;
  for (size_t i : shown) height += HEAD + LANE * static_cast<double>(std::max<size_t>(rows[i].lanes.size(), 1)) + GAP;
  height += 4;
  std::string out = fmt::format(
      "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" viewBox=\"0 0 {0} {1:.0f}\">\n"
      "<text x=\"{2:.1f}\" y=\"12\">{3}</text><text x=\"{4:.1f}\" y=\"12\" text-anchor=\"end\">{5}</text>\n"
      "<g class=\"stall\"><line x1=\"{6:.1f}\" y1=\"16\" x2=\"{6:.1f}\" y2=\"{1:.0f}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>"
      "<text x=\"{6:.1f}\" y=\"24\" text-anchor=\"end\" fill=\"#c00\">stall {7} </text></g>\n",
      WIDTH, height, LEFT, html_escape(format_duration(from)), RIGHT, html_escape(format_duration(horizon)), x_of(stall),
      html_escape(format_duration(stall)));
  double y = TOP;
  for (size_t i : shown) {
    const TimelineRow& row = rows[i];
    const std::string ranks = node_label(WaitForGraph::Node{row.ranks, "", false});
    const std::string& state = graph.nodes[row.node].state;
    std::string head = ranks + ": " + state.substr(0, state.find('\n'));
    if (!row.end.empty() && state.rfind(row.end.substr(0, row.end.find(' ')), 0) == 0) head = ranks + ": " + row.end;
    else if (!row.end.empty()) head += ", " + row.end;
    if (row.hidden > 0) head += fmt::format(" ({} earlier op{} in the window not drawn)", row.hidden, row.hidden == 1 ? "" : "s");
    out += fmt::format("<g class=\"timeline-row\" data-ranks=\"{}\"><text x=\"4\" y=\"{:.1f}\" class=\"head\">{}</text>\n",
                       html_escape(format_rank_set(row.ranks)), y + 11, html_escape(head));
    double lane_y = y + HEAD;
    for (const TimelineLane& lane : row.lanes) {
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" class=\"lane\">{}</text>\n", LEFT - 6,
                         lane_y + 11, html_escape(lane.track));
      for (const sim::TimelineSpan& span : lane.spans) {
        const double x1 = x_of(span.start_ns), x2 = std::max(x_of(span.end_ns), x1 + 1);
        const std::string name = span.name + (span.stuck ? " (stuck)" : "");
        const char* fill = span.stuck ? "#d33" : span.comm ? "#7aa7d8" : "#b5d3a0";
        out += fmt::format("<g class=\"span{}\"><title>{} {}-{}</title><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                           "height=\"{:.0f}\" fill=\"{}\" stroke=\"#fff\"/>",
                           span.stuck ? " stuck" : "", html_escape(name), html_escape(format_duration(span.start_ns)),
                           span.stuck ? "" : html_escape(format_duration(span.end_ns)), x1, lane_y + 1, x2 - x1, LANE - 2, fill);
        // The name inside when it fits (monospace 10px: 6px a character).
        if (x2 - x1 >= 6.0 * static_cast<double>(name.size()) + 4) {
          out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>", x1 + 2, lane_y + 11,
                             span.stuck ? " fill=\"#fff\"" : "", html_escape(name));
        }
        out += "</g>\n";
      }
      lane_y += LANE;
    }
    if (row.end_ns >= from && row.end_ns <= horizon) {
      const double x = x_of(row.end_ns);
      out += fmt::format("<line class=\"end\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#222\" "
                         "stroke-width=\"2\"/>\n", x, y + HEAD, x, y + HEAD + LANE * static_cast<double>(std::max<size_t>(row.lanes.size(), 1)));
    }
    out += "</g>\n";
    y += HEAD + LANE * static_cast<double>(std::max<size_t>(row.lanes.size(), 1)) + GAP;
  }
  out += "</svg>\n";
  std::string note = fmt::format("<p class=\"timeline-note\">The last {} before the stall at {}: the last {} ops of each "
                                 "stalled rank and what ran beside them; stuck ops run to the end, red.",
                                 html_escape(format_duration(stall - from)), html_escape(format_duration(stall)), LAST_OPS);
  if (left_rows > 0) {
    note += fmt::format(" {} more row{} ({} rank{}) not drawn: at most {} rows, the ranks waited for first, then "
                        "the waiting ones.",
                        left_rows, left_rows == 1 ? "" : "s", left_ranks, left_ranks == 1 ? "" : "s", MAX_TIMELINE_ROWS);
  }
  return "<div class=\"timeline\">\n" + note + "</p>\n" + out + "</div>\n";
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

// The page around a report's body: its title, heading, styles and footer.
std::string html_page(std::string_view title, std::string_view heading, const std::string& body) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 2em; color: #222; }}\n"
      "section.input {{ border-top: 1px solid #ccc; padding-top: 0.5em; }}\n"
      "section.input[data-verdict=\"ok\"] h2 {{ color: #2a7; }}\n"
      "section.input h2 {{ font-size: 1.1em; color: #c22; font-family: monospace; }}\n"
      "pre {{ background: #f6f6f6; padding: 0.5em; overflow-x: auto; }}\n"
      "pre.source .line {{ display: block; }}\n"
      "pre.explanation {{ white-space: pre-wrap; overflow-wrap: anywhere; }}\n"
      "svg.wait-for text, svg.timeline text {{ font-size: 10px; font-family: monospace; }}\n"
      "svg.timeline text.lane {{ fill: #666; }}\n"
      "p.timeline-note {{ font-size: 0.9em; color: #444; }}\n"
      "table.matrix {{ border-collapse: collapse; font-family: monospace; }}\n"
      "table.matrix td, table.matrix th {{ border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }}\n"
      "table.matrix tr[data-verdict=\"ok\"] td.verdict {{ color: #2a7; }}\n"
      "table.matrix td.verdict {{ color: #c22; text-align: left; }}\n"
      "table.matrix td.detail {{ text-align: left; font-size: 0.85em; }}\n"
      "</style>\n</head>\n<body>\n<h1>{}</h1>\n{}<footer>lockstep {}</footer>\n</body>\n</html>\n",
      html_escape(title), html_escape(heading), body, lockstep_version());
}

}  // namespace

std::string report_html(const std::vector<InputReport>& reports, const sim::EngineOptions& engine) {
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
      const WaitForGraph graph = fold_wait_for(scenario, bug);
      body += graph_svg(graph, fmt::format("arrow-{}-{}", &report - reports.data() + 1, c + 1));
      bool diverged = false;
      const sim::ExecutionResult replayed = replay_execution(scenario, bug.choices, engine, diverged);
      if (diverged) {
        body += "<p class=\"timeline-note\">No timeline: the bug's schedule does not replay.</p>\n";
      } else {
        body += timeline_svg(scenario, bug, graph, replayed);
      }
      body += "</div>\n";
    }
    body += "</section>\n";
  }
  return html_page("lockstep check",
                   fmt::format("lockstep check: {} input{}, {} with bugs", reports.size(), reports.size() == 1 ? "" : "s",
                               with_bugs),
                   body);
}

namespace {

// A point's cells: its parameters, then its verdict (and what a verdict alone does not say).
std::string matrix_row(const SweepMatrix::Point& point) {
  std::string row = fmt::format("<tr class=\"point\" data-verdict=\"{}\">", html_escape(point.verdict));
  for (const std::string& value : point.values) row += "<td>" + html_escape(value) + "</td>";
  row += "<td class=\"verdict\">" + html_escape(point.verdict) + "</td>";
  return row + "<td class=\"detail\">" + html_escape(point.detail) + "</td></tr>\n";
}

std::string matrix_table(const SweepMatrix& matrix, const std::vector<size_t>& points) {
  std::string table = "<table class=\"matrix\">\n<tr>";
  for (const std::string& axis : matrix.axes) table += "<th>" + html_escape(axis) + "</th>";
  table += "<th>verdict</th><th></th></tr>\n";
  for (size_t i : points) table += matrix_row(matrix.points[i]);
  return table + "</table>\n";
}

}  // namespace

std::string sweep_html(const SweepMatrix& matrix) {
  std::string body;
  if (!matrix.where.empty()) body += "<p>points where " + html_escape(matrix.where) + "</p>\n";
  std::vector<bool> in_class(matrix.points.size(), false);
  size_t with_bugs = 0;
  for (size_t c = 0; c < matrix.classes.size(); ++c) {
    const SweepMatrix::Class& cls = matrix.classes[c];
    for (size_t i : cls.points) in_class[i] = true;
    with_bugs += cls.points.size();
    body += fmt::format("<div class=\"bug-class\" data-kind=\"{}\" data-points=\"{}\">\n<h3>class {} of {}: {}, {} point{}</h3>\n",
                        html_escape(cls.verdict), cls.points.size(), c + 1, matrix.classes.size(), html_escape(cls.verdict),
                        cls.points.size(), cls.points.size() == 1 ? "" : "s");
    body += "<pre class=\"explanation\">" + html_escape(cls.explanation) + "</pre>\n";
    body += matrix_table(matrix, cls.points) + "</div>\n";
  }
  std::vector<size_t> rest;
  for (size_t i = 0; i < matrix.points.size(); ++i) {
    if (!in_class[i]) rest.push_back(i);
  }
  if (!rest.empty()) {
    body += fmt::format("<div class=\"no-bug\">\n<h3>no bug found: {} point{}</h3>\n", rest.size(), rest.size() == 1 ? "" : "s");
    body += matrix_table(matrix, rest) + "</div>\n";
  }
  return html_page("lockstep sweep",
                   fmt::format("lockstep sweep {}: {} point{}, {} with bugs ({} class{})", matrix.input, matrix.points.size(),
                               matrix.points.size() == 1 ? "" : "s", with_bugs, matrix.classes.size(),
                               matrix.classes.size() == 1 ? "" : "es"),
                   body);
}

}  // namespace lockstep::checker
