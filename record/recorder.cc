// liblockstep_record.so: an LD_PRELOAD interposer of the NCCL API (docs/record.md).
//
// Every intercepted function forwards to the next definition of its symbol (dlsym RTLD_NEXT,
// looked up once) and, unless it was called from inside another intercepted call, appends one
// fixed-size binary record to a buffer of the calling thread. The buffer is allocated once per
// thread (mmap, LOCKSTEP_RECORD_BUFFER records of 64 bytes), so recording a call costs no
// allocation, no lock and one atomic increment (the process-wide sequence number). Records are
// turned into JSON Lines (record_format.h) only when written out: by a background thread every
// LOCKSTEP_RECORD_FLUSH_MS and as soon as a buffer is a quarter full, by the calling thread when
// its buffer is full, at ncclCommDestroy/Abort/Finalize, at exit, and on a fatal signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS,
// SIGFPE, SIGILL when their disposition is the default one).
//
// Nothing here uses the C++ library beyond <atomic>: the file is written with write(2) and the
// numbers formatted by hand, so that the signal path does not allocate.

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "record/nccl_api.h"
#include "record/record_format.h"
#include "sim/hash.h"

#define LOCKSTEP_EXPORT __attribute__((visibility("default")))
#define LOCKSTEP_TLS __attribute__((tls_model("initial-exec")))

