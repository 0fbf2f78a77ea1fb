#include "runtime/mpi.hpp"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "tessel/core/errors.hpp"

namespace tessel::rt::mpi {

namespace {

using detail::cat;

std::mutex g_mutex;
bool g_initialized = false;
int g_rank = 0, g_size = 1;
MPI_Comm g_host = MPI_COMM_NULL;     // the host thread's collectives
MPI_Comm g_devices = MPI_COMM_NULL;  // the devices' point-to-point messages
std::atomic<double> g_timeout{300.0};
int g_tag_bits = 15;

double env_timeout() {
  const char* v = std::getenv("TESSEL_DISTRIBUTED_TIMEOUT");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end || !(s > 0))
    throw ValueError(cat("environment variable TESSEL_DISTRIBUTED_TIMEOUT='", v, "' is not a positive number of seconds"));
  return s;
}

std::string error_string(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, std::size_t(len));
}

void check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  throw DistributedError(cat(what, ": MPI error on process ", g_rank, ": ", error_string(rc)));
}

// Polls `done` until it says true; DistributedError at the deadline. Each
// poll also drives MPI's progress (a large message moves in fragments only
// while both sides poll), so for the first 50 ms it only yields between
// polls (measured: sleeping even 0.5 ms between polls made a 16 MiB exchange
// 900 times slower than MPI_Allreduce); a longer wait (a peer that has not
// arrived) backs off to sleeps of up to 1 ms, leaving the cores to the devices.
template <class F, class M>
void poll(F&& done, M&& message) {
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(g_timeout.load());
  auto nap = std::chrono::microseconds(1);
  while (!done()) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > limit) throw DistributedError(message());
    if (waited < std::chrono::milliseconds(50)) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

void wait_request(MPI_Request& r, const std::string& what) {
  poll(
      [&] {
        int flag = 0;
        check(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), what);
        return flag != 0;
      },
      [&] {
        return cat(what, ": process ", g_rank, " waited ", g_timeout.load(),
                   " s for the other processes (one failed, exited, or runs a different program)");
      });
}

void require() {
  if (!g_initialized) throw DistributedError("tessel::distributed::initialize() was not called");
}

struct Header {
  std::uint64_t fingerprint;
  std::uint64_t bytes;
};

}  // namespace

void initialize() {
  std::lock_guard<std::mutex> lk(g_mutex);
  if (g_initialized) return;
  const double timeout = env_timeout();  // a bad value fails before MPI starts
  int already = 0;
  MPI_Initialized(&already);
  int provided = 0;
  if (!already) {
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    throw DistributedError(cat("MPI gives thread level ", provided, ", tessel's devices need MPI_THREAD_MULTIPLE (",
                               MPI_THREAD_MULTIPLE, ")"));
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &g_host), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &g_devices), "MPI_Comm_dup");
  // Errors come back as codes (check() turns them into DistributedError), not aborts.
  MPI_Comm_set_errhandler(g_host, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(g_devices, MPI_ERRORS_RETURN);
  g_timeout = timeout;
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(g_devices, MPI_TAG_UB, &ub, &flag);
  g_tag_bits = 15;
  while (flag && ub && g_tag_bits < 30 && (std::int64_t(1) << (g_tag_bits + 1)) - 1 <= std::int64_t(*ub)) ++g_tag_bits;
  g_initialized = true;
}

bool initialized() {
  std::lock_guard<std::mutex> lk(g_mutex);
  return g_initialized;
}
int rank() { return g_rank; }
int tag_bits() { return g_tag_bits; }
int size() { return g_size; }
void set_timeout_seconds(double s) {
  if (!(s > 0)) throw ValueError(cat("the distributed timeout must be a positive number of seconds, got ", s));
  g_timeout = s;
}

