// The issue grants (grant_channel.h) in one process: the coordinator's GrantServer and one
// GrantClient per rank on threads, over real TCP on this host. No MPI, no GPU.
#include "gpu_validation/grant_channel.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::gpu {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Folder {
  fs::path dir;
  Folder() {
    std::string made = (fs::temp_directory_path() / "lockstep-grant-XXXXXX").string();
    REQUIRE(::mkdtemp(made.data()) != nullptr);
    dir = made;
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// One rank: issues its steps (ascending) as they are granted, appending each to `order`;
// `stop_before` (if any): the step it never issues, as a rank whose host is stuck.
void rank_thread(const std::string& dir, int32_t rank, std::vector<uint32_t> steps, uint32_t stop_before,
                 std::vector<uint32_t>& order, std::mutex& mutex, std::atomic<bool>& quit, std::string& error) {
  GrantClient client;
  if (!client.connect(dir, rank, 10, error)) return;
  for (const uint32_t step : steps) {
    if (step == stop_before) break;
    while (!client.granted(step) && !quit.load() && !client.lost()) client.wait(2000);
    if (!client.granted(step)) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(step);
    }
    client.issued(step);
  }
  while (!quit.load() && !client.lost()) client.wait(2000);
}

struct Run {
  std::vector<uint32_t> order;
  GrantStats stats;
  std::vector<std::string> errors;
  double seconds = 0;
};

// The server and `world` rank threads over `owner` (the rank of each step), until every step
// was issued or, when a rank stops at `stop_step`, until the order stopped there.
Run run_grants(const std::vector<int32_t>& owner, int32_t world, uint32_t stop_step = UINT32_MAX) {
  Folder folder;
  GrantServer server(owner, world);
  std::string why;
  REQUIRE_MESSAGE(server.start(folder.dir.string(), why), why);
  Run run;
  run.errors.resize(static_cast<size_t>(world));
  std::mutex mutex;
  std::atomic<bool> quit{false};
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < world; ++r) {
    std::vector<uint32_t> mine;
    for (uint32_t k = 0; k < owner.size(); ++k) {
      if (owner[k] == r) mine.push_back(k);
    }
    threads.emplace_back(rank_thread, folder.dir.string(), r, mine, stop_step, std::ref(run.order), std::ref(mutex),
                         std::ref(quit), std::ref(run.errors[static_cast<size_t>(r)]));
  }
  const Clock::time_point start = Clock::now();
  const uint32_t goal = stop_step == UINT32_MAX ? static_cast<uint32_t>(owner.size()) : stop_step;
  // A bound, not a timing: the order must get there long before.
  while (server.stats().issued < goal && Clock::now() - start < std::chrono::seconds(60)) server.pump(5);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int i = 0; i < 20; ++i) server.pump(5);  // a rank that went on regardless would show now
  run.stats = server.stats();
  quit.store(true);
  for (std::thread& t : threads) t.join();
  return run;
}

// A raw connection to the coordinator on loopback, as any local process could open one.
int raw_connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

// What the coordinator sent on `fd` within the pumping, and whether it closed the connection.
struct Heard {
  std::string text;
  bool closed = false;
};
Heard listen_to(GrantServer& server, int fd, int pumps = 20) {
  Heard heard;
  for (int i = 0; i < pumps && !heard.closed; ++i) {
    server.pump(5);
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 0) == 1) {
      char buffer[256];
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        heard.closed = true;
        break;
      }
      heard.text.append(buffer, static_cast<size_t>(n));
    }
  }
  return heard;
}

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