namespace lockstep::nccl_abi {
namespace {

using record::Call;

// One call, as recorded. Which fields mean what depends on `call` (record_format.h).
struct Rec {
  uint64_t seq;
  uint32_t tid;
  uint16_t call;
  uint16_t unused;
  uint64_t comm;    // the communicator (parent for ncclCommSplit, the new one for CREATED)
  uint64_t stream;
  uint64_t count;   // elements
  uint64_t id;      // hash of the ncclUniqueId; CREATED/FAILED: the seq of the call
  int32_t i0, i1, i2, i3;
};
static_assert(sizeof(Rec) == 64);

// A ring of records: the owning thread appends at `head`, a flush writes [tail, head) and moves
// `tail` (under the file lock). The owner writes a slot only once it has been written out.
struct ThreadBuffer {
  Rec* recs;
  uint64_t mask;                // capacity - 1, a power of two
  std::atomic<uint64_t> head;   // written by the owner only
  std::atomic<uint64_t> tail;   // written under the file lock only
};

constexpr uint32_t MAX_THREADS = 4096;
constexpr uint32_t DEFAULT_CAPACITY = 16384;  // 1 MiB per thread
constexpr long POLL_MS = 10;                  // the background thread looks this often
constexpr uint32_t MAX_CAPACITY = 1u << 24;
constexpr long DEFAULT_FLUSH_MS = 1000;

enum : int { UNINITIALIZED = 0, INITIALIZING = 1, READY = 2, DISABLED = 3 };

struct State {
  std::atomic<int> status{UNINITIALIZED};
  std::atomic<uint32_t> generation{0};  // bumped in a forked child: thread buffers are the parent's
  int fd = -1;
  pthread_mutex_t file_mutex = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<ThreadBuffer*> buffers[MAX_THREADS] = {};
  std::atomic<uint32_t> nbuffers{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<bool> exited{false};
  uint32_t capacity = DEFAULT_CAPACITY;
  long flush_ms = DEFAULT_FLUSH_MS;
  struct sigaction old_actions[65] = {};
  bool handled[65] = {};
};

State g;

void* next_symbol(const char* name);

thread_local ThreadBuffer* t_buffer LOCKSTEP_TLS = nullptr;
thread_local uint32_t t_generation LOCKSTEP_TLS = 0;
thread_local uint32_t t_tid LOCKSTEP_TLS = 0;
thread_local int t_depth LOCKSTEP_TLS = 0;  // > 0 inside an intercepted call

// ----------------------------------------------------------------------------------------------
// Text out, without allocation.

constexpr size_t STAGING_BYTES = 1 << 16;
char g_staging[STAGING_BYTES];  // under the file lock
size_t g_staged = 0;

void write_all(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    bytes -= static_cast<size_t>(n);
  }
}

void drain() {
  if (g_staged > 0 && g.fd >= 0) write_all(g.fd, g_staging, g_staged);
  g_staged = 0;
}

struct Line {
  char text[512];
  size_t size = 0;
  void add(const char* s) {
    while (*s != 0 && size < sizeof(text) - 1) text[size++] = *s++;
  }
  void add_u64(uint64_t v) {
    char digits[24];
    size_t n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0 && size < sizeof(text) - 1) text[size++] = digits[--n];
  }
  void add_i64(int64_t v) {
    if (v < 0) {
      add("-");
      add_u64(static_cast<uint64_t>(-(v + 1)) + 1);
    } else {
      add_u64(static_cast<uint64_t>(v));
    }
  }
  void add_hex(uint64_t v, bool prefix) {
    static const char HEX[] = "0123456789abcdef";
    add(prefix ? "\"0x" : "\"");
    char digits[16];
    int n = 0;
    do {
      digits[n++] = HEX[v & 15];
      v >>= 4;
    } while (v != 0 && n < 16);
    if (!prefix) {
      while (n < 16) digits[n++] = '0';
    }
    while (n > 0 && size < sizeof(text) - 1) text[size++] = digits[--n];
    add("\"");
  }
  void key(const char* name) {
    add(",\"");
    add(name);
    add("\":");
  }
};

void stage(const Line& line) {
  if (g_staged + line.size + 1 > STAGING_BYTES) drain();
  std::memcpy(g_staging + g_staged, line.text, line.size);
  g_staged += line.size;
  g_staging[g_staged++] = '\n';
}

void format(const Rec& r, Line& line) {
  const Call call = static_cast<Call>(r.call);
  line.add("{\"seq\":");
  line.add_u64(r.seq);
  line.key("tid");
  line.add_u64(r.tid);
  line.key("call");
  line.add("\"");
  line.add(record::call_name(call));
  line.add("\"");
  switch (call) {
    case Call::GET_UNIQUE_ID:
      line.key("id");
      line.add_hex(r.id, false);
      break;
    case Call::COMM_INIT_RANK:
    case Call::COMM_INIT_RANK_CONFIG:
      line.key("id");
      line.add_hex(r.id, false);
      line.key("nranks");
      line.add_i64(r.i0);
      line.key("rank");
      line.add_i64(r.i1);
      break;
    case Call::COMM_INIT_ALL:
      line.key("ndev");
      line.add_i64(r.i0);
      break;
    case Call::COMM_SPLIT:
      line.key("parent");
      line.add_hex(r.comm, true);
      line.key("color");
      line.add_i64(r.i0);
      line.key("key");
      line.add_i64(r.i1);
      break;
    case Call::CREATED:
      line.key("of");
      line.add_u64(r.id);
      line.key("index");
      line.add_i64(r.i0);
      line.key("comm");
      line.add_hex(r.comm, true);
      line.key("device");
      line.add_i64(r.i1);
      line.key("user_rank");
      line.add_i64(r.i2);
      line.key("nranks");
      line.add_i64(r.i3);
      break;
    case Call::FAILED:
      line.key("of");
      line.add_u64(r.id);
      line.key("result");
      line.add_i64(r.i0);
      break;
    case Call::SIGNAL:
      line.key("signal");
      line.add_i64(r.i0);
      line.key("dropped");
      line.add_u64(r.count);
      break;
    case Call::EXIT:
      line.key("dropped");
      line.add_u64(r.count);
      break;
    case Call::GROUP_START:
    case Call::GROUP_END:
      break;
    case Call::COMM_DESTROY:
    case Call::COMM_ABORT:
    case Call::COMM_FINALIZE:
      line.key("comm");
      line.add_hex(r.comm, true);
      break;
    default:  // collectives and p2p
      line.key("comm");
      line.add_hex(r.comm, true);
      line.key("count");
      line.add_u64(r.count);
      line.key("dtype");
      line.add_i64(r.i0);
      if (r.i1 >= 0) {
        line.key("redop");
        line.add_i64(r.i1);
      }
      if (call == Call::SEND || call == Call::RECV) {
        line.key("peer");
        line.add_i64(r.i2);
      } else if (r.i2 >= 0) {
        line.key("root");
        line.add_i64(r.i2);
      }
      line.key("stream");
      line.add_hex(r.stream, true);
      break;
  }
  line.add("}");
}

// Writes the records of `b` not written yet. Under the file lock.
void flush_buffer_locked(ThreadBuffer* b) {
  const uint64_t head = b->head.load(std::memory_order_acquire);
  for (uint64_t i = b->tail.load(std::memory_order_relaxed); i < head; ++i) {
    Line line;
    format(b->recs[i & b->mask], line);
    stage(line);
  }
  b->tail.store(head, std::memory_order_release);
}

// True when some buffer is at least a quarter full: the background thread writes it out before
// its owner has to.
bool filling() {
  const uint32_t n = std::min<uint32_t>(g.nbuffers.load(std::memory_order_acquire), MAX_THREADS);
  for (uint32_t i = 0; i < n; ++i) {
    const ThreadBuffer* b = g.buffers[i].load(std::memory_order_acquire);
    if (b != nullptr && b->head.load(std::memory_order_relaxed) - b->tail.load(std::memory_order_relaxed) > (b->mask + 1) / 4) {
      return true;
    }
  }
  return false;
}

void flush_all_locked() {
  const uint32_t n = std::min<uint32_t>(g.nbuffers.load(std::memory_order_acquire), MAX_THREADS);
  for (uint32_t i = 0; i < n; ++i) {
    if (ThreadBuffer* b = g.buffers[i].load(std::memory_order_acquire)) flush_buffer_locked(b);
  }
  drain();
}

void flush_all() {
  if (g.status.load(std::memory_order_acquire) != READY) return;
  pthread_mutex_lock(&g.file_mutex);
  flush_all_locked();
  pthread_mutex_unlock(&g.file_mutex);
}

// ----------------------------------------------------------------------------------------------
// Buffers and records.

uint32_t current_tid() {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return t_tid;
}

ThreadBuffer* thread_buffer() {
  const uint32_t generation = g.generation.load(std::memory_order_relaxed);
  if (t_buffer != nullptr && t_generation == generation) return t_buffer;
  t_buffer = nullptr;
  t_generation = generation;
  t_tid = 0;
  const uint32_t index = g.nbuffers.fetch_add(1, std::memory_order_acq_rel);
  if (index >= MAX_THREADS) return nullptr;
  const size_t bytes = sizeof(ThreadBuffer) + size_t{g.capacity} * sizeof(Rec);
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  auto* b = static_cast<ThreadBuffer*>(memory);  // mmap memory is zeroed: head = tail = 0
  b->recs = reinterpret_cast<Rec*>(static_cast<char*>(memory) + sizeof(ThreadBuffer));
  b->mask = g.capacity - 1;
  g.buffers[index].store(b, std::memory_order_release);
  t_buffer = b;
  return b;
}

// Appends a record (its seq and tid filled in here); returns its seq, 0 when it was dropped. In a
// signal handler (`in_signal`) it never waits for the lock: a full buffer drops the record.
uint64_t append(Rec r, bool in_signal = false) {
  ThreadBuffer* b = thread_buffer();
  if (b == nullptr) {
    g.dropped.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  r.seq = g.seq.fetch_add(1, std::memory_order_relaxed) + 1;
  r.tid = current_tid();
  const uint64_t head = b->head.load(std::memory_order_relaxed);
  if (head - b->tail.load(std::memory_order_acquire) > b->mask) {  // full: write it out ourselves
    if (in_signal) {
      g.dropped.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    pthread_mutex_lock(&g.file_mutex);
    flush_buffer_locked(b);
    drain();
    pthread_mutex_unlock(&g.file_mutex);
  }
  b->recs[head & b->mask] = r;
  b->head.store(head + 1, std::memory_order_release);
  if (g.exited.load(std::memory_order_relaxed)) flush_all();  // after exit: nothing flushes later
  return r.seq;
}

// ----------------------------------------------------------------------------------------------
// Start-up: at the first intercepted call (not at load: a launcher that never calls NCCL, such as
// torchrun's agent or mpirun, writes nothing).

long env_number(const char* name, long fallback, long low, long high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == 0) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == nullptr || *end != 0 || value < low || value > high) return fallback;
  return value;
}

long env_rank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const long value = env_number(name, -1, 0, 1L << 30);
    if (value >= 0) return value;
  }
  return -1;
}

