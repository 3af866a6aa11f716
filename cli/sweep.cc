// lockstep sweep: the points of a cross product of parameter values, each loaded and checked;
// the matrix as text, JSON and JUnit, points that show the same bug grouped.
#include "cli/sweep.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checker/html_report.h"
#include "checker/report.h"
#include "cli/cli.h"
#include "cli/command_line.h"
#include "sim/expr.h"
#include "sim/output_file.h"

namespace lockstep::cli {
namespace {

std::optional<int64_t> integer_of(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A value as an integer, as -D reads it ("4", "2 * 3", "1KiB").
std::optional<int64_t> value_of(const std::string& text) {
  sim::ExprSource source;
  source.text = text;
  source.exact_columns = false;
  source.any_unit = true;
  std::vector<sim::Diagnostic> diagnostics;
  const std::optional<sim::Expr> expr = sim::parse_expr(source, diagnostics);
  if (!expr || !expr->is_constant()) return std::nullopt;
  return expr->value;
}

std::string point_name(const std::vector<sim::ParamOverride>& point) {
  std::string name;
  for (const sim::ParamOverride& o : point) name += (name.empty() ? "" : " ") + o.name + "=" + o.value;
  return name;
}

// An error on one line, without its severity or source: "file:line:col: message".
std::string one_line(const sim::Diagnostic& d) { return sim::format_location(d.file, d.loc) + ": " + d.message; }

// What makes two points' bugs the same across layouts: the verdict and where in the source the
// ranks are stuck (or which ops disagree, and in what), without rank numbers.
std::string class_key(const sim::Scenario& scenario, const checker::Bug& bug) {
  std::set<std::string> where;
  const auto at = [&](const sim::OpRecord& rec) {
    return rec.op.stmt != nullptr ? scenario.location(rec.op.stmt->loc) : std::string(sim::op_kind_name(rec.op.kind));
  };
  if (bug.mismatch) {
    where.insert(at(bug.mismatch->op_a) + " / " + at(bug.mismatch->op_b) + " differ in " + bug.mismatch->field);
  }
  for (const sim::StuckOp& s : bug.stuck) where.insert(at(s.op));
  std::string key(sim::verdict_name(bug.kind));
  for (const std::string& w : where) key += (key.empty() ? "" : " ") + w;
  return key;
}

}  // namespace

PointSummary check_point(const Options& options, const std::string& input, const std::vector<sim::ParamOverride>& point,
                         unsigned inner_jobs) {
  PointSummary r;
  sim::LoadResult loaded = load_input(input, point, options.load_limits);
  for (const sim::Diagnostic& d : loaded.diagnostics) {
    if (d.severity == sim::Severity::ERROR && r.errors.empty()) r.error_line = one_line(d);
    (d.severity == sim::Severity::ERROR ? r.errors : r.warnings).push_back(sim::format_diagnostic(d, loaded.text));
  }
  if (!loaded.scenario) {
    r.failed = true;
    return r;
  }
  const sim::Scenario scenario = std::move(*loaded.scenario);
  checker::CheckOptions check = options.check;
  check.jobs = inner_jobs;
  checker::InputReport report;
  report.input = input;
  report.seed = options.seed;
  report.scenario = &scenario;
  report.result = checker::check_scenario(scenario, check);
  const checker::CheckResult& c = *report.result;
  if (c.error) {
    r.failed = true;
    r.errors.push_back(sim::format_diagnostic(*c.error, scenario.text));
    r.error_line = one_line(*c.error);
    return r;
  }
  r.verdict = std::string(sim::verdict_name(c.verdict));
  r.exhaustive = c.exhaustive;
  r.executions = c.executions;
  r.bound_hit = c.bound_hit;
  for (const checker::Bug& bug : c.bugs) r.bugs.push_back(bug.summary);
  if (!c.bugs.empty()) {
    r.class_key = class_key(scenario, c.bugs.front());
    r.text = checker::report_text(report, false);
  }
  return r;
}

std::string PointSummary::to_json() const {
  return nlohmann::json{{"failed", failed},     {"errors", errors},         {"error_line", error_line}, {"warnings", warnings},
                        {"verdict", verdict},   {"exhaustive", exhaustive}, {"executions", executions},
                        {"bound_hit", bound_hit}, {"bugs", bugs},           {"class_key", class_key},
                        {"text", text}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<PointSummary> PointSummary::from_json(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    PointSummary r;
    r.failed = j.at("failed").get<bool>();
    r.errors = j.at("errors").get<std::vector<std::string>>();
    r.error_line = j.at("error_line").get<std::string>();
    r.warnings = j.at("warnings").get<std::vector<std::string>>();
    r.verdict = j.at("verdict").get<std::string>();
    r.exhaustive = j.at("exhaustive").get<bool>();
    r.executions = j.at("executions").get<uint64_t>();
    r.bound_hit = j.at("bound_hit").get<std::string>();
    r.bugs = j.at("bugs").get<std::vector<std::string>>();
    r.class_key = j.at("class_key").get<std::string>();
    r.text = j.at("text").get<std::string>();
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

namespace {

std::string json_of(const std::string& input, const SweepOptions& sweep, const std::vector<std::vector<sim::ParamOverride>>& points,
                    const std::vector<PointSummary>& results,
                    const std::vector<std::pair<std::string, std::vector<size_t>>>& classes) {
  using Json = nlohmann::ordered_json;
  Json out;
  out["sweep"] = input;
  out["version"] = checker::lockstep_version();
  Json axes = Json::array();
  for (const SweepAxis& axis : sweep.axes) axes.push_back(Json{{"name", axis.name}, {"values", axis.values}});
  out["axes"] = std::move(axes);
  out["where"] = sweep.where;
  Json rows = Json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const PointSummary& r = results[i];
    Json p;
    Json params = Json::object();
    for (const sim::ParamOverride& o : points[i]) params[o.name] = o.value;
    p["params"] = std::move(params);
    if (r.failed) {
      p["verdict"] = "error";
      p["errors"] = r.errors;
    } else {
      p["verdict"] = r.verdict;
      p["exhaustive"] = r.exhaustive;
      p["executions"] = r.executions;
      p["bugs"] = r.bugs;
    }
    rows.push_back(std::move(p));
  }
  out["points"] = std::move(rows);
  Json cls = Json::array();
  for (const auto& [key, members] : classes) {
    const PointSummary& first = results[members.front()];
    cls.push_back(Json{{"verdict", first.verdict}, {"key", key}, {"points", members}, {"summary", first.bugs.front()}});
  }
  out["classes"] = std::move(cls);
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string junit_of(const std::string& input, const std::vector<std::vector<sim::ParamOverride>>& points,
                     const std::vector<PointSummary>& results) {
  size_t failures = 0;
  std::string cases;
  for (size_t i = 0; i < results.size(); ++i) {
    const PointSummary& r = results[i];
    cases += fmt::format("  <testcase classname=\"{}\" name=\"{}\"", checker::xml_escape(input), checker::xml_escape(point_name(points[i])));
    std::string failure;
    if (r.failed) {
      for (const std::string& e : r.errors) failure += e;
    } else if (r.verdict != "ok") {
      failure = r.text.empty() ? r.verdict + " (" + r.bound_hit + ")\n" : r.text;
    }
    if (failure.empty()) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    const std::string verdict = r.failed ? "error" : r.verdict;
    cases += fmt::format(">\n    <failure message=\"{}\">{}</failure>\n  </testcase>\n", checker::xml_escape(verdict),
                         checker::xml_escape(failure));
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"lockstep sweep {}\" tests=\"{}\" "
                     "failures=\"{}\">\n{}</testsuite>\n",
                     checker::xml_escape(input), results.size(), failures, cases);
}

checker::SweepMatrix matrix_of(const std::string& input, const SweepOptions& sweep,
                               const std::vector<std::vector<sim::ParamOverride>>& points,
                               const std::vector<PointSummary>& results,
                               const std::vector<std::pair<std::string, std::vector<size_t>>>& classes) {
  checker::SweepMatrix matrix;
  matrix.input = input;
  matrix.where = sweep.where;
  for (const SweepAxis& axis : sweep.axes) matrix.axes.push_back(axis.name);
  for (size_t i = 0; i < results.size(); ++i) {
    const PointSummary& r = results[i];
    checker::SweepMatrix::Point point;
    for (size_t a = 0; a < sweep.axes.size(); ++a) point.values.push_back(points[i][a].value);
    if (r.failed) {
      point.verdict = "error";
      point.detail = r.error_line;
    } else {
      point.verdict = r.verdict;
      if (r.verdict == "inconclusive") point.detail = r.bound_hit;
      else if (!r.bugs.empty()) point.detail = r.bugs.front();
    }
    matrix.points.push_back(std::move(point));
  }
  for (const auto& [key, members] : classes) {
    const PointSummary& first = results[members.front()];
    matrix.classes.push_back({first.verdict, members, first.text});
  }
  return matrix;
}

bool write_text_file(const std::string& path, const std::string& text, std::ostream& err) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  if (file.good()) return true;
  err << "lockstep: error: cannot write " << path << "\n";
  return false;
}

}  // namespace

int sweep_options_of(const Options& options, SweepOptions& sweep, Options& point_options, std::ostream& err) {
  sweep.where = options.sweep_where;
  sweep.max_points = static_cast<size_t>(options.sweep_max_points);
  for (const sim::ParamOverride& o : options.overrides) {
    std::string error;
    std::optional<SweepAxis> axis = parse_sweep_axis(o.name + "=" + o.value, sweep.max_points, error);
    if (!axis) {
      err << "lockstep: error: " << error << "\n";
      return EXIT_BAD_INPUT;
    }
    const auto same = [&](const SweepAxis& a) { return a.name == axis->name; };
    if (std::any_of(sweep.axes.begin(), sweep.axes.end(), same)) {
      err << "lockstep: error: -D " << o.name << " is given twice\n";
      return EXIT_BAD_INPUT;
    }
    sweep.axes.push_back(std::move(*axis));
  }
  point_options = options;
  point_options.overrides.clear();
  return EXIT_NO_BUG;
}

int run_sweep(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.mpi) {
    err << "lockstep: error: --mpi: this lockstep hands a sweep over MPI to lockstep-mpi beside it, which is "
           "missing (it is built where CMake finds MPI: scripts/setup installs libopenmpi-dev)\n";
    return EXIT_BAD_INPUT;
  }
  SweepOptions sweep;
  Options point_options;
  if (const int code = sweep_options_of(options, sweep, point_options, err); code != EXIT_NO_BUG) return code;
  return cmd_sweep(point_options, sweep, out, err);
}

std::optional<SweepAxis> parse_sweep_axis(std::string_view text, size_t max_values, std::string& error) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    error = fmt::format("-D {}: expected NAME=V1,V2,... or NAME=LO..HI", text);
    return std::nullopt;
  }
  SweepAxis axis;
  axis.name = std::string(text.substr(0, eq));
  const std::string_view values = text.substr(eq + 1);
  if (const size_t dots = values.find(".."); dots != std::string_view::npos) {
    const std::optional<int64_t> lo = integer_of(values.substr(0, dots));
    const std::optional<int64_t> hi = integer_of(values.substr(dots + 2));
    if (!lo || !hi || *lo > *hi) {
      error = fmt::format("-D {}: a range is LO..HI with integers LO <= HI", text);
      return std::nullopt;
    }
    if (static_cast<uint64_t>(*hi - *lo) >= max_values) {
      error = fmt::format("-D {}: more than {} values (raise --max-points)", text, max_values);
      return std::nullopt;
    }
    for (int64_t v = *lo; v <= *hi; ++v) axis.values.push_back(std::to_string(v));
    return axis;
  }
  size_t start = 0;
  while (start <= values.size()) {
    const size_t comma = std::min(values.find(',', start), values.size());
    const std::string_view value = values.substr(start, comma - start);
    if (value.empty()) {
      error = fmt::format("-D {}: an empty value", text);
      return std::nullopt;
    }
    axis.values.emplace_back(value);
    if (axis.values.size() > max_values) {
      error = fmt::format("-D {}: more than {} values (raise --max-points)", text, max_values);
      return std::nullopt;
    }
    start = comma + 1;
  }
  return axis;
}

std::optional<std::vector<std::vector<sim::ParamOverride>>> sweep_points(const SweepOptions& sweep, std::string& error) {
  std::optional<sim::Expr> where;
  std::vector<sim::ExprName> names;
  for (size_t i = 0; i < sweep.axes.size(); ++i) names.push_back({sweep.axes[i].name, static_cast<int32_t>(i)});
  if (!sweep.where.empty()) {
    sim::ExprSource source;
    source.text = sweep.where;
    source.exact_columns = false;
    source.names = names;
    source.context = "in --where";
    std::vector<sim::Diagnostic> diagnostics;
    where = sim::parse_expr(source, diagnostics);
    if (!where) {
      error = diagnostics.empty() ? "--where does not compile" : diagnostics.front().message;
      return std::nullopt;
    }
  }
  // The axes' values as integers, where --where reads them.
  std::vector<std::vector<int64_t>> numbers(sweep.axes.size());
  for (size_t a = 0; a < sweep.axes.size() && where; ++a) {
    for (const std::string& v : sweep.axes[a].values) {
      const std::optional<int64_t> n = value_of(v);
      if (!n) {
        error = fmt::format("--where needs integers, and -D {}={} is not one", sweep.axes[a].name, v);
        return std::nullopt;
      }
      numbers[a].push_back(*n);
    }
  }
  std::vector<std::vector<sim::ParamOverride>> points;
  std::vector<size_t> at(sweep.axes.size(), 0);
  std::vector<int64_t> env(sweep.axes.size(), 0);
  for (;;) {
    bool keep = true;
    if (where) {
      for (size_t a = 0; a < at.size(); ++a) env[a] = numbers[a][at[a]];
      try {
        keep = sim::eval_expr(*where, env) != 0;
      } catch (const sim::EvalError& e) {
        error = fmt::format("in --where: {}", e.what());
        return std::nullopt;
      }
    }
    if (keep) {
      if (points.size() == sweep.max_points) {
        error = fmt::format("the sweep has more than {} points (raise --max-points)", sweep.max_points);
        return std::nullopt;
      }
      std::vector<sim::ParamOverride> point;
      for (size_t a = 0; a < at.size(); ++a) point.push_back({sweep.axes[a].name, sweep.axes[a].values[at[a]]});
      points.push_back(std::move(point));
    }
    size_t a = at.size();
    while (a > 0 && ++at[a - 1] == sweep.axes[a - 1].values.size()) at[--a] = 0;
    if (a == 0) break;
  }
  return points;
}

std::optional<std::vector<std::vector<sim::ParamOverride>>> prepare_sweep(const Options& options, const SweepOptions& sweep,
                                                                          std::ostream& err) {
  const std::string& input = options.inputs.front();
  std::string error;
  std::optional<std::vector<std::vector<sim::ParamOverride>>> points = sweep_points(sweep, error);
  if (!points) {
    err << "lockstep: error: " << error << "\n";
    return std::nullopt;
  }
  // Every axis must name a parameter: said once, not at every point.
  sim::LoadResult base = load_input(input, options.overrides, options.load_limits);
  if (!base.scenario) {
    for (const sim::Diagnostic& d : base.diagnostics) err << sim::format_diagnostic(d, base.text);
    return std::nullopt;
  }
  std::vector<std::string> names;
  for (const sim::Param& p : base.scenario->params) names.push_back(p.name);
  for (const SweepAxis& axis : sweep.axes) {
    if (std::find(names.begin(), names.end(), axis.name) != names.end()) continue;
    err << fmt::format("lockstep: error: {} has no parameter '{}' to sweep{}\n", input, axis.name,
                       names.empty() ? "" : "; parameters: " + fmt::format("{}", fmt::join(names, ", ")));
    return std::nullopt;
  }
  // A fixed -D beside the swept ones applies to every point.
  for (std::vector<sim::ParamOverride>& point : *points) {
    for (const sim::ParamOverride& o : options.overrides) point.push_back(o);
  }
  return points;
}

std::vector<PointSummary> check_points(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points) {
  std::vector<PointSummary> results(points.size());
  // Points in parallel under --jobs, each searched on one thread; alone, a point gets them all.
  const unsigned jobs = std::max(1u, std::min<unsigned>(options.check.jobs, static_cast<unsigned>(points.size())));
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < points.size(); i = next++) {
      results[i] = check_point(options, options.inputs.front(), points[i], jobs > 1 ? 1 : options.check.jobs);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return results;
}

int report_sweep(const Options& options, const SweepOptions& sweep, const std::vector<std::vector<sim::ParamOverride>>& points,
                 const std::vector<PointSummary>& results, std::ostream& out, std::ostream& err) {
  const std::string& input = options.inputs.front();
  const bool text_to_stdout = !(options.json_path && *options.json_path == "-");
  std::ostream& text = text_to_stdout ? out : err;
  size_t bugs = 0, failed = 0, inconclusive = 0;
  std::map<std::string, std::vector<size_t>> by_key;
  std::vector<std::string> keys;  // in the order first met
  std::set<std::string> printed;  // each warning and error once (an unknown parameter fails every point alike)
  std::vector<size_t> widths;
  for (const SweepAxis& axis : sweep.axes) {
    size_t w = axis.name.size();
    for (const std::string& v : axis.values) w = std::max(w, v.size());
    widths.push_back(w);
  }
  text << fmt::format("sweep {}: {} point{}", input, results.size(), results.size() == 1 ? "" : "s");
  if (!sweep.where.empty()) text << fmt::format(" (--where {})", sweep.where);
  text << "\n ";
  for (size_t a = 0; a < sweep.axes.size(); ++a) text << fmt::format(" {:>{}}", sweep.axes[a].name, widths[a]);
  text << "  verdict\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const PointSummary& r = results[i];
    if (!options.quiet) {
      for (const std::string& w : r.warnings) {
        if (printed.insert(w).second) err << w;
      }
    }
    text << " ";
    for (size_t a = 0; a < sweep.axes.size(); ++a) text << fmt::format(" {:>{}}", points[i][a].value, widths[a]);
    if (r.failed) {
      // The row names the point's first error; stderr gives each error in full once, under
      // the first point that had it.
      ++failed;
      text << "  error";
      if (!r.error_line.empty()) text << "  " << r.error_line;
      text << "\n";
      bool headed = false;
      for (const std::string& e : r.errors) {
        if (!printed.insert(e).second) continue;
        if (!headed) err << fmt::format("lockstep: at {}:\n", point_name(points[i]));
        headed = true;
        err << e;
      }
      continue;
    }
    std::string line = r.verdict;
    if (r.verdict == "inconclusive") {
      ++inconclusive;
      line += " (" + r.bound_hit + ")";
    } else if (r.verdict != "ok") {
      ++bugs;
      auto [it, fresh] = by_key.try_emplace(r.class_key);
      if (fresh) keys.push_back(r.class_key);
      it->second.push_back(i);
      line += fmt::format(" [class {}]", std::find(keys.begin(), keys.end(), r.class_key) - keys.begin() + 1);
    }
    text << "  " << line << "\n";
  }
  std::vector<std::pair<std::string, std::vector<size_t>>> classes;
  for (const std::string& key : keys) classes.emplace_back(key, by_key[key]);
  for (size_t k = 0; k < classes.size(); ++k) {
    const std::vector<size_t>& members = classes[k].second;
    text << fmt::format("class {}: {} point{}, first {}\n  {}\n", k + 1, members.size(), members.size() == 1 ? "" : "s",
                        point_name(points[members.front()]), results[members.front()].bugs.front());
  }
  text << fmt::format("{} point{}: {} with bugs ({} class{}), {} inconclusive{}\n", results.size(),
                      results.size() == 1 ? "" : "s", bugs, classes.size(), classes.size() == 1 ? "" : "es",
                      inconclusive, failed > 0 ? fmt::format(", {} failed to load", failed) : "");