std::vector<char> allgather(const void* data, std::size_t bytes, const std::string& what) {
  require();
  // The sizes first: a rank with another size is an error, not a truncation.
  // (On a timeout the request stays pending: its buffers are kept.)
  auto* sizes_in = new std::uint64_t[1 + std::size_t(g_size)];
  sizes_in[0] = bytes;
  MPI_Request r;
  check(MPI_Iallgather(sizes_in, 1, MPI_UINT64_T, sizes_in + 1, 1, MPI_UINT64_T, g_host, &r), what);
  try {
    wait_request(r, what);
  } catch (...) {
    keep_forever(sizes_in);
    throw;
  }
  std::vector<std::uint64_t> sizes(sizes_in + 1, sizes_in + 1 + g_size);
  delete[] sizes_in;
  for (int q = 0; q < g_size; ++q)
    if (sizes[std::size_t(q)] != bytes)
      throw DistributedError(cat(what, ": process ", q, " gives ", sizes[std::size_t(q)], " bytes, process ", g_rank,
                                 " gives ", bytes, " (the processes must pass the same shapes and dtypes)"));
  if (bytes > std::size_t(INT32_MAX)) throw NotImplementedError(cat(what, ": more than 2 GiB per process"));
  auto* in = new std::vector<char>(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  auto* out = new std::vector<char>(bytes * std::size_t(g_size));
  check(MPI_Iallgather(in->data(), int(bytes), MPI_BYTE, out->data(), int(bytes), MPI_BYTE, g_host, &r), what);
  try {
    wait_request(r, what);
  } catch (...) {
    keep_forever(in);
    keep_forever(out);
    throw;
  }
  std::vector<char> result = std::move(*out);
  delete in;
  delete out;
  return result;
}

void broadcast(void* data, std::size_t bytes, int root, const std::string& what) {
  require();
  if (bytes > std::size_t(INT32_MAX)) throw NotImplementedError(cat(what, ": more than 2 GiB"));
  auto* buf = new std::vector<char>(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  MPI_Request r;
  check(MPI_Ibcast(buf->data(), int(bytes), MPI_BYTE, root, g_host, &r), what);
  try {
    wait_request(r, what);
  } catch (...) {
    keep_forever(buf);
    throw;
  }
  if (bytes) std::memcpy(data, buf->data(), bytes);
  delete buf;
}

void exchange(const std::vector<PeerBlocks>& send, const std::vector<PeerBlocks>& recv, std::uint64_t fingerprint,
              int tag, const std::string& what, bool host) {
  require();
  const MPI_Comm comm = host ? g_host : g_devices;
  auto header_of = [&](const std::vector<Block>& blocks) {
    std::uint64_t total = 0;
    for (auto& b : blocks) {
      if (b.bytes > std::size_t(INT32_MAX))
        throw NotImplementedError(cat(what, ": a block of more than 2 GiB between processes"));
      total += b.bytes;
    }
    return Header{fingerprint ^ (std::uint64_t(blocks.size()) << 56), total};
  };
  // Sends: the header, then every block in place (MPI keeps their order).
  // The headers live on the heap, and on a failure are never freed (a send
  // may still be under way).
  auto* headers = new std::vector<Header>();
  struct FreeOnSuccess {
    std::vector<Header>* h;
    bool ok = false;
    ~FreeOnSuccess() {
      if (ok) delete h;
      else keep_forever(h);
    }
  } keep{headers};
  headers->reserve(send.size());
  std::vector<MPI_Request> reqs;
  for (auto& s : send) {
    headers->push_back(header_of(s.blocks));
    reqs.emplace_back();
    check(MPI_Isend(&headers->back(), int(sizeof(Header)), MPI_BYTE, s.peer, tag, comm, &reqs.back()), what);
    for (auto& b : s.blocks) {
      reqs.emplace_back();
      check(MPI_Isend(b.data, int(b.bytes), MPI_BYTE, s.peer, tag, comm, &reqs.back()), what);
    }
  }
  // Receives: each peer's header probed and checked first, then its blocks posted.
  std::vector<bool> got(recv.size(), false);
  std::size_t pending = recv.size();
  std::string mismatch;
  poll(
      [&] {
        for (std::size_t k = 0; k < recv.size(); ++k) {
          if (got[k]) continue;
          int flag = 0;
          MPI_Message msg;
          MPI_Status st;
          check(MPI_Improbe(recv[k].peer, tag, comm, &flag, &msg, &st), what);
          if (!flag) continue;
          int count = 0;
          MPI_Get_count(&st, MPI_BYTE, &count);
          Header h{}, want = header_of(recv[k].blocks);
          std::vector<char> buf(std::size_t(std::max(count, 0)));
          check(MPI_Mrecv(buf.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), what);
          if (buf.size() == sizeof h) std::memcpy(&h, buf.data(), sizeof h);
          got[k] = true;
          --pending;
          if (buf.size() != sizeof h || h.fingerprint != want.fingerprint || h.bytes != want.bytes) {
            if (mismatch.empty())
              mismatch = cat(what, ": process ", recv[k].peer, " reached this collective with another program (",
                             h.bytes, " bytes, fingerprint ", h.fingerprint, "; process ", g_rank, " expected ",
                             want.bytes, " bytes, fingerprint ", want.fingerprint,
                             "): the processes must run the same programs on the same shapes");
            continue;
          }
          for (auto& b : recv[k].blocks) {
            reqs.emplace_back();
            check(MPI_Irecv(b.data, int(b.bytes), MPI_BYTE, recv[k].peer, tag, comm, &reqs.back()), what);
          }
        }
        if (pending) return false;
        if (!mismatch.empty()) return true;
        int done = 1;
        if (!reqs.empty()) check(MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), what);
        return done != 0;
      },
      [&] {
        std::string who;
        for (std::size_t k = 0; k < recv.size(); ++k)
          if (!got[k]) who += cat(who.empty() ? "" : ", ", recv[k].peer);
        return cat(what, ": process ", g_rank, " waited ", g_timeout.load(), " s for process",
                   who.find(',') == std::string::npos ? " " : "es ", who.empty() ? "(its messages)" : who,
                   " (failed, exited, or runs a different program)");
      });
  if (!mismatch.empty()) throw DistributedError(mismatch);
  keep.ok = true;
}

// A pipe's header carries this in place of a byte count ("TESSELCP").
constexpr std::uint64_t kPipeMagic = 0x54455353454c4350ull;

struct Pipe::Impl {
  std::uint64_t fingerprint;
  int tag;
  std::string what;
  struct Message {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = -1;
    std::size_t bytes = 0;
    bool receive = false, done = false;
    std::size_t header = SIZE_MAX;  // a receive: the index of its peer's header
    Header* storage = nullptr;      // a header: where it lies
  };
  std::vector<Message> messages;
  // The headers sent and received, one per peer (a deque: stable addresses).
  std::deque<Header> headers;
  std::map<int, std::size_t> sent_header, received_header;  // peer -> message index
  std::set<std::size_t> checked;                             // headers already matched

  std::size_t post(int peer, void* data, std::size_t bytes, bool receive, std::size_t header) {
    if (bytes > std::size_t(INT32_MAX)) throw NotImplementedError(cat(what, ": a message of more than 2 GiB"));
    Message m;
    m.peer = peer;
    m.bytes = bytes;
    m.receive = receive;
    m.header = header;
    if (receive) check(MPI_Irecv(data, int(bytes), MPI_BYTE, peer, tag, g_devices, &m.request), what);
    else check(MPI_Isend(data, int(bytes), MPI_BYTE, peer, tag, g_devices, &m.request), what);
    messages.push_back(m);
    return messages.size() - 1;
  }

  void wait_one(std::size_t k) {
    Message& m = messages[k];
    if (m.done) return;
    int count = -1;
    poll(
        [&] {
          int flag = 0;
          MPI_Status st;
          const int rc = MPI_Test(&m.request, &flag, &st);
          if (rc != MPI_SUCCESS && m.receive)
            throw DistributedError(cat(what, ": process ", m.peer, " sent process ", g_rank,
                                       " a message this collective does not expect (", error_string(rc),
                                       "): the processes must run the same programs on the same shapes"));
          check(rc, what);
          if (flag && m.receive) MPI_Get_count(&st, MPI_BYTE, &count);
          return flag != 0;
        },
        [&] {
          return cat(what, ": process ", g_rank, " waited ", g_timeout.load(), " s for process ", m.peer,
                     " (failed, exited, or runs a different program)");
        });
    m.done = true;
    if (m.receive && std::size_t(count) != m.bytes)
      throw DistributedError(cat(what, ": process ", m.peer, " sent ", count, " bytes where process ", g_rank,
                                 " expected ", m.bytes, ": the processes must run the same programs on the same shapes"));
  }
};

Pipe::Pipe(const std::vector<int>& peers, std::uint64_t fingerprint, int tag, std::string what)
    : impl_(std::make_unique<Impl>()) {
  require();
  Impl& p = *impl_;
  p.fingerprint = fingerprint;
  p.tag = tag;
  p.what = std::move(what);
  // Headers both ways with every peer first: a process that reached another
  // collective is found by whichever message its peers wait for.
  for (int q : peers) {
    p.headers.push_back(Header{fingerprint, kPipeMagic});
    p.sent_header[q] = p.post(q, &p.headers.back(), sizeof(Header), false, SIZE_MAX);
    p.headers.push_back(Header{});
    p.received_header[q] = p.post(q, &p.headers.back(), sizeof(Header), true, SIZE_MAX);
    p.messages.back().storage = &p.headers.back();
  }
}

Pipe::~Pipe() {
  for (auto& m : impl_->messages)
    if (!m.done) {
      // A message still under way may read or write the headers.
      keep_forever(impl_.release());
      return;
    }
}

std::size_t Pipe::send(int peer, const void* data, std::size_t bytes) {
  Impl& p = *impl_;
  if (!p.sent_header.count(peer)) throw InternalError(cat(p.what, ": a message to process ", peer, ", not a peer of the pipe"));
  return p.post(peer, const_cast<void*>(data), bytes, false, SIZE_MAX);
}

std::size_t Pipe::recv(int peer, void* data, std::size_t bytes) {
  Impl& p = *impl_;
  if (!p.received_header.count(peer))
    throw InternalError(cat(p.what, ": a message from process ", peer, ", not a peer of the pipe"));
  return p.post(peer, data, bytes, true, p.received_header[peer]);
}

void Pipe::wait(std::size_t index) {
  Impl& p = *impl_;
  // A receive waits for its peer's header first; a header is checked when it comes.
  const std::size_t h = p.messages.at(index).storage ? index : p.messages[index].header;
  if (h != SIZE_MAX && !p.checked.count(h)) {
    p.wait_one(h);
    const Header got = *p.messages[h].storage;
    if (got.fingerprint != p.fingerprint || got.bytes != kPipeMagic)
      throw DistributedError(cat(p.what, ": process ", p.messages[h].peer,
                                 " reached this collective with another program (fingerprint ", got.fingerprint,
                                 ", process ", g_rank, " expected ", p.fingerprint,
                                 "): the processes must run the same programs on the same shapes"));
    p.checked.insert(h);
  }
  p.wait_one(index);
}

void Pipe::progress() {
  int flag = 0;
  check(MPI_Iprobe(MPI_ANY_SOURCE, impl_->tag, g_devices, &flag, MPI_STATUS_IGNORE), impl_->what);
}

void Pipe::wait_all() {
  for (std::size_t k = 0; k < impl_->messages.size(); ++k) wait(k);
}

void keep_forever(void* p) {
  static std::mutex m;
  static auto* kept = new std::vector<void*>();
  std::lock_guard<std::mutex> lk(m);
  kept->push_back(p);
}

void finalize() {
  std::lock_guard<std::mutex> lk(g_mutex);
  if (!g_initialized) return;
  int done = 0;
  MPI_Finalized(&done);
  if (!done) {
    MPI_Comm_free(&g_host);
    MPI_Comm_free(&g_devices);
    MPI_Finalize();
  }
  g_initialized = false;
}

}  // namespace tessel::rt::mpi