void write_header() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  for (char* c = host; *c != 0; ++c) {
    if (*c == '"' || *c == '\\' || static_cast<unsigned char>(*c) < 0x20) *c = '_';
  }
  int version = 0;
  if (auto* fn = reinterpret_cast<GetVersionFn*>(next_symbol("ncclGetVersion"))) {
    if (fn(&version) != SUCCESS) version = 0;
  }
  Line line;
  line.add("{\"lockstep_record\":");
  line.add_u64(record::RAW_FORMAT_VERSION);
  line.key("host");
  line.add("\"");
  line.add(host);
  line.add("\"");
  line.key("pid");
  line.add_u64(static_cast<uint64_t>(::getpid()));
  line.key("env_rank");
  line.add_i64(env_rank());
  line.key("nccl_version");
  line.add_i64(version);
  line.key("buffer");
  line.add_u64(g.capacity);
  line.add("}");
  stage(line);
  drain();
}

void on_exit_flush() {
  if (g.status.load(std::memory_order_acquire) != READY) return;
  Rec r{};
  r.call = static_cast<uint16_t>(Call::EXIT);
  r.count = g.dropped.load(std::memory_order_relaxed);
  append(r);
  g.exited.store(true, std::memory_order_relaxed);
  flush_all();
}

void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  if (g.status.load(std::memory_order_acquire) == READY) {
    Rec r{};
    r.call = static_cast<uint16_t>(Call::SIGNAL);
    r.i0 = sig;
    r.count = g.dropped.load(std::memory_order_relaxed);
    append(r, true);
    // The lock may be held by another thread (it finishes soon) or by the interrupted thread
    // itself (it never will): wait a bounded time, then write anyway.
    bool locked = false;
    for (int i = 0; i < 200 && !locked; ++i) {
      locked = pthread_mutex_trylock(&g.file_mutex) == 0;
      if (!locked) {
        struct timespec pause = {0, 1000000};
        ::nanosleep(&pause, nullptr);
      }
    }
    flush_all_locked();
    if (locked) pthread_mutex_unlock(&g.file_mutex);
  }
  if (sig > 0 && sig < 65 && g.handled[sig]) ::sigaction(sig, &g.old_actions[sig], nullptr);
  errno = saved_errno;
  ::raise(sig);  // blocked while we run: delivered, with the old disposition, when we return
}