  bool bad = failed > 0;
  if (options.json_path) {
    const std::string json = json_of(input, sweep, points, results, classes);
    if (*options.json_path == "-") out << json;
    else if (!write_text_file(*options.json_path, json, err)) bad = true;
  }
  if (options.junit_path && !write_text_file(*options.junit_path, junit_of(input, points, results), err)) bad = true;
  if (options.html_path) {
    const std::string problem = sim::write_output_file(*options.html_path, checker::sweep_html(matrix_of(input, sweep, points, results, classes)));
    if (!problem.empty()) {
      err << fmt::format("{}: error: cannot write file: {}\n", *options.html_path, problem);
      bad = true;
    }
  }
  if (bad) return EXIT_BAD_INPUT;
  if (bugs > 0) return EXIT_BUG;
  if (inconclusive > 0) return EXIT_INCONCLUSIVE;
  return EXIT_NO_BUG;
}

int cmd_sweep(const Options& options, const SweepOptions& sweep, std::ostream& out, std::ostream& err) {
  const std::optional<std::vector<std::vector<sim::ParamOverride>>> points = prepare_sweep(options, sweep, err);
  if (!points) return EXIT_BAD_INPUT;
  return report_sweep(options, sweep, *points, check_points(options, *points), out, err);
}

}  // namespace lockstep::cli
