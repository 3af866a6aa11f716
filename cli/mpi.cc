// lockstep-mpi: the lockstep command line, with `sweep --mpi` and `check --mpi` spread over MPI
// ranks. The one binary that links MPI; `lockstep` hands --mpi over to it (cli/main.cc).
//
// Rank 0 hands out pieces of work to whichever rank asks (a rank whose pieces are slow takes
// fewer), and works on pieces itself on a thread of its own (the main thread alone calls MPI);
// every piece's result comes back to rank 0 as text:
// - sweep: a piece is a point; its result a PointSummary as JSON;
// - check with dfs: a piece is a part of the search (the parts --jobs cuts the tree into, under
//   the same schedule prefixes); its result a PartResult as JSON, whose bugs rank 0 rebuilds by
//   replaying their schedules. The merge is --jobs' merge. Once no part is left to hand out, a
//   rank that asks for work makes rank 0 ask the rank whose part has run longest to give away
//   the executions it has yet to run under its shallowest choice point with options left
//   (Search::give_away): new parts, after its own in depth-first order.
// - check with dpor: rank 0 runs the search, which gives branches to the ranks that wait for
//   work as --jobs gives them to threads (checker::BranchPort); a piece is a branch, its result
//   the branch's PartResult and its mail to the search that gave it (checker/wire.h).
// - check over several inputs: a piece is an input's whole search.
// A worker that says nothing for --mpi-timeout seconds (it beats every second while it works or
// waits for work) is taken as lost: its pieces go to the others or to rank 0. Rank 0 prints the
// report (with dfs, the same bytes as one process; with dpor, what --jobs prints), and every
// rank still there exits with its code.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <iostream>
#include <list>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/counterexample.h"
#include "checker/explore.h"
#include "checker/search.h"
#include "checker/wire.h"
#include "cli/cli.h"
#include "cli/command_line.h"
#include "cli/sweep.h"

namespace lockstep::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The messages. A piece of work is uint64s: its index (NONE: no piece is left), then what the
// verb needs to run it. A result is bytes: the piece's int64 index (-1: a hello, asking for
// work), then the result's text.
constexpr int TAG_WORK = 1;    // rank 0 -> worker
constexpr int TAG_RESULT = 2;  // worker -> rank 0
constexpr int TAG_ALIVE = 3;   // worker -> rank 0, every BEAT while it works or waits for work: nothing
constexpr int TAG_CODE = 4;    // rank 0 -> worker at the end: the exit code
constexpr int TAG_STEAL = 5;   // rank 0 -> worker: give away part of the piece you run (nothing)
constexpr int TAG_STOLEN = 6;  // worker -> rank 0: the piece's int64 index (-1: none), then what it gave
constexpr int TAG_HALT = 7;    // rank 0 -> worker: the search stopped early, stop the piece (nothing)
constexpr uint64_t NONE = UINT64_MAX;
constexpr auto BEAT = std::chrono::seconds(1);

// Text as a piece's words: its length in bytes, then the bytes.
std::vector<uint64_t> words_of(const std::string& text) {
  std::vector<uint64_t> words(1 + (text.size() + 7) / 8, 0);
  words[0] = text.size();
  if (!text.empty()) std::memcpy(words.data() + 1, text.data(), text.size());
  return words;
}

// The text in words[from...] (words_of); "" where they hold none.
std::string text_of(const std::vector<uint64_t>& words, size_t from) {
  if (from >= words.size() || words[from] > (words.size() - from - 1) * 8) return {};
  std::string text(static_cast<size_t>(words[from]), '\0');
  if (!text.empty()) std::memcpy(text.data(), words.data() + from + 1, text.size());
  return text;
}

// A worker's message to rank 0 (TAG_RESULT, TAG_STOLEN): a piece's int64 index, then text.
void send_to_rank0(int tag, int64_t index, const std::string& text) {
  std::string message(sizeof(index), '\0');
  std::memcpy(message.data(), &index, sizeof(index));
  message += text;
  MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, tag, MPI_COMM_WORLD);
}

// The end of a rank: MPI_Finalize, unless a rank was lost (its fence waits for every rank,
// the lost one too): then the streams are flushed and the process exits at once.
[[noreturn]] void end(int code, bool lost) {
  std::cout.flush();
  std::cerr.flush();
  if (!lost) {
    MPI_Finalize();
    std::exit(code);
  }
  std::_Exit(code);
}

// What a worker gave away of a piece, on the wire: StealBox::Answer as JSON, "" for nothing.
std::string stolen_text(const std::optional<checker::StealBox::Answer>& given) {
  if (!given || given->prefixes.empty()) return {};
  return nlohmann::json{{"prefixes", given->prefixes}, {"bound", given->bound}}.dump();
}