void install_signal_handlers() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction old = {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO) != 0) {
      continue;  // the program handles it (Python's SIGINT): leave it alone
    }
    struct sigaction action = {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (::sigaction(sig, &action, &g.old_actions[sig]) == 0) g.handled[sig] = true;
  }
}

// The background thread: writes every buffer out every flush_ms, and sooner when one fills, so
// that the calling threads seldom format a record themselves.
void* flusher(void* arg) {
  const auto generation = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(arg));
  const long poll_ms = std::min(POLL_MS, g.flush_ms);
  long waited_ms = 0;
  while (g.generation.load(std::memory_order_relaxed) == generation) {
    struct timespec pause = {poll_ms / 1000, (poll_ms % 1000) * 1000000};
    ::nanosleep(&pause, nullptr);
    waited_ms += poll_ms;
    if (g.generation.load(std::memory_order_relaxed) != generation) break;
    if (waited_ms >= g.flush_ms || filling()) {
      flush_all();
      waited_ms = 0;
    }
  }
  return nullptr;
}

void before_fork() { pthread_mutex_lock(&g.file_mutex); }
void after_fork_parent() { pthread_mutex_unlock(&g.file_mutex); }
void after_fork_child() {
  // The child is a new process: its own file at its first call, its own buffers.
  pthread_mutex_init(&g.file_mutex, nullptr);
  if (g.fd >= 0) ::close(g.fd);
  g.fd = -1;
  g_staged = 0;
  g.nbuffers.store(0);
  for (auto& b : g.buffers) b.store(nullptr);
  g.seq.store(0);
  g.dropped.store(0);
  g.exited.store(false);
  g.generation.fetch_add(1);
  g.status.store(UNINITIALIZED);
}

