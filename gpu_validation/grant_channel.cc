#include "gpu_validation/grant_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
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

// Appends what the socket has to `input`, never past `cap` bytes; false on end of file, an
// error, or more than `cap` bytes waiting without a newline.
bool receive(int fd, std::string& input, size_t cap = GrantServer::MAX_LINE_BYTES) {
  char buffer[4096];
  for (;;) {
    if (input.size() >= cap) return input.find('\n') != std::string::npos;  // whole lines to take first
    const size_t room = std::min(sizeof buffer, cap - input.size());
    const ssize_t n = ::recv(fd, buffer, room, 0);
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

// 128 random bits as 32 hex digits; empty when the system has no randomness to give.
std::string random_token() {
  unsigned char bits[16];
  size_t got = 0;
  while (got < sizeof bits) {
    const ssize_t n = ::getrandom(bits + got, sizeof bits - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  static constexpr char HEX[] = "0123456789abcdef";
  std::string token;
  for (const unsigned char b : bits) {
    token += HEX[b >> 4];
    token += HEX[b & 15];
  }
  return token;
}

// Equal without an early exit: the time taken says nothing of how much of a guess was right.
bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Writes `text` to DIR/NAME whole: a temporary created O_EXCL|O_NOFOLLOW with `mode`, renamed.
bool write_private(const std::string& dir, const std::string& name, const std::string& text, mode_t mode,
                   std::string& error) {
  const std::string path = dir + "/" + name;
  const std::string temporary = dir + "/." + name + ".tmp";
  ::unlink(temporary.c_str());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  ok = ok && std::rename(temporary.c_str(), path.c_str()) == 0;
  if (!ok) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    ::unlink(temporary.c_str());
  }
  return ok;
}

// The IPv4 address `host` names (a dotted quad or a name), or nullopt.
std::optional<in_addr> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return std::nullopt;
  const in_addr address = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return address;
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
  token_ = random_token();
  if (token_.empty()) {
    error = std::string("no random token for the workers: getrandom: ") + std::strerror(errno);
    return false;
  }
  // Loopback unless the workers are elsewhere: then the one address they were told.
  std::string host = "127.0.0.1";
  in_addr bind_address{htonl(INADDR_LOOPBACK)};
  if (const char* configured = std::getenv("LOCKSTEP_REPLAY_HOST"); configured != nullptr && *configured != 0) {
    const std::optional<in_addr> resolved = resolve_ipv4(configured);
    if (!resolved) {
      error = std::string("LOCKSTEP_REPLAY_HOST=") + configured + " names no IPv4 address of this host";
      return false;
    }
    host = configured;
    bind_address = *resolved;
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr = bind_address;
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 256) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    error = std::string("listening for the workers' issue reports on ") + host + ": " + std::strerror(errno);
    return false;
  }
  set_nonblocking(listen_fd_);
  port_ = ntohs(address.sin_port);
  // The token first: a worker that finds the address finds the token beside it.
  return write_private(dir, GRANT_TOKEN_FILE, token_ + "\n", 0600, error) &&
         write_private(dir, GRANT_ADDRESS_FILE, host + " " + std::to_string(port_) + "\n", 0644, error);
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
  if (c.rank < 0) {
    // The first line must be "hello RANK TOKEN" with this replay's token; anything else closes it.
    const size_t second = arg.find(' ');
    uint32_t rank = 0;
    if (word != "hello" || second == std::string::npos || !parse_u32(arg.substr(0, second), rank) ||
        rank >= rank_fd_.size() || !same_token(std::string_view(arg).substr(second + 1), token_)) {
      close_connection(c);
      return;
    }
    c.rank = static_cast<int32_t>(rank);
    if (rank_fd_[rank] >= 0) {  // the rank connected again: its new connection counts
      for (Connection& other : connections_) {
        if (other.fd == rank_fd_[rank] && &other != &c) close_connection(other);
      }
    }
    rank_fd_[rank] = c.fd;
    grant_next();
    return;
  }
  uint32_t value = 0;
  if (!parse_u32(arg, value)) return;
  if (word == "issued" && c.rank >= 0 && value < owner_.size() && owner_[value] == c.rank && value >= next_ &&
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
  if (listen_fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  std::vector<pollfd> fds;
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const Connection& c : connections_) fds.push_back({c.fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  const Clock::time_point now = Clock::now();
  for (size_t i = 1; i < fds.size(); ++i) {
    Connection& c = connections_[i - 1];
    if (c.fd < 0) continue;  // closed as another rank's older connection
    if (c.rank < 0 && now - c.opened > std::chrono::milliseconds(HELLO_TIMEOUT_MS)) {
      close_connection(c);
      continue;
    }
    if (fds[i].revents == 0) continue;
    const bool open = receive(c.fd, c.input);
    for (const std::string& line : take_lines(c.input)) {
      handle(c, line);
      if (c.fd < 0) break;
    }
    if (!open || c.input.size() >= MAX_LINE_BYTES) close_connection(c);
  }
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(), [](const Connection& c) { return c.fd < 0; }),
                     connections_.end());
  if (fds[0].revents != 0) accept_connections();
}

// Takes the waiting connections; past the bound (world + MAX_UNIDENTIFIED open) each is closed
// at once, so that a flood of connections costs no descriptors.
void GrantServer::accept_connections() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    if (connections_.size() >= rank_fd_.size() + MAX_UNIDENTIFIED) {
      ::close(fd);
      continue;
    }
    set_nodelay(fd);
    connections_.push_back({fd, -1, {}, Clock::now()});
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
  std::string token;
  if (const char* passed = std::getenv(GRANT_TOKEN_VARIABLE); passed != nullptr && *passed != 0) {
    token = passed;
  } else {
    std::ifstream in(dir + "/" + GRANT_TOKEN_FILE);
    std::getline(in, token);
  }
  if (token.empty()) {
    error = "no token for the coordinator: neither $" + std::string(GRANT_TOKEN_VARIABLE) + " nor " + dir + "/" +
            GRANT_TOKEN_FILE;
    return false;
  }
  if (!send_line(fd_, "hello " + std::to_string(rank) + " " + token + "\n")) {
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
