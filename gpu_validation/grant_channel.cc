#include "gpu_validation/grant_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace lockstep::gpu {

namespace {

using Clock = std::chrono::steady_clock;

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Writes a short line whole (the socket is nonblocking: waits for room, at most a second).
bool send_line(int fd, const std::string& line) {
  size_t sent = 0;
  const Clock::time_point start = Clock::now();
  while (sent < line.size()) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (Clock::now() - start > std::chrono::seconds(1)) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 10);
  }
  return true;
}

// Appends what the socket has to `input`; false on end of file or an error.
bool receive(int fd, std::string& input) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      input.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// The complete lines of `input` (removed from it).
std::vector<std::string> take_lines(std::string& input) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl = input.find('\n'); nl != std::string::npos; nl = input.find('\n', start)) {
    lines.push_back(input.substr(start, nl - start));
    start = nl + 1;
  }
  input.erase(0, start);
  return lines;
}

bool parse_u32(const std::string& text, uint32_t& value) {
  if (text.empty() || text.size() > 10) return false;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  value = static_cast<uint32_t>(v);
  return true;
}

// Connects to host:port within `timeout_ms`; -1 when it cannot.
int connect_to(const std::string& host, const std::string& port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    set_nonblocking(fd);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, timeout_ms) == 1) {
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        rc = error == 0 ? 0 : -1;
      }
    }
    if (rc == 0) {
      connected = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return connected;
}

}  // namespace

GrantServer::GrantServer(std::vector<int32_t> step_owner, int32_t world)
    : owner_(std::move(step_owner)),
      rank_fd_(static_cast<size_t>(std::max(world, 0)), -1),
      granted_end_(static_cast<size_t>(std::max(world, 0)), 0) {}

GrantServer::~GrantServer() {
  for (Connection& c : connections_) {
    if (c.fd >= 0) ::close(c.fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool GrantServer::start(const std::string& dir, std::string& error) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 4096) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    error = std::string("listening for the workers' issue reports: ") + std::strerror(errno);
    return false;
  }
  set_nonblocking(listen_fd_);
  port_ = ntohs(address.sin_port);

  std::vector<std::string> hosts;
  if (const char* host = std::getenv("LOCKSTEP_REPLAY_HOST"); host != nullptr && *host != 0) {
    hosts.emplace_back(host);
  } else {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0 && name[0] != 0) hosts.emplace_back(name);
    ifaddrs* interfaces = nullptr;
    if (::getifaddrs(&interfaces) == 0) {
      for (ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        char text[INET_ADDRSTRLEN] = {};
        const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) continue;
        if (std::string(text).rfind("127.", 0) == 0) continue;
        hosts.emplace_back(text);
      }
      ::freeifaddrs(interfaces);
    }
  }
  hosts.emplace_back("127.0.0.1");
  const std::string path = dir + "/" + GRANT_ADDRESS_FILE;
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    for (const std::string& h : hosts) out << h << " " << port_ << "\n";
    if (!out) {
      error = "cannot write " + path;
      return false;
    }
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void GrantServer::close_connection(Connection& c) {
  if (c.fd < 0) return;
  if (c.rank >= 0 && static_cast<size_t>(c.rank) < rank_fd_.size() && rank_fd_[static_cast<size_t>(c.rank)] == c.fd) {
    rank_fd_[static_cast<size_t>(c.rank)] = -1;
  }
  ::close(c.fd);
  c.fd = -1;
}

// Grants the run of consecutive steps that begins at next_ to its rank, once it is connected.
void GrantServer::grant_next() {
  if (next_ >= owner_.size()) return;
  const int32_t rank = owner_[next_];
  if (rank < 0 || static_cast<size_t>(rank) >= rank_fd_.size()) return;
  const auto r = static_cast<size_t>(rank);
  if (granted_end_[r] > next_ || rank_fd_[r] < 0) return;  // granted already, or not connected yet
  uint32_t end = next_;
  while (end < owner_.size() && owner_[end] == rank) ++end;
  granted_end_[r] = end;
  ++grants_;
  pending_step_ = next_;
  pending_since_ = Clock::now();
  send_line(rank_fd_[r], "grant " + std::to_string(end) + "\n");
}