void initialize() {
  static bool once = false;
  if (!once) {
    once = true;
    ::pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    std::atexit(on_exit_flush);
  }
  const char* dir = std::getenv(record::ENV_DIR);
  if (dir == nullptr || *dir == 0) {
    g.status.store(DISABLED, std::memory_order_release);
    return;
  }
  g.capacity = 16;  // a power of two, at least the value asked for
  while (g.capacity < static_cast<uint32_t>(env_number(record::ENV_BUFFER, DEFAULT_CAPACITY, 16, MAX_CAPACITY))) g.capacity *= 2;
  g.flush_ms = env_number(record::ENV_FLUSH_MS, DEFAULT_FLUSH_MS, 0, 3'600'000);
  char host[128] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  for (char* c = host; *c != 0; ++c) {
    if (*c == '/') *c = '_';
  }
  char path[4096];
  Line pid;
  pid.add_u64(static_cast<uint64_t>(::getpid()));
  pid.text[pid.size] = 0;
  const int length = std::snprintf(path, sizeof(path), "%s/%s.%s.jsonl", dir, host, pid.text);
  if (length <= 0 || static_cast<size_t>(length) >= sizeof(path)) {
    g.status.store(DISABLED, std::memory_order_release);
    return;
  }
  g.fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (g.fd < 0) {
    const char* why = std::strerror(errno);
    Line message;
    message.add("lockstep record: cannot write ");
    message.add(path);
    message.add(": ");
    message.add(why);
    message.add("; not recording\n");
    write_all(2, message.text, message.size);
    g.status.store(DISABLED, std::memory_order_release);
    return;
  }
  write_header();
  install_signal_handlers();
  g.status.store(READY, std::memory_order_release);
  if (g.flush_ms > 0) {
    pthread_t thread;
    void* arg = reinterpret_cast<void*>(static_cast<uintptr_t>(g.generation.load()));
    if (::pthread_create(&thread, nullptr, flusher, arg) == 0) ::pthread_detach(thread);
  }
}

// True when calls are recorded; initializes on the first call.
bool recording() {
  int status = g.status.load(std::memory_order_acquire);
  if (status == READY) return true;
  if (status == DISABLED) return false;
  int expected = UNINITIALIZED;
  if (g.status.compare_exchange_strong(expected, INITIALIZING)) {
    initialize();
  } else {
    while (g.status.load(std::memory_order_acquire) == INITIALIZING) ::sched_yield();
  }
  return g.status.load(std::memory_order_acquire) == READY;
}

// ----------------------------------------------------------------------------------------------
// Forwarding.

// The next definition of `name`: after the recorder in the global scope; else in a library loaded
// privately, as PyTorch's libnccl is (Python dlopens extension modules RTLD_LOCAL, so what they
// need is not in the global scope): $LOCKSTEP_RECORD_NCCL if set, else the loaded libraries whose
// name contains "nccl", then all the others, the recorder and the program left out.
struct LoadedNames {
  char names[48][320];
  int count = 0;
};

int collect_library(struct dl_phdr_info* info, size_t, void* data) {
  auto* loaded = static_cast<LoadedNames*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == 0 || loaded->count >= 48) return 0;
  if (std::strlen(info->dlpi_name) >= sizeof(loaded->names[0])) return 0;
  std::strcpy(loaded->names[loaded->count++], info->dlpi_name);
  return 0;
}

void* symbol_in(const char* library, const char* name) {
  void* handle = ::dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* fn = ::dlsym(handle, name);
  ::dlclose(handle);  // RTLD_NOLOAD took a reference; the library stays loaded by its user
  Dl_info self = {}, found = {};
  if (fn != nullptr && ::dladdr(reinterpret_cast<void*>(&next_symbol), &self) != 0 && ::dladdr(fn, &found) != 0 &&
      self.dli_fbase == found.dli_fbase) {
    return nullptr;  // our own definition
  }
  return fn;
}

void* next_symbol(const char* name) {
  if (void* fn = ::dlsym(RTLD_NEXT, name)) return fn;
  if (const char* configured = std::getenv("LOCKSTEP_RECORD_NCCL"); configured != nullptr && *configured != 0) {
    return symbol_in(configured, name);
  }
  LoadedNames loaded;  // 15 KiB of stack, at the first lookup of each function only
  ::dl_iterate_phdr(collect_library, &loaded);
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < loaded.count; ++i) {
      if ((std::strstr(loaded.names[i], "nccl") != nullptr) != (pass == 0)) continue;
      if (void* fn = symbol_in(loaded.names[i], name)) return fn;
    }
  }
  return nullptr;
}

