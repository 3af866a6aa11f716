// `mpirun -np N lockstep sweep ... --mpi`: the points of a sweep spread over MPI ranks. Built
// into lockstep-mpi only (the one binary that links MPI); `lockstep` hands --mpi over to it.
//
// Rank 0 hands out points one at a time to whichever rank asks (the others ask again as they
// finish one, so a rank with slow points takes fewer) and checks points itself on a thread of
// its own; each result comes back as a PointSummary in JSON. Rank 0 prints the report, the same
// bytes a sweep on one process prints, and every rank exits with its code.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/command_line.h"
#include "cli/sweep.h"

namespace lockstep::cli {
namespace {

constexpr int TAG_RESULT = 1;  // worker -> rank 0: int64 index (-1: none yet), then the summary's JSON
constexpr int TAG_WORK = 2;    // rank 0 -> worker: int64 index, -1 when no point is left

void send_result(int64_t index, const std::string& json) {
  std::string message(sizeof(index), '\0');
  std::memcpy(message.data(), &index, sizeof(index));
  message += json;
  MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
}

int worker(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points) {
  send_result(-1, "");
  for (;;) {
    int64_t index = -1;
    MPI_Recv(&index, 1, MPI_INT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (index < 0 || static_cast<size_t>(index) >= points.size()) return 0;
    const PointSummary result = check_point(options, options.inputs.front(), points[static_cast<size_t>(index)], 1);
    send_result(index, result.to_json());
  }
}

// Rank 0: serves the others from the main thread (the only one that calls MPI) while a thread
// of its own checks points from the same counter.
std::vector<PointSummary> coordinate(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points,
                                     int ranks, std::ostream& err, bool& lost) {
  std::vector<PointSummary> results(points.size());
  std::atomic<size_t> next{0};
  std::thread local([&] {
    for (size_t i = next++; i < points.size(); i = next++) results[i] = check_point(options, options.inputs.front(), points[i], 1);
  });
  int working = ranks - 1;
  while (working > 0) {
    MPI_Status status;
    MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &status);
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string message(static_cast<size_t>(bytes), '\0');
    MPI_Recv(message.data(), bytes, MPI_CHAR, status.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int64_t index = -1;
    if (message.size() >= sizeof(index)) std::memcpy(&index, message.data(), sizeof(index));
    if (index >= 0 && static_cast<size_t>(index) < points.size()) {
      std::optional<PointSummary> got = PointSummary::from_json(std::string_view(message).substr(sizeof(index)));
      if (got) {
        results[static_cast<size_t>(index)] = std::move(*got);
      } else {
        err << "lockstep: error: rank " << status.MPI_SOURCE << " sent an unreadable result for point " << index << "\n";
        lost = true;
      }
    }
    const size_t given = next++;
    int64_t work = given < points.size() ? static_cast<int64_t>(given) : -1;
    MPI_Send(&work, 1, MPI_INT64_T, status.MPI_SOURCE, TAG_WORK, MPI_COMM_WORLD);
    if (work < 0) --working;
  }
  local.join();
  return results;
}

int sweep_over_mpi(const Options& options, std::ostream& out, std::ostream& err) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // Every rank derives the same points; only rank 0 speaks.
  std::ostringstream quiet_out, quiet_err;
  std::ostream& my_out = rank == 0 ? out : quiet_out;
  std::ostream& my_err = rank == 0 ? err : quiet_err;
  SweepOptions sweep;
  Options point_options = options;
  int code = sweep_options_of(options, sweep, point_options, my_err);
  std::optional<std::vector<std::vector<sim::ParamOverride>>> points;
  if (code == EXIT_NO_BUG) {
    points = prepare_sweep(point_options, sweep, my_err);
    if (!points) code = EXIT_BAD_INPUT;
  }
  if (code == EXIT_NO_BUG) {
    if (rank == 0) {
      bool lost = false;
      const std::vector<PointSummary> results = coordinate(point_options, *points, ranks, my_err, lost);
      code = report_sweep(point_options, sweep, *points, results, my_out, my_err);
      if (lost) code = EXIT_BAD_INPUT;
    } else {
      worker(point_options, *points);
    }
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return code;
}

}  // namespace
}  // namespace lockstep::cli

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const lockstep::cli::CommandLine line = lockstep::cli::parse_command_line(args);
  if (line.verb == "sweep" && line.options.sweep_mpi) return lockstep::cli::sweep_over_mpi(line.options, std::cout, std::cerr);
  return lockstep::cli::run_cli(args, std::cout, std::cerr);
}