TEST_CASE("issue grants: the coordinator listens on loopback and keeps its token in the folder, readable by its owner only") {
  Folder folder;
  GrantServer server({0}, 1);
  std::string why;
  REQUIRE_MESSAGE(server.start(folder.dir.string(), why), why);
  CHECK(first_line(folder.dir / "grant-address") == "127.0.0.1 " + std::to_string(server.port()));
  CHECK(server.token().size() == 32);
  CHECK(first_line(folder.dir / "grant-token") == server.token());
  struct stat info {};
  REQUIRE(::stat((folder.dir / "grant-token").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
}

TEST_CASE("issue grants: a connection without the replay's token is closed and never takes a rank's grants") {
  Folder folder;
  GrantServer server({0, 0}, 1);
  std::string why;
  REQUIRE_MESSAGE(server.start(folder.dir.string(), why), why);
  for (const std::string& hello : std::vector<std::string>{"hello 0\n", "hello 0 " + std::string(32, '0') + "\n", "issued 0\n"}) {
    CAPTURE(hello);
    const int intruder = raw_connect(server.port());
    REQUIRE(::send(intruder, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
    const Heard heard = listen_to(server, intruder);
    CHECK(heard.closed);
    CHECK(heard.text.empty());
    ::close(intruder);
  }
  CHECK(server.stats().grants == 0);
  // The rank itself, with the token: granted both steps at once.
  const int rank = raw_connect(server.port());
  const std::string hello = "hello 0 " + server.token() + "\n";
  REQUIRE(::send(rank, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
  const Heard heard = listen_to(server, rank, 5);
  CHECK(heard.text == "grant 2\n");
  CHECK_FALSE(heard.closed);
  ::close(rank);
}

TEST_CASE("issue grants: a line without end is cut at 4 KiB as it arrives, and idle connections are bounded") {
  Folder folder;
  GrantServer server({0}, 1);
  std::string why;
  REQUIRE_MESSAGE(server.start(folder.dir.string(), why), why);
  const int flood = raw_connect(server.port());
  const std::string chunk(64 << 10, 'x');
  ::send(flood, chunk.data(), chunk.size(), MSG_NOSIGNAL);  // as much as the socket takes
  CHECK(listen_to(server, flood).closed);
  ::close(flood);
  // 200 idle connections: at most world + MAX_UNIDENTIFIED stay open, the rest are closed at once.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(raw_connect(server.port()));
  for (int i = 0; i < 10; ++i) server.pump(5);
  size_t closed = 0;
  for (const int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char byte = 0;
    if (::poll(&p, 1, 0) == 1 && ::recv(fd, &byte, 1, 0) == 0) ++closed;
    ::close(fd);
  }
  CHECK(closed == 200 - (1 + GrantServer::MAX_UNIDENTIFIED));
}

TEST_CASE("issue grants: every step is issued in the global order, one grant per run of one rank's steps") {
  // 3 ranks; runs: 0 0 | 1 | 2 2 2 | 0 | 1 1 | 2 | 0
  const std::vector<int32_t> owner = {0, 0, 1, 2, 2, 2, 0, 1, 1, 2, 0};
  const Run run = run_grants(owner, 3);
  for (const std::string& e : run.errors) CHECK(e.empty());
  std::vector<uint32_t> expected(owner.size());
  for (uint32_t k = 0; k < expected.size(); ++k) expected[k] = k;
  CHECK(run.order == expected);
  CHECK(run.stats.issued == owner.size());
  CHECK(run.stats.steps == owner.size());
  CHECK(run.stats.grants == 7);
  CHECK(run.stats.holder == -1);
}

TEST_CASE("issue grants: a rank that never issues its step holds back every later step of every rank") {
  // Rank 1 stops before step 3 (its host is stuck); rank 0's step 4 and rank 2's step 5 wait.
  const std::vector<int32_t> owner = {0, 1, 2, 1, 0, 2};
  const Run run = run_grants(owner, 3, 3);
  CHECK(run.order == std::vector<uint32_t>{0, 1, 2});
  CHECK(run.stats.issued == 3);
  CHECK(run.stats.holder == 1);
  CHECK(run.stats.grants == 4);  // steps 0, 1, 2 and the grant of 3 that rank 1 holds
}

TEST_CASE("issue grants: the per-step round trip, two ranks taking turns for 2,000 steps") {
  std::vector<int32_t> owner(2000);
  for (size_t k = 0; k < owner.size(); ++k) owner[k] = static_cast<int32_t>(k % 2);
  const Run run = run_grants(owner, 2);
  CHECK(run.stats.issued == owner.size());
  CHECK(run.stats.grants == owner.size());
  // A measurement for docs/replay.md, not an assertion.
  MESSAGE("2000 alternating steps in " << run.seconds << " s: " << 1000 * run.seconds / 2000 << " ms a step; median round trip "
                                       << run.stats.median_ms << " ms, max " << run.stats.max_ms << " ms");
}

TEST_CASE("issue grants: a worker without a coordinator says so, and free order grants everything") {
  Folder folder;
  GrantClient none;
  std::string error;
  CHECK_FALSE(none.connect(folder.dir.string(), 0, 0.05, error));
  CHECK(error == "no coordinator address in " + (folder.dir / "grant-address").string());
  std::ofstream(folder.dir / "grant-address") << "127.0.0.1 1\n";  // nothing listens on port 1
  GrantClient refused;
  CHECK_FALSE(refused.connect(folder.dir.string(), 0, 1, error));
  CHECK(error.rfind("cannot connect to the coordinator at any address in ", 0) == 0);
  const GrantClient free_order;
  CHECK(free_order.granted(0));
  CHECK(free_order.granted(UINT32_MAX - 1));
}

}  // namespace lockstep::gpu