template <typename Fn>
Fn* real(std::atomic<Fn*>& slot, const char* name) {
  Fn* fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn*>(next_symbol(name));
    if (fn == nullptr) {
      Line message;
      message.add("lockstep record: ");
      message.add(name);
      message.add(" not found in any loaded library but the recorder (is libnccl loaded? "
                  "LOCKSTEP_RECORD_NCCL=PATH names it)\n");
      write_all(2, message.text, message.size);
    }
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

#define LOCKSTEP_REAL(type, name)                 \
  static std::atomic<type*> real_slot{nullptr};   \
  type* const forward = real(real_slot, #name);   \
  if (forward == nullptr) return INTERNAL_ERROR

// Records nothing for calls made from inside an intercepted call (NCCL's own ncclBcast calls
// ncclBroadcast; ncclCommInitAll calls ncclCommInitRank).
struct Outermost {
  bool outer;
  Outermost() : outer(t_depth++ == 0) {}
  ~Outermost() { --t_depth; }
  Outermost(const Outermost&) = delete;
  Outermost& operator=(const Outermost&) = delete;
};

uint64_t record_op(Call call, CommHandle comm, StreamHandle stream, size_t count, DataType dtype, int redop,
                   int root_or_peer) {
  Rec r{};
  r.call = static_cast<uint16_t>(call);
  r.comm = reinterpret_cast<uintptr_t>(comm);
  r.stream = reinterpret_cast<uintptr_t>(stream);
  r.count = count;
  r.i0 = dtype;
  r.i1 = redop;
  r.i2 = root_or_peer;
  return append(r);
}

void record_failure(uint64_t of, Result result) {
  if (of == 0 || result == SUCCESS || result == IN_PROGRESS) return;
  Rec r{};
  r.call = static_cast<uint16_t>(Call::FAILED);
  r.id = of;
  r.i0 = result;
  append(r);
}

int query(const char* name, CommHandle comm, std::atomic<CommQueryFn*>& slot) {
  CommQueryFn* fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<CommQueryFn*>(next_symbol(name));
    slot.store(fn, std::memory_order_relaxed);
  }
  int value = -1;
  if (fn == nullptr || fn(comm, &value) != SUCCESS) return -1;
  return value;
}

void record_created(uint64_t of, int index, CommHandle comm, int fallback_device) {
  static std::atomic<CommQueryFn*> device_fn{nullptr}, rank_fn{nullptr}, count_fn{nullptr};
  Rec r{};
  r.call = static_cast<uint16_t>(Call::CREATED);
  r.id = of;
  r.comm = reinterpret_cast<uintptr_t>(comm);
  r.i0 = index;
  r.i1 = -1;
  r.i2 = -1;
  r.i3 = -1;
  if (comm != nullptr) {
    r.i1 = query("ncclCommCuDevice", comm, device_fn);
    r.i2 = query("ncclCommUserRank", comm, rank_fn);
    r.i3 = query("ncclCommCount", comm, count_fn);
  }
  if (r.i1 < 0) r.i1 = fallback_device;
  append(r);
}

uint64_t record_init(Call call, const UniqueId& id, int nranks, int rank) {
  Rec r{};
  r.call = static_cast<uint16_t>(call);
  r.id = lockstep::fnv1a(id.internal, UNIQUE_ID_BYTES);
  r.i0 = nranks;
  r.i1 = rank;
  return append(r);
}

uint64_t record_comm(Call call, CommHandle comm) {
  Rec r{};
  r.call = static_cast<uint16_t>(call);
  r.comm = reinterpret_cast<uintptr_t>(comm);
  return append(r);
}

template <typename Fn, typename... Args>
Result forward_op(Fn* forward, Call call, CommHandle comm, StreamHandle stream, size_t count, DataType dtype,
                  int redop, int root_or_peer, Args... args) {
  Outermost guard;
  const uint64_t seq = guard.outer && recording() ? record_op(call, comm, stream, count, dtype, redop, root_or_peer) : 0;
  const Result result = forward(args...);
  record_failure(seq, result);
  return result;
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// The interposed API.

extern "C" {

LOCKSTEP_EXPORT Result ncclGetUniqueId(UniqueId* id) {
  LOCKSTEP_REAL(GetUniqueIdFn, ncclGetUniqueId);
  Outermost guard;
  const Result result = forward(id);
  if (guard.outer && result == SUCCESS && id != nullptr && recording()) {
    Rec r{};
    r.call = static_cast<uint16_t>(Call::GET_UNIQUE_ID);
    r.id = lockstep::fnv1a(id->internal, UNIQUE_ID_BYTES);
    append(r);
  }
  return result;
}

LOCKSTEP_EXPORT Result ncclCommInitRank(CommHandle* comm, int nranks, UniqueId id, int rank) {
  LOCKSTEP_REAL(CommInitRankFn, ncclCommInitRank);
  Outermost guard;
  const uint64_t seq = guard.outer && recording() ? record_init(Call::COMM_INIT_RANK, id, nranks, rank) : 0;
  const Result result = forward(comm, nranks, id, rank);
  if (seq != 0 && (result == SUCCESS || result == IN_PROGRESS) && comm != nullptr) record_created(seq, 0, *comm, -1);
  record_failure(seq, result);
  return result;
}

LOCKSTEP_EXPORT Result ncclCommInitRankConfig(CommHandle* comm, int nranks, UniqueId id, int rank, Config* config) {
  LOCKSTEP_REAL(CommInitRankConfigFn, ncclCommInitRankConfig);
  Outermost guard;
  const uint64_t seq = guard.outer && recording() ? record_init(Call::COMM_INIT_RANK_CONFIG, id, nranks, rank) : 0;
  const Result result = forward(comm, nranks, id, rank, config);
  if (seq != 0 && (result == SUCCESS || result == IN_PROGRESS) && comm != nullptr) record_created(seq, 0, *comm, -1);
  record_failure(seq, result);
  return result;
}

LOCKSTEP_EXPORT Result ncclCommInitAll(CommHandle* comms, int ndev, const int* devlist) {
  LOCKSTEP_REAL(CommInitAllFn, ncclCommInitAll);
  Outermost guard;
  uint64_t seq = 0;
  if (guard.outer && recording()) {
    Rec r{};
    r.call = static_cast<uint16_t>(Call::COMM_INIT_ALL);
    r.i0 = ndev;
    seq = append(r);
  }
  const Result result = forward(comms, ndev, devlist);
  if (seq != 0 && result == SUCCESS && comms != nullptr) {
    for (int i = 0; i < ndev; ++i) record_created(seq, i, comms[i], devlist != nullptr ? devlist[i] : i);
  }
  record_failure(seq, result);
  return result;
}

LOCKSTEP_EXPORT Result ncclCommSplit(CommHandle comm, int color, int key, CommHandle* newcomm, Config* config) {
  LOCKSTEP_REAL(CommSplitFn, ncclCommSplit);
  Outermost guard;
  uint64_t seq = 0;
  if (guard.outer && recording()) {
    Rec r{};
    r.call = static_cast<uint16_t>(Call::COMM_SPLIT);
    r.comm = reinterpret_cast<uintptr_t>(comm);
    r.i0 = color;
    r.i1 = key;
    seq = append(r);
  }
  const Result result = forward(comm, color, key, newcomm, config);
  if (seq != 0 && (result == SUCCESS || result == IN_PROGRESS) && newcomm != nullptr) {
    record_created(seq, 0, color == SPLIT_NOCOLOR ? nullptr : *newcomm, -1);
  }
  record_failure(seq, result);
  return result;
}

LOCKSTEP_EXPORT Result ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, RedOp op,
                                     CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(AllReduceFn, ncclAllReduce);
  return forward_op(forward, Call::ALL_REDUCE, comm, stream, count, dtype, op, -1, sendbuff, recvbuff, count, dtype, op,
                    comm, stream);
}

LOCKSTEP_EXPORT Result ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root,
                                     CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(BroadcastFn, ncclBroadcast);
  return forward_op(forward, Call::BROADCAST, comm, stream, count, dtype, -1, root, sendbuff, recvbuff, count, dtype,
                    root, comm, stream);
}

LOCKSTEP_EXPORT Result ncclBcast(void* buff, size_t count, DataType dtype, int root, CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(BcastFn, ncclBcast);
  return forward_op(forward, Call::BCAST, comm, stream, count, dtype, -1, root, buff, count, dtype, root, comm, stream);
}

LOCKSTEP_EXPORT Result ncclReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, RedOp op, int root,
                                  CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(ReduceFn, ncclReduce);
  return forward_op(forward, Call::REDUCE, comm, stream, count, dtype, op, root, sendbuff, recvbuff, count, dtype, op,
                    root, comm, stream);
}