// The answer back from that text: nothing for "", nullopt where the text is no answer.
std::optional<checker::StealBox::Answer> stolen_answer(const std::string& text) {
  checker::StealBox::Answer given;
  if (text.empty()) return given;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  try {
    given.prefixes = j.at("prefixes").get<std::vector<std::vector<uint32_t>>>();
    given.bound = j.at("bound").get<std::vector<uint32_t>>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return given;
}

// A request to give work away, taken if one came: true then.
bool steal_asked() {
  int ready = 0;
  MPI_Iprobe(0, TAG_STEAL, MPI_COMM_WORLD, &ready, MPI_STATUS_IGNORE);
  if (ready == 0) return false;
  MPI_Recv(nullptr, 0, MPI_CHAR, 0, TAG_STEAL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return true;
}

// A worker's end: rank 0's exit code (TAG_CODE, there to take), and whether a rank was lost.
[[noreturn]] void end_as_rank0_says() {
  int code[2] = {EXIT_BAD_INPUT, 1};
  MPI_Recv(code, 2, MPI_INT, 0, TAG_CODE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  end(code[0], code[1] != 0);
}

// Rank 0 told this worker the job is over though it holds work or waits for some: it took the
// worker as lost. Ends it then, at once.
void end_if_told() {
  int ready = 0;
  MPI_Iprobe(0, TAG_CODE, MPI_COMM_WORLD, &ready, MPI_STATUS_IGNORE);
  if (ready != 0) end_as_rank0_says();
}

// A worker waiting for rank 0's message `tag`, answering requests to give work away with
// nothing meanwhile (it runs no piece). Without spinning: a blocking MPI call polls at full
// speed (OpenMPI), which takes a core from rank 0's own worker thread or from a rank still
// working on the same machine. Waiting for work, it beats as a working rank does: rank 0 may
// have none to give for a while (a dpor search gives branches only as it finds them), and a
// silent rank is taken as lost.
void wait_for_rank0(int tag, MPI_Status& status) {
  int ready = 0;
  Clock::time_point beat = Clock::now() + BEAT;
  for (;;) {
    MPI_Iprobe(0, tag, MPI_COMM_WORLD, &ready, &status);
    if (ready != 0) return;
    if (steal_asked()) send_to_rank0(TAG_STOLEN, -1, "");
    if (tag == TAG_WORK) {
      end_if_told();
      if (Clock::now() >= beat) {
        MPI_Send(nullptr, 0, MPI_CHAR, 0, TAG_ALIVE, MPI_COMM_WORLD);
        beat = Clock::now() + BEAT;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A worker rank: asks for work, runs each piece rank 0 sends (on a thread, while this one tells
// rank 0 every BEAT that it is alive and passes on requests to give work away through `box`,
// which `run` hands to the search, and a request to stop to `halt`) until told that none is
// left; then ends with rank 0's exit code.
[[noreturn]] void work(const std::function<std::string(const std::vector<uint64_t>& piece, checker::StealBox& box)>& run,
                       const std::function<void()>& halt = nullptr) {
  send_to_rank0(TAG_RESULT, -1, "");
  for (;;) {
    MPI_Status status;
    wait_for_rank0(TAG_WORK, status);
    int count = 0;
    MPI_Get_count(&status, MPI_UINT64_T, &count);
    std::vector<uint64_t> piece(static_cast<size_t>(std::max(count, 1)), NONE);
    MPI_Recv(piece.data(), count, MPI_UINT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (piece[0] == NONE) break;
    checker::StealBox box;
    std::future<std::string> result = std::async(std::launch::async, run, std::cref(piece), std::ref(box));
    const auto ready = [&] { return result.wait_for(std::chrono::microseconds(200)) == std::future_status::ready; };
    Clock::time_point beat = Clock::now() + BEAT;
    const auto beat_if_due = [&] {
      if (Clock::now() < beat) return;
      MPI_Send(nullptr, 0, MPI_CHAR, 0, TAG_ALIVE, MPI_COMM_WORLD);
      beat = Clock::now() + BEAT;
    };
    while (!ready()) {
      int halting = 0;
      MPI_Iprobe(0, TAG_HALT, MPI_COMM_WORLD, &halting, MPI_STATUS_IGNORE);
      if (halting != 0) {
        MPI_Recv(nullptr, 0, MPI_CHAR, 0, TAG_HALT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (halt) halt();
      }
      if (steal_asked()) {
        box.ask();
        std::optional<checker::StealBox::Answer> given;
        while (!(given = box.take()) && !ready()) beat_if_due();
        if (!given) given = box.take();  // answered just before the piece ended
        send_to_rank0(TAG_STOLEN, static_cast<int64_t>(piece[0]), stolen_text(given));
      }
      beat_if_due();
      end_if_told();
    }
    send_to_rank0(TAG_RESULT, static_cast<int64_t>(piece[0]), result.get());
  }
  MPI_Status status;
  wait_for_rank0(TAG_CODE, status);
  end_as_rank0_says();
}

// Pieces 0..n-1 of one batch: taken by rank 0's thread and for the workers; a piece whose worker
// was lost is put back; each piece's first result counts.
class Pieces {
 public:
  explicit Pieces(size_t n) : done_(n, 0) {}

  std::optional<size_t> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return take_locked();
  }
  // For rank 0's thread: a piece, waiting while every piece is out; nullopt once all are done.
  std::optional<size_t> take_or_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    waiting_ = true;
    changed_.wait(lock, [&] { return !redo_.empty() || next_ < done_.size() || finished_ == done_.size(); });
    waiting_ = false;
    return take_locked();
  }
  // Whether rank 0's thread waits for a piece.
  bool waiting() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return waiting_ && finished_ < done_.size();
  }
  // k more pieces, numbered after the others.
  void add(size_t k) {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_.resize(done_.size() + k, 0);
    changed_.notify_all();
  }
  void put_back(size_t i) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (done_[i] == 0) redo_.push_back(i);
    changed_.notify_all();
  }
  // Whether this is the piece's first result (the one to keep).
  bool finish(size_t i) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (i >= done_.size() || done_[i] != 0) return false;
    done_[i] = 1;
    if (++finished_ == done_.size()) changed_.notify_all();
    return true;
  }
  bool all_done() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return finished_ == done_.size();
  }

 private:
  std::optional<size_t> take_locked() {
    while (!redo_.empty()) {
      const size_t i = redo_.front();
      redo_.pop_front();
      if (done_[i] == 0) return i;
    }
    if (next_ < done_.size()) return next_++;
    return std::nullopt;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_ = 0;
  std::deque<size_t> redo_;
  std::vector<char> done_;
  size_t finished_ = 0;
  bool waiting_ = false;
};

// check's dfs parts: a running piece may give away the executions it has yet to run; `apply`
// takes in what piece i gave and says how many pieces it added, numbered after the others.
struct Stealing {
  static constexpr size_t UNUSABLE = SIZE_MAX;  // apply: no answer rank 0 can use
  std::function<size_t(size_t piece, checker::StealBox::Answer given)> apply;
};

// Rank 0's main thread: hands pieces to the workers, two at a time (a worker starts its next
// while rank 0 reads its last: rank 0's thread shares the cores with them), takes their results,
// and puts back the pieces of a worker silent for longer than the timeout.
class Coordinator {
 public:
  Coordinator(int ranks, double timeout_s, std::ostream& err)
      : workers_(static_cast<size_t>(ranks)), timeout_(std::chrono::duration<double>(timeout_s)), err_(err) {
    for (Worker& w : workers_) w.heard = Clock::now();
    workers_[0].released = true;  // rank 0 is no worker
  }

  // Pieces 0..n-1, each run once: by a worker (`piece` gives what its message carries after
  // the index; `decode` reads its result, nullopt when it cannot) or by rank 0's thread (`local`,
  // with the box its search looks at for requests to give work away). With `stealing`, pieces
  // may be added as running ones give work away: one result per piece, added ones after.
  template <class Result>
  std::vector<Result> run(size_t n, const std::function<std::vector<uint64_t>(size_t)>& piece,
                          const std::function<std::optional<Result>(const std::string&)>& decode,
                          const std::function<Result(size_t, checker::StealBox&)>& local,
                          const Stealing* stealing = nullptr) {
    std::mutex results_mutex;  // rank 0's thread stores results while this one adds pieces
    std::vector<Result> results(n);
    Pieces pieces(n);
    pieces_ = &pieces;
    piece_ = &piece;
    stealing_ = stealing;
    grow_ = [&](size_t k) {
      {
        const std::lock_guard<std::mutex> lock(results_mutex);
        results.resize(results.size() + k);
      }
      pieces.add(k);
    };
    hear_all();  // a worker waiting for its first piece (rank 0 was busy) says nothing meanwhile
    std::thread mine([&] {
      while (const std::optional<size_t> i = pieces.take_or_wait()) {
        checker::StealBox box;
        {
          const std::lock_guard<std::mutex> lock(local_.mutex);
          local_.index = static_cast<int64_t>(*i);
          local_.since = Clock::now();
          local_.box = &box;
        }
        Result r = local(*i, box);
        {
          const std::lock_guard<std::mutex> lock(local_.mutex);
          // Given away before it ended and not yet read (one request is out at a time).
          if (std::optional<checker::StealBox::Answer> unread = box.take()) {
            local_.unread_index = local_.index;
            local_.unread = std::move(unread);
          }
          local_.index = -1;
          local_.box = nullptr;
        }
        if (pieces.finish(*i)) {
          const std::lock_guard<std::mutex> lock(results_mutex);
          results[*i] = std::move(r);
        }
      }
    });
    while (!pieces.all_done()) {
      serve([&](int from, size_t i, const std::string& text) {
        if (!pieces.finish(i)) return;
        std::optional<Result> r = decode(text);
        const std::lock_guard<std::mutex> lock(results_mutex);
        if (r) results[i] = std::move(*r);
        else problem_ = fmt::format("rank {} sent the result of piece {} in a form rank 0 cannot use", from, i);
      });
      steal_for_the_hungry();
    }
    mine.join();
    for (size_t r = 1; r < workers_.size(); ++r) {
      if (workers_[r].hungry) give(static_cast<int>(r));  // none left: released
    }
    pieces_ = nullptr;
    piece_ = nullptr;
    stealing_ = nullptr;
    victim_ = NO_VICTIM;
    return results;
  }

  // dpor: `root` (the search) on a thread of its own while this one hands the branches its
  // search gives (through `port`) to workers that wait for work, one at a time, and gives each
  // result back to the port; a lost worker's branch is explored again. Returns once root has.
  void run_branches(const std::function<void()>& root, checker::BranchPort& port) {
    branches_ = &port;
    hear_all();
    std::atomic<bool> ended{false};
    std::thread mine([&] {
      root();
      ended = true;
    });
    bool halted = false;
    while (!ended) {
      if (!halted && port.halted()) {
        halted = true;  // the branches out stop after their execution under way
        for (size_t r = 1; r < workers_.size(); ++r) {
          if (!workers_[r].lost && !workers_[r].holding.empty()) {
            MPI_Send(nullptr, 0, MPI_CHAR, static_cast<int>(r), TAG_HALT, MPI_COMM_WORLD);
          }
        }
      }
      serve([&](int from, size_t id, const std::string& text) {
        if (port.answer(id, text)) return;
        // Explored again elsewhere; the rank, whose state cache now holds states whose futures
        // went nowhere, gets no more.
        problem_ = fmt::format("rank {} sent the result of branch {} in a form rank 0 cannot use", from, id);
        release(from);
      });
      size_t hungry = 0;
      for (size_t r = 1; r < workers_.size(); ++r) {
        Worker& w = workers_[r];
        if (!w.hungry || w.lost) continue;
        std::optional<std::pair<uint64_t, std::string>> branch = port.take();
        if (!branch) {
          ++hungry;
          continue;
        }
        std::vector<uint64_t> message = words_of(branch->second);
        message.insert(message.begin(), branch->first);
        w.hungry = false;
        w.holding.push_back(branch->first);
        w.since = Clock::now();
        // Not a blocking send: a branch is too large to go out before the rank takes it, and a
        // rank that died meanwhile never does (this thread must go on to find it lost).
        auto& [request, words] = branch_sends_.emplace_back(MPI_REQUEST_NULL, std::move(message));
        MPI_Isend(words.data(), static_cast<int>(words.size()), MPI_UINT64_T, static_cast<int>(r), TAG_WORK, MPI_COMM_WORLD,
                  &request);
      }
      port.set_waiting(hungry);
      sent_branches();
    }
    mine.join();
    sent_branches();  // every branch came back, so every rank still there took its own
    port.set_waiting(0);
    branches_ = nullptr;
    feed_the_hungry();  // none left: released
  }

  // Branch messages delivered: their buffers freed. A lost rank's stay (never delivered; the
  // job then ends without MPI_Finalize).
  void sent_branches() {
    for (auto it = branch_sends_.begin(); it != branch_sends_.end();) {
      int done = 0;
      MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
      it = done != 0 ? branch_sends_.erase(it) : std::next(it);
    }
  }

  // At the end: every worker still there told that no work is left, then rank 0's exit code (2
  // where a result could not be used, said here); every rank ends. A rank taken as lost may
  // only be slow: it is told too, without waiting for it to take the word, and errors in
  // telling it are ignored (it may be gone).
  [[noreturn]] void finish(int code) {
    if (!problem_.empty()) {
      err_ << "lockstep: error: " << problem_ << "\n";
      code = EXIT_BAD_INPUT;
    }
    hear_all();
    while (std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.released && !w.lost; })) {
      serve([](int, size_t, const std::string&) {});
    }
    const bool lost = std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.lost; });
    const int message[2] = {code, lost ? 1 : 0};
    if (lost) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::vector<MPI_Request> to_lost;
    for (size_t r = 1; r < workers_.size(); ++r) {
      if (!workers_[r].lost) {
        MPI_Send(message, 2, MPI_INT, static_cast<int>(r), TAG_CODE, MPI_COMM_WORLD);
      } else if (MPI_Isend(message, 2, MPI_INT, static_cast<int>(r), TAG_CODE, MPI_COMM_WORLD,
                           &to_lost.emplace_back(MPI_REQUEST_NULL)) != MPI_SUCCESS) {
        to_lost.pop_back();
      }
    }
    // A second at most for the word to leave.
    const Clock::time_point give_up = Clock::now() + std::chrono::seconds(1);
    for (int done = 0; !to_lost.empty() && done == 0 && Clock::now() < give_up;) {
      if (MPI_Testall(static_cast<int>(to_lost.size()), to_lost.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    end(code, lost);
  }

 private:
  struct Worker {
    std::vector<size_t> holding;  // pieces given and not yet answered
    Clock::time_point since;      // when the piece it runs (the first it holds) began
    Clock::time_point heard;
    bool released = false;  // told that no piece is left
    bool lost = false;      // silent past the timeout
    bool revived = false;   // heard from after it was taken as lost: what it sends is dropped
    size_t owed = 0;        // results still to come of the pieces it held when taken as lost
    bool hungry = false;    // asked for work when none was left (stealing): waits for some
    bool refused = false;   // gave nothing when last asked to (reset when pieces are added)
  };
  static constexpr int NO_VICTIM = -1;

  // With stealing, for a rank waiting for work (a worker, or rank 0's thread): asks the rank
  // whose piece has run longest to give part of it away, one request at a time.
  void steal_for_the_hungry() {
    if (stealing_ == nullptr || pieces_ == nullptr) return;
    if (victim_ == 0) {  // rank 0's thread: its answer, or its piece ended
      std::optional<checker::StealBox::Answer> given;
      int64_t index = -1;
      {
        const std::lock_guard<std::mutex> lock(local_.mutex);
        if (local_.index == asked_local_ && local_.box != nullptr) {
          given = local_.box->take();
          if (!given) return;  // not yet
        } else if (local_.unread_index == asked_local_) {
          given = std::move(local_.unread);
          local_.unread_index = -1;
        }
        index = asked_local_;
      }
      victim_ = NO_VICTIM;
      take_stolen(0, index, given ? std::move(*given) : checker::StealBox::Answer{});
    }
    if (victim_ != NO_VICTIM) return;
    const bool rank0_hungry = pieces_->waiting();
    const bool hungry = rank0_hungry || std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.hungry; });
    if (!hungry) return;
    int best = NO_VICTIM;
    Clock::time_point oldest = Clock::time_point::max();
    for (size_t r = 1; r < workers_.size(); ++r) {
      const Worker& w = workers_[r];
      if (w.lost || w.hungry || w.refused || w.holding.empty() || w.since >= oldest) continue;
      best = static_cast<int>(r);
      oldest = w.since;
    }
    {
      const std::lock_guard<std::mutex> lock(local_.mutex);
      if (!rank0_hungry && refused_local_ != local_.index && local_.box != nullptr && local_.since < oldest) {
        local_.box->ask();
        asked_local_ = local_.index;
        victim_ = 0;
        return;
      }
    }
    if (best == NO_VICTIM) return;
    MPI_Send(nullptr, 0, MPI_CHAR, best, TAG_STEAL, MPI_COMM_WORLD);
    victim_ = best;
  }

  // What `from` gave of piece `index` (nullopt: no answer rank 0 can use): new pieces for the
  // hungry.
  void take_stolen(int from, int64_t index, std::optional<checker::StealBox::Answer> given) {
    size_t added = !given ? Stealing::UNUSABLE
                   : index >= 0 && !given->prefixes.empty() ? stealing_->apply(static_cast<size_t>(index), std::move(*given))
                                                            : 0;
    if (added == Stealing::UNUSABLE) {
      problem_ = fmt::format("rank {} gave away part of piece {} in a form rank 0 cannot use", from, index);
      added = 0;
    }
    if (added == 0) {
      if (from == 0) refused_local_ = index;
      else workers_[static_cast<size_t>(from)].refused = true;
      return;
    }
    grow_(added);
    feed_the_hungry();
  }

  void feed_the_hungry() {
    for (size_t r = 1; r < workers_.size(); ++r) {
      if (!workers_[r].hungry) continue;
      workers_[r].hungry = false;
      give(static_cast<int>(r));
    }
  }

  // One message handled, or the silent workers let go and a short sleep.
  void serve(const std::function<void(int, size_t, const std::string&)>& result) {
    int ready = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ready, &status);
    if (ready == 0) {
      let_go_of_silent();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      return;
    }
    const int from = status.MPI_SOURCE;
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string message(static_cast<size_t>(std::max(bytes, 0)), '\0');
    MPI_Recv(message.data(), bytes, MPI_CHAR, from, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Worker& w = workers_[static_cast<size_t>(from)];
    w.heard = Clock::now();
    if (w.lost) {
      // Slow, not gone: its work was done again elsewhere. Once its piece under way is over, it
      // is told that no work is left and ends with the others.
      w.lost = false;
      if (!w.revived) err_ << fmt::format("lockstep: warning: rank {} was heard from again; it gets no more work\n", from);
      w.revived = true;
      if (w.owed == 0) release(from);
    }
    int64_t index = -1;
    if (message.size() >= sizeof(index)) std::memcpy(&index, message.data(), sizeof(index));
    if (status.MPI_TAG == TAG_STOLEN) {
      if (victim_ == from) victim_ = NO_VICTIM;
      if (!w.revived && pieces_ != nullptr && stealing_ != nullptr) take_stolen(from, index, stolen_answer(message.substr(sizeof(index))));
      return;
    }
    if (status.MPI_TAG != TAG_RESULT) return;  // a beat
    if (w.revived) {  // its pieces went elsewhere
      if (w.owed > 0 && --w.owed == 0) release(from);
      return;
    }
    if (index >= 0) {
      const auto i = static_cast<size_t>(index);
      std::erase(w.holding, i);
      w.since = Clock::now();  // its next piece, if it holds one, runs from now
      w.refused = false;
      give(from);  // the next piece first: the worker works on it while this one is read
      if (pieces_ != nullptr || branches_ != nullptr) result(from, i, message.substr(sizeof(index)));
    } else {
      give(from);
      give(from);
    }
  }

  void give(int to) {
    Worker& w = workers_[static_cast<size_t>(to)];
    if (w.released) return;
    if (branches_ != nullptr) {  // handed out as the search gives them (run_branches)
      if (w.holding.empty()) w.hungry = true;
      return;
    }
    const std::optional<size_t> i = pieces_ != nullptr ? pieces_->take() : std::nullopt;
    if (!i && stealing_ != nullptr && pieces_ != nullptr && !pieces_->all_done()) {
      // Work comes when a running piece gives some away (once the one it holds is done).
      if (w.holding.empty()) w.hungry = true;
      return;
    }
    if (i && w.holding.empty()) {
      w.since = Clock::now();
      w.refused = false;
    }
    if (!i) {
      release(to);
      return;
    }
    std::vector<uint64_t> message = (*piece_)(*i);
    message.insert(message.begin(), *i);
    w.holding.push_back(*i);
    MPI_Send(message.data(), static_cast<int>(message.size()), MPI_UINT64_T, to, TAG_WORK, MPI_COMM_WORLD);
  }

  // Worker `to` told that no work is left (once).
  void release(int to) {
    Worker& w = workers_[static_cast<size_t>(to)];
    if (w.released) return;
    w.released = true;
    w.hungry = false;
    const uint64_t none = NONE;
    MPI_Send(&none, 1, MPI_UINT64_T, to, TAG_WORK, MPI_COMM_WORLD);
  }

  // Every worker's silence counts from now.
  void hear_all() {
    for (Worker& w : workers_) w.heard = Clock::now();
  }

  void let_go_of_silent() {
    const Clock::time_point now = Clock::now();
    for (size_t r = 1; r < workers_.size(); ++r) {
      Worker& w = workers_[r];
      if (w.lost || w.released || now - w.heard <= timeout_) continue;
      w.lost = true;
      w.hungry = false;
      w.owed += w.holding.size();
      if (victim_ == static_cast<int>(r)) victim_ = NO_VICTIM;
      for (const size_t i : w.holding) {
        if (pieces_ != nullptr) pieces_->put_back(i);
        if (branches_ != nullptr) branches_->lost(i);
      }
      if (!w.revived) {  // said once
        err_ << fmt::format("lockstep: warning: rank {} said nothing for {:g} s and is taken as lost", r, timeout_.count());
        if (!w.holding.empty()) {
          err_ << fmt::format("; its work ({} {}) is done again elsewhere", w.holding.size() == 1 ? "piece" : "pieces",
                              fmt::join(w.holding, ", "));
        }
        err_ << "\n";
      }
      w.holding.clear();
      feed_the_hungry();
    }
  }

  std::vector<Worker> workers_;
  std::chrono::duration<double> timeout_;
  std::ostream& err_;
  std::string problem_;       // a result rank 0 could not use
  Pieces* pieces_ = nullptr;  // the batch being run
  const std::function<std::vector<uint64_t>(size_t)>* piece_ = nullptr;
  const Stealing* stealing_ = nullptr;
  checker::BranchPort* branches_ = nullptr;  // run_branches
  std::list<std::pair<MPI_Request, std::vector<uint64_t>>> branch_sends_;  // sent, maybe not yet delivered
  std::function<void(size_t)> grow_;  // k pieces added to the batch
  int victim_ = NO_VICTIM;            // the rank asked to give work away, waited for (0: rank 0's thread)
  // The piece rank 0's thread runs, and the box its search looks at.
  struct {
    std::mutex mutex;
    int64_t index = -1;
    Clock::time_point since;
    checker::StealBox* box = nullptr;
    int64_t unread_index = -1;  // a piece that ended after it gave work away, and what it gave
    std::optional<checker::StealBox::Answer> unread;
  } local_;
  int64_t asked_local_ = -1;    // the piece rank 0's thread was asked to give part of
  int64_t refused_local_ = -1;  // the piece of rank 0's thread that gave nothing when asked
};

void init_mpi(int& rank, int& ranks) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
}

// ---- sweep --mpi --------------------------------------------------------------------------

[[noreturn]] void sweep_over_mpi(const Options& options, std::ostream& out, std::ostream& err) {
  int rank = 0, ranks = 1;
  init_mpi(rank, ranks);
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
  if (rank != 0) {
    work([&](const std::vector<uint64_t>& piece, checker::StealBox&) {
      if (!points || piece[0] >= points->size()) return std::string();
      return check_point(point_options, options.inputs.front(), (*points)[piece[0]], 1).to_json();
    });
  }
  Coordinator coordinator(ranks, options.mpi_timeout_s, err);
  if (code == EXIT_NO_BUG) {
    const std::vector<PointSummary> results = coordinator.run<PointSummary>(
        points->size(), [](size_t) { return std::vector<uint64_t>(); },
        [](const std::string& text) { return PointSummary::from_json(text); },
        [&](size_t i, checker::StealBox&) { return check_point(point_options, options.inputs.front(), (*points)[i], 1); });
    code = report_sweep(point_options, sweep, *points, results, my_out, my_err);
  }
  coordinator.finish(code);
}

// ---- check --mpi --------------------------------------------------------------------------

std::optional<sim::Scenario> load(const std::string& input, const Options& options) {
  sim::LoadResult loaded = load_input(input, options.overrides, options.load_limits);
  if (!loaded.scenario) return std::nullopt;
  return std::move(*loaded.scenario);
}

// Several inputs: each input's whole search is a piece, whatever the strategy, and comes back as
// a part's JSON; rank 0 then reports as one process does, reading each input's part against the
// scenario its report loads (a part it cannot read is searched again there).
[[noreturn]] void check_inputs_over_mpi(const CommandLine& line, const std::vector<std::string>& inputs, int rank,
                                        int ranks, std::ostream& out, std::ostream& err) {
  const checker::CheckOptions& check = line.options.check;
  // An empty part where the input does not load: rank 0's report says why.
  const auto search = [&](size_t i) {
    checker::PartResult part;
    if (const std::optional<sim::Scenario> scenario = load(inputs[i], line.options)) {
      part = checker::explore_part(*scenario, check, {}, UINT64_MAX);
    }
    return checker::part_json(part);
  };
  if (rank != 0) work([&](const std::vector<uint64_t>& piece, checker::StealBox&) { return search(piece[0]); });  // piece i: input i
  Coordinator coordinator(ranks, line.options.mpi_timeout_s, err);
  const std::vector<std::string> parts = coordinator.run<std::string>(
      inputs.size(), [](size_t) { return std::vector<uint64_t>(); },
      [](const std::string& text) { return std::optional<std::string>(text); },
      [&](size_t i, checker::StealBox&) { return search(i); });
  CommandLine mine = line;
  mine.options.check.run_whole = [&](const sim::Scenario& scenario) -> std::optional<checker::PartResult> {
    const auto at = std::find(inputs.begin(), inputs.end(), scenario.path);
    if (at == inputs.end()) return std::nullopt;
    return checker::part_of(parts[static_cast<size_t>(at - inputs.begin())], scenario, check);
  };
  coordinator.finish(run_command(mine, out, err));
}

// One input with dpor: rank 0 runs the search; the branches it gives (as to --jobs threads) go
// to workers as they wait for work, each explored there by a search that sends back its result
// and its mail to the search that gave the branch.
[[noreturn]] void dpor_over_mpi(const CommandLine& line, int rank, int ranks, std::ostream& out, std::ostream& err) {
  if (rank != 0) {
    // A branch: its id, then its text (words_of).
    const std::optional<sim::Scenario> scenario = load(line.options.inputs.front(), line.options);  // rank 0 says why if it does not load
    std::optional<checker::BranchHost> host;
    if (scenario) host.emplace(*scenario, line.options.check);
    work([&](const std::vector<uint64_t>& piece, checker::StealBox&) { return host ? host->explore(text_of(piece, 1)) : std::string(); },
         [&] {
           if (host) host->halt();
         });
  }
  CommandLine mine = line;
  Coordinator coordinator(ranks, mine.options.mpi_timeout_s, err);
  mine.options.check.run_branches = [&](const std::function<void()>& root, checker::BranchPort& port) {
    coordinator.run_branches(root, port);
  };
  coordinator.finish(run_command(mine, out, err));
}

[[noreturn]] void check_over_mpi(const CommandLine& line, std::ostream& out, std::ostream& err) {
  int rank = 0, ranks = 1;
  init_mpi(rank, ranks);
  {
    std::ostringstream unused;  // rank 0's own run says what is wrong with the inputs
    bool bad = false;
    const std::vector<std::string> inputs = expand_inputs(line.options.inputs, unused, bad);
    if (inputs.size() > 1) check_inputs_over_mpi(line, inputs, rank, ranks, out, err);
  }
  const checker::StrategyInfo* strategy = checker::find_strategy(line.options.check.strategy);
  if (strategy != nullptr && strategy->make_branch != nullptr) dpor_over_mpi(line, rank, ranks, out, err);
  if (rank != 0) {
    // A part: its index, the budget, its prefix's length, its prefix, then its bound.
    const std::optional<sim::Scenario> scenario = load(line.options.inputs.front(), line.options);  // rank 0 says why if it does not load
    work([&](const std::vector<uint64_t>& piece, checker::StealBox& box) {
      checker::PartResult part;
      if (scenario && piece.size() >= 3 && piece[2] <= piece.size() - 3) {
        const auto prefix_end = piece.begin() + 3 + static_cast<std::ptrdiff_t>(piece[2]);
        checker::Part p{std::vector<uint32_t>(piece.begin() + 3, prefix_end), std::vector<uint32_t>(prefix_end, piece.end())};
        checker::CheckOptions options = line.options.check;
        options.steal = &box;
        part = checker::explore_part(*scenario, options, std::move(p), piece[1]);
      }
      return checker::part_json(part);
    });
  }
  CommandLine mine = line;
  // The scenario the parts are replayed against: rank 0's own load of the input.
  const std::optional<sim::Scenario> scenario = load(mine.options.inputs.front(), mine.options);
  Coordinator coordinator(ranks, mine.options.mpi_timeout_s, err);
  checker::CheckOptions local_options = mine.options.check;
  mine.options.check.run_parts = [&](std::vector<checker::Part>& parts, uint64_t budget) {
    if (!scenario) return std::vector<checker::PartResult>(parts.size());
    std::mutex parts_mutex;  // rank 0's thread reads parts while this one adds some
    const auto part = [&](size_t i) {
      const std::lock_guard<std::mutex> lock(parts_mutex);
      return parts[i];
    };
    // What a running part gave away: its new bound, and new parts after it.
    Stealing stealing;
    stealing.apply = [&](size_t i, checker::StealBox::Answer given) -> size_t {
      const std::lock_guard<std::mutex> lock(parts_mutex);
      return checker::take_given(parts, i, std::move(given)).value_or(Stealing::UNUSABLE);
    };
    return coordinator.run<checker::PartResult>(
        parts.size(),
        [&](size_t i) {
          const checker::Part p = part(i);
          std::vector<uint64_t> piece = {budget, p.prefix.size()};
          piece.insert(piece.end(), p.prefix.begin(), p.prefix.end());
          piece.insert(piece.end(), p.bound.begin(), p.bound.end());
          return piece;
        },
        [&](const std::string& text) { return checker::part_of(text, *scenario, local_options); },
        [&](size_t i, checker::StealBox& box) {
          checker::CheckOptions options = local_options;
          options.steal = &box;
          return checker::explore_part(*scenario, options, part(i), budget);
        },
        &stealing);
  };
  if (scenario && checker::is_sampling(mine.options.check.strategy)) {
    err << "lockstep: note: check --mpi spreads dfs and dpor searches; " << mine.options.check.strategy
        << " runs on rank 0 alone\n";
  }
  coordinator.finish(run_command(mine, out, err));  // it says why the input does not load, if it does not
}

}  // namespace
}  // namespace lockstep::cli

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const lockstep::cli::CommandLine line = lockstep::cli::parse_command_line(args);
  if (line.verb == "sweep" && line.options.mpi) lockstep::cli::sweep_over_mpi(line.options, std::cout, std::cerr);
  if (line.verb == "check" && line.options.mpi) lockstep::cli::check_over_mpi(line, std::cout, std::cerr);
  return lockstep::cli::run_command(line, std::cout, std::cerr);
}
