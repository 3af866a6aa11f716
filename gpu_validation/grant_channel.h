// The issue grants of a hardware replay (docs/replay.md, "Issue order"): the coordinator (the
// `lockstep replay` process) lets the workers issue their ops in the recorded execution's global
// issue order. Step k of that order belongs to one rank; the coordinator grants it once step k-1
// was reported issued; the worker issues the op (posts the nonblocking call, or enqueues it
// behind its stream) and reports it. A run of consecutive steps of one rank is granted in one
// message, and the worker reports the last step it issued, so a step costs one round trip only
// when the order changes rank.
//
// Transport: TCP. The coordinator listens on 127.0.0.1, or, when the workers run on other hosts
// ($LOCKSTEP_REPLAY_HOST names this host's address for them), on that address only, and writes
// "HOST PORT" to DIR/grant-address in the replay folder (mode 0700), which every rank sees (the
// frontier files and DIR/stop go through it too). Every connection must first present the
// replay's token: 128 random bits the coordinator writes to DIR/grant-token (mode 0600) and
// passes to the workers it starts as $LOCKSTEP_GRANT_TOKEN; a connection without it is closed.
// Messages are text lines: worker -> coordinator "hello RANK TOKEN", "issued STEP"; coordinator
// -> worker "grant END" (the worker may issue its ops whose step is below END). A line is at most
// MAX_LINE_BYTES, enforced as bytes arrive; at most world + MAX_UNIDENTIFIED connections are
// open, and one that has not said hello within HELLO_TIMEOUT_MS is closed. Reports (frontiers)
// never go through here.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::gpu {

// The file in the replay folder with the coordinator's addresses.
inline constexpr const char* GRANT_ADDRESS_FILE = "grant-address";
// The file with the token, and the variable that passes it to the workers the coordinator starts.
inline constexpr const char* GRANT_TOKEN_FILE = "grant-token";
inline constexpr const char* GRANT_TOKEN_VARIABLE = "LOCKSTEP_GRANT_TOKEN";

// How far the global issue order got, and how fast.
struct GrantStats {
  uint32_t steps = 0;    // steps in the global issue order
  uint32_t issued = 0;   // steps issued: the next step to grant (== steps: every op was issued)
  uint32_t grants = 0;   // grant messages sent (a run of one rank's consecutive steps is one)
  int32_t holder = -1;   // issued < steps: the rank whose step is next
  // From a grant sent to the first of its steps reported issued (the round trip of one step
  // that changes rank, the worker's own wait for ops its host blocks on included).
  double median_ms = 0;
  double max_ms = 0;
};

// The coordinator's side. Single-threaded: the launcher calls pump() in its wait loop.
class GrantServer {
 public:
  // `step_owner[k]`: the rank that issues step k (step_owners(plan)).
  GrantServer(std::vector<int32_t> step_owner, int32_t world);
  ~GrantServer();
  GrantServer(const GrantServer&) = delete;
  GrantServer& operator=(const GrantServer&) = delete;

  // Listens on a TCP port of 127.0.0.1, or of $LOCKSTEP_REPLAY_HOST's address when set, and
  // writes DIR/grant-token and DIR/grant-address (whole, temporary + rename). False with
  // `error` when it cannot.
  bool start(const std::string& dir, std::string& error);
  // The token a worker must present (32 hex digits), once started.
  const std::string& token() const { return token_; }
  static constexpr size_t MAX_LINE_BYTES = 4096;
  static constexpr size_t MAX_UNIDENTIFIED = 64;
  static constexpr int HELLO_TIMEOUT_MS = 10'000;
  // Accepts connections, reads issue reports, sends grants; returns after at most `timeout_ms`
  // (sooner when something arrived).
  void pump(int timeout_ms);
  GrantStats stats() const;
  uint16_t port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;
    int32_t rank = -1;  // -1 until it said hello with the token
    std::string input;
    std::chrono::steady_clock::time_point opened;
  };
  void accept_connections();
  void grant_next();
  void handle(Connection& c, const std::string& line);
  void close_connection(Connection& c);

  std::vector<int32_t> owner_;
  std::vector<int> rank_fd_;                 // per rank: its connection (-1: none yet, or closed)
  std::vector<uint32_t> granted_end_;        // per rank: the end of its last grant
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::string token_;
  std::vector<Connection> connections_;
  uint32_t next_ = 0;                        // the first step not reported issued
  uint32_t grants_ = 0;
  // The grant for the run that begins at `pending_step_`, sent at `pending_since_`.
  uint32_t pending_step_ = UINT32_MAX;
  std::chrono::steady_clock::time_point pending_since_;
  std::vector<double> round_trips_ms_;
};

// The worker's side. Free order (the default constructor): every step counts as granted.
class GrantClient {
 public:
  GrantClient() = default;
  ~GrantClient();
  GrantClient(const GrantClient&) = delete;
  GrantClient& operator=(const GrantClient&) = delete;

  // Connects to the coordinator of the replay folder `dir` as `rank`: waits up to `wait_s` for
  // DIR/grant-address, then tries its addresses in order, and says hello with the token
  // ($LOCKSTEP_GRANT_TOKEN, else DIR/grant-token). False with `error`.
  bool connect(const std::string& dir, int32_t rank, double wait_s, std::string& error);
  bool connected() const { return fd_ >= 0; }
  bool granted(uint32_t step) const { return free_ || step < granted_end_; }
  // Every op of this rank up to `step` was issued.
  void issued(uint32_t step);
  // Waits up to `timeout_us` for a grant (free order: sleeps); true when a new grant arrived.
  // With 0 it only looks.
  bool wait(uint32_t timeout_us);
  // The coordinator closed the connection (it is stopping the replay).
  bool lost() const { return lost_; }

 private:
  bool read_available();

  bool free_ = true;
  int fd_ = -1;
  bool lost_ = false;
  uint32_t granted_end_ = 0;
  std::string input_;
};

}  // namespace lockstep::gpu