LOCKSTEP_EXPORT Result ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, DataType dtype,
                                     CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(AllGatherFn, ncclAllGather);
  return forward_op(forward, Call::ALL_GATHER, comm, stream, sendcount, dtype, -1, -1, sendbuff, recvbuff, sendcount,
                    dtype, comm, stream);
}

LOCKSTEP_EXPORT Result ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, DataType dtype,
                                         RedOp op, CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(ReduceScatterFn, ncclReduceScatter);
  return forward_op(forward, Call::REDUCE_SCATTER, comm, stream, recvcount, dtype, op, -1, sendbuff, recvbuff,
                    recvcount, dtype, op, comm, stream);
}

LOCKSTEP_EXPORT Result ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, DataType dtype,
                                    CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(AllGatherFn, ncclAlltoAll);
  return forward_op(forward, Call::ALL_TO_ALL, comm, stream, count, dtype, -1, -1, sendbuff, recvbuff, count, dtype,
                    comm, stream);
}

LOCKSTEP_EXPORT Result ncclGather(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root,
                                  CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(RootedFn, ncclGather);
  return forward_op(forward, Call::GATHER, comm, stream, count, dtype, -1, root, sendbuff, recvbuff, count, dtype, root,
                    comm, stream);
}

LOCKSTEP_EXPORT Result ncclScatter(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root,
                                   CommHandle comm, StreamHandle stream) {
  LOCKSTEP_REAL(RootedFn, ncclScatter);
  return forward_op(forward, Call::SCATTER, comm, stream, count, dtype, -1, root, sendbuff, recvbuff, count, dtype,
                    root, comm, stream);
}