void GrantServer::handle(Connection& c, const std::string& line) {
  const size_t space = line.find(' ');
  const std::string word = line.substr(0, space);
  const std::string arg = space == std::string::npos ? std::string() : line.substr(space + 1);
  uint32_t value = 0;
  if (!parse_u32(arg, value)) return;
  if (word == "hello" && value < rank_fd_.size()) {
    c.rank = static_cast<int32_t>(value);
    rank_fd_[value] = c.fd;
    grant_next();
  } else if (word == "issued" && c.rank >= 0 && value < owner_.size() && owner_[value] == c.rank && value >= next_ &&
             value < granted_end_[static_cast<size_t>(c.rank)]) {
    if (pending_step_ <= value) {
      round_trips_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - pending_since_).count());
      pending_step_ = UINT32_MAX;
    }
    next_ = value + 1;
    grant_next();
  }
}

void GrantServer::pump(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const Connection& c : connections_) fds.push_back({c.fd, POLLIN, 0});
  if (listen_fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Connection& c = connections_[i - 1];
    const bool open = receive(c.fd, c.input);
    for (const std::string& line : take_lines(c.input)) handle(c, line);
    if (!open || c.input.size() > 4096) close_connection(c);
  }
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(), [](const Connection& c) { return c.fd < 0; }),
                     connections_.end());
  if (fds[0].revents != 0) {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      set_nodelay(fd);
      connections_.push_back({fd, -1, {}});
    }
  }
}

GrantStats GrantServer::stats() const {
  GrantStats s;
  s.steps = static_cast<uint32_t>(owner_.size());
  s.issued = next_;
  s.grants = grants_;
  if (next_ < owner_.size()) s.holder = owner_[next_];
  if (!round_trips_ms_.empty()) {
    std::vector<double> sorted = round_trips_ms_;
    std::sort(sorted.begin(), sorted.end());
    s.median_ms = sorted[sorted.size() / 2];
    s.max_ms = sorted.back();
  }
  return s;
}

GrantClient::~GrantClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool GrantClient::connect(const std::string& dir, int32_t rank, double wait_s, std::string& error) {
  free_ = false;
  const std::string path = dir + "/" + GRANT_ADDRESS_FILE;
  const Clock::time_point start = Clock::now();
  std::vector<std::pair<std::string, std::string>> addresses;
  for (;;) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string host, port;
      if (words >> host >> port) addresses.emplace_back(host, port);
    }
    if (!addresses.empty()) break;
    if (std::chrono::duration<double>(Clock::now() - start).count() > wait_s) {
      error = "no coordinator address in " + path;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [host, port] : addresses) {
    fd_ = connect_to(host, port, 2000);
    if (fd_ >= 0) break;
  }
  if (fd_ < 0) {
    error = "cannot connect to the coordinator at any address in " + path + " (first: " + addresses.front().first + " " +
            addresses.front().second + ")";
    return false;
  }
  set_nodelay(fd_);
  if (!send_line(fd_, "hello " + std::to_string(rank) + "\n")) {
    error = "cannot write to the coordinator";
    return false;
  }
  return true;
}

void GrantClient::issued(uint32_t step) {
  if (free_ || fd_ < 0 || lost_) return;
  if (!send_line(fd_, "issued " + std::to_string(step) + "\n")) lost_ = true;
}

bool GrantClient::read_available() {
  if (!receive(fd_, input_)) lost_ = true;
  bool more = false;
  for (const std::string& line : take_lines(input_)) {
    uint32_t end = 0;
    if (line.rfind("grant ", 0) == 0 && parse_u32(line.substr(6), end) && end > granted_end_) {
      granted_end_ = end;
      more = true;
    }
  }
  return more;
}

bool GrantClient::wait(uint32_t timeout_us) {
  if (free_ || fd_ < 0 || lost_) {
    if (timeout_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(timeout_us));
    return false;
  }
  pollfd p{fd_, POLLIN, 0};
  const timespec timeout{static_cast<time_t>(timeout_us / 1000000), static_cast<long>(timeout_us % 1000000) * 1000};
  if (::ppoll(&p, 1, &timeout, nullptr) <= 0) return false;
  return read_available();
}

}  // namespace lockstep::gpu
