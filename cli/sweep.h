// `lockstep sweep`: one scenario checked at every point of a cross product of parameter values
// (docs/cli.md, "sweep"), as a CI gate over the parallel layouts a team may run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/explore.h"
#include "sim/loader.h"

namespace lockstep::cli {

struct Options;

// One parameter swept and its values, as written: `-D pp=2,4,8` or `-D mb=1..16`.
struct SweepAxis {
  std::string name;
  std::vector<std::string> values;  // each a -D value (an expression)
};

// "name=v1,v2,..." or "name=LO..HI" (integers, LO <= HI); nullopt and `error` when malformed
// or longer than `max_values`.
std::optional<SweepAxis> parse_sweep_axis(std::string_view text, size_t max_values, std::string& error);

struct SweepOptions {
  std::vector<SweepAxis> axes;
  std::string where;         // an expression over the axes' names: a point is kept when nonzero
  size_t max_points = 10'000;  // --max-points: bound on the points after --where
};

// The points of the cross product (the last axis varies fastest) that --where keeps, each as the
// -D overrides that make it. nullopt and `error` when --where does not compile or a value is not
// an integer where --where needs one, or when more than max_points are kept.
std::optional<std::vector<std::vector<sim::ParamOverride>>> sweep_points(const SweepOptions& sweep, std::string& error);

// One point's outcome, all the report needs of it: what a worker of a sweep over MPI sends back.
struct PointSummary {
  bool failed = false;                // it did not load, or the scenario failed at run time
  std::vector<std::string> errors;    // formatted diagnostics
  std::string error_line;             // the first error on one line: "file:line:col: message"
  std::vector<std::string> warnings;
  std::string verdict;                // "ok", "deadlock", ...
  bool exhaustive = false;
  uint64_t executions = 0;
  std::string bound_hit;
  std::vector<std::string> bugs;      // each bug's summary
  std::string class_key;              // of the first bug: its verdict and where it stalls
  std::string text;                   // check's report of the point (JUnit's failure text)

  std::string to_json() const;
  static std::optional<PointSummary> from_json(std::string_view text);
};

// Loads and checks one point, its search on `inner_jobs` threads.
PointSummary check_point(const Options& options, const std::string& input, const std::vector<sim::ParamOverride>& point,
                         unsigned inner_jobs);

// The points of a sweep, each with its -D overrides (fixed ones of options included), after
// checking that the scenario loads and has every swept parameter; nullopt after saying why.
std::optional<std::vector<std::vector<sim::ParamOverride>>> prepare_sweep(const Options& options, const SweepOptions& sweep,
                                                                          std::ostream& err);

// Every point checked on this process (in parallel under --jobs).
std::vector<PointSummary> check_points(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points);

// The matrix (and --json, --junit) and the exit code.
int report_sweep(const Options& options, const SweepOptions& sweep, const std::vector<std::vector<sim::ParamOverride>>& points,
                 const std::vector<PointSummary>& results, std::ostream& out, std::ostream& err);

// Runs the sweep of options.inputs[0]: prints the matrix (and writes --json, --junit), returns
// the exit code (1 when a point has a bug, 2 when one fails to load, 3 when one is inconclusive).
int cmd_sweep(const Options& options, const SweepOptions& sweep, std::ostream& out, std::ostream& err);

// `lockstep sweep`: every -D of `options` is an axis; --where and --max-points from `options`.
int run_sweep(const Options& options, std::ostream& out, std::ostream& err);

// The sweep `options` asks for, and the options each point is checked with (no -D: the axes
// carry them); EXIT_NO_BUG, or EXIT_BAD_INPUT after saying why.
int sweep_options_of(const Options& options, SweepOptions& sweep, Options& point_options, std::ostream& err);

}  // namespace lockstep::cli