LOCKSTEP_EXPORT Result ncclSend(const void* sendbuff, size_t count, DataType dtype, int peer, CommHandle comm,
                                StreamHandle stream) {
  LOCKSTEP_REAL(SendFn, ncclSend);
  return forward_op(forward, Call::SEND, comm, stream, count, dtype, -1, peer, sendbuff, count, dtype, peer, comm, stream);
}

LOCKSTEP_EXPORT Result ncclRecv(void* recvbuff, size_t count, DataType dtype, int peer, CommHandle comm,
                                StreamHandle stream) {
  LOCKSTEP_REAL(RecvFn, ncclRecv);
  return forward_op(forward, Call::RECV, comm, stream, count, dtype, -1, peer, recvbuff, count, dtype, peer, comm, stream);
}

LOCKSTEP_EXPORT Result ncclGroupStart() {
  LOCKSTEP_REAL(GroupFn, ncclGroupStart);
  Outermost guard;
  if (guard.outer && recording()) record_comm(Call::GROUP_START, nullptr);
  return forward();
}

LOCKSTEP_EXPORT Result ncclGroupEnd() {
  LOCKSTEP_REAL(GroupFn, ncclGroupEnd);
  Outermost guard;
  const uint64_t seq = guard.outer && recording() ? record_comm(Call::GROUP_END, nullptr) : 0;
  const Result result = forward();
  record_failure(seq, result);
  return result;
}

LOCKSTEP_EXPORT Result ncclCommDestroy(CommHandle comm) {
  LOCKSTEP_REAL(CommFn, ncclCommDestroy);
  Outermost guard;
  const bool outer = guard.outer && recording();
  if (outer) {
    record_comm(Call::COMM_DESTROY, comm);
    flush_all();
  }
  return forward(comm);
}

LOCKSTEP_EXPORT Result ncclCommAbort(CommHandle comm) {
  LOCKSTEP_REAL(CommFn, ncclCommAbort);
  Outermost guard;
  if (guard.outer && recording()) {
    record_comm(Call::COMM_ABORT, comm);
    flush_all();
  }
  return forward(comm);
}

LOCKSTEP_EXPORT Result ncclCommFinalize(CommHandle comm) {
  LOCKSTEP_REAL(CommFn, ncclCommFinalize);
  Outermost guard;
  const uint64_t seq = guard.outer && recording() ? record_comm(Call::COMM_FINALIZE, comm) : 0;
  if (seq != 0) flush_all();
  const Result result = forward(comm);
  record_failure(seq, result);
  return result;
}

}  // extern "C"

}  // namespace lockstep::nccl_abi
