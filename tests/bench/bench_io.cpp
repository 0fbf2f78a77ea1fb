// Checkpoints against the disk (issue 39): saving and restoring a sharded
// pytree of 1 GiB (16 float32 leaves of 64 MiB) on 1 and 8 devices.
//  - save: floor = a plain write of the same bytes (the shards' buffers) to
//    as many new files, on as many threads, flushed (syncfs), best of 3,
//    alternating with the timed saves; every timed run starts after the disk
//    has settled; tessel writes the
//    chunks, their CRCs and the metadata, and publishes by rename.
//  - restore: floor = a plain read of those bytes after dropping them from
//    the page cache (posix_fadvise DONTNEED, so both read the disk), best of 3.
//  - restore onto another sharding: the bytes read against the bytes the new
//    shards hold (ts::checkpoint::last_restore_stats).
// The peer: torch.save / torch.load of the same 16 tensors (flushed with
// fsync; the load after dropping the file from the page cache).
//
//   ./tessel bench io [MiB]     (default 1024; the files go to $TESSEL_BENCH_DIR or /tmp)
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
namespace fs = std::filesystem;
using ts::P;

namespace {

void drop_cache(const fs::path& root) {
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) {
      const int fd = ::open(e.path().c_str(), O_RDONLY);
      if (fd >= 0) {
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
      }
    }
}

// Flushes what earlier runs left dirty (untimed), so that each timed run
// pays for its own writes only.
void settle(const fs::path& root) {
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  ::syncfs(fd);
  ::close(fd);
}

// Plain writes (or reads) of `files` files of `bytes` each on `threads` threads.
// Plain writes (or cold reads) of one file per source buffer, `bytes`
// each, on `threads` threads; a write is flushed (syncfs) as a checkpoint
// is. `sink`: one buffer of `bytes` per thread for the reads.
double plain(const fs::path& dir, const std::vector<const char*>& srcs, std::size_t bytes, int threads, bool write,
             std::vector<std::vector<char>>& sink) {
  fs::create_directories(dir);
  if (!write) drop_cache(dir);
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<std::size_t> next{0};
  auto work = [&](int k) {
    char* buf = write ? nullptr : sink[std::size_t(k)].data();
    for (std::size_t i; (i = next.fetch_add(1)) < srcs.size();) {
      const std::string p = (dir / std::to_string(i)).string();
      const int fd = write ? ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) : ::open(p.c_str(), O_RDONLY);
      std::size_t done = 0;
      while (done < bytes) {
        const ssize_t r = write ? ::write(fd, srcs[i] + done, bytes - done) : ::pread(fd, buf + done, bytes - done, off_t(done));
        if (r <= 0) break;
        done += std::size_t(r);
      }
      ::close(fd);
    }
  };
  std::vector<std::thread> ts;
  for (int k = 1; k < threads; ++k) ts.emplace_back(work, k);
  work(0);
  for (auto& t : ts) t.join();
  if (write) settle(dir);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::size_t(std::atoll(argv[1])) : 1024;
  const char* env = std::getenv("TESSEL_BENCH_DIR");
  const fs::path root = fs::path(env ? env : "/tmp") / ("tessel_bench_io_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const int leaves = 16;
  const std::int64_t rows = std::int64_t(mib) * 1024 * 1024 / 4 / leaves / 4096;
  const std::size_t leaf_bytes = std::size_t(rows) * 4096 * 4, total = leaf_bytes * leaves;
  const int threads = std::min(4, bench::cores());  // what ts::checkpoint uses
  std::vector<std::vector<char>> sink(std::size_t(threads), std::vector<char>(leaf_bytes, 0));

  std::printf("io: %d float32 leaves of (%lld, 4096), %.0f MiB in all; files in %s\n", leaves, (long long)rows,
              double(total) / (1 << 20), root.c_str());
  const std::string torch_setup = "import os\nd = {str(i): torch.rand(" + std::to_string(rows) + ", 4096) for i in range(" +
                                  std::to_string(leaves) + ")}\np = '" + (root / "torch.pt").string() + "'";
  const double torch_save = bench::torch_seconds(
      torch_setup, "f = open(p, 'wb'); torch.save(d, f); f.flush(); os.fsync(f.fileno()); f.close()", 3);
  const double torch_load = bench::torch_seconds(
      torch_setup + "\nf = open(p, 'wb'); torch.save(d, f); f.flush(); os.fsync(f.fileno()); f.close()",
      "fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd); e = "
      "torch.load(p)",
      3);
  fs::remove(root / "torch.pt");

  for (int devices : {1, 8}) {
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + devices), {devices}, {"x"});
    ts::NamedSharding sh(mesh, P("x"));
    std::vector<ts::Array> tree;
    for (int i = 0; i < leaves; ++i)
      tree.push_back(ts::device_put(ts::full({rows, 4096}, float(i)), sh).block_until_ready());
    const int chunks = leaves * devices;
    int n = 0;
    bench::header("save and restore, " + std::to_string(devices) + " device(s), " + std::to_string(chunks) +
                  " chunk files; floors: the bytes copied once through memory (" +
                  bench::describe(bench::memory_floor(total, total), 2.0 * double(total)) + ")");
    // The floors: the same bytes (the shards' own buffers) written plainly to
    // as many new files and flushed, alternating with the timed saves, each
    // run after the disk settled; then read back cold.
    std::vector<const char*> shards;
    for (auto& a : tree)
      for (auto& sh : a.addressable_shards()) shards.push_back(reinterpret_cast<const char*>(sh.unsafe_buffer_pointer()));
    const std::size_t shard_bytes = total / shards.size();
    std::vector<double> saves, plain_w, plain_r;
    for (int k = 0; k < 3; ++k) {
      const fs::path p = root / ("plain" + std::to_string(k));
      settle(root);
      plain_w.push_back(plain(p, shards, shard_bytes, threads, true, sink));
      plain_r.push_back(plain(p, shards, shard_bytes, threads, false, sink));
      fs::remove_all(p);
      settle(root);
      auto t0 = std::chrono::steady_clock::now();
      ts::checkpoint::save((root / std::to_string(n++)).string(), tree).wait();
      saves.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (auto* v : {&saves, &plain_w, &plain_r}) std::sort(v->begin(), v->end());
    const double save_s = saves[1], disk_w = plain_w[1], disk_r = plain_r[1];
    const std::string ck = (root / "0").string();
    std::vector<ts::ShapeDtypeStruct> target(leaves, ts::ShapeDtypeStruct{{rows, 4096}, ts::float32, ts::Sharding(sh)});
    const double restore_s = bench::seconds([&] {
      drop_cache(ck);
      auto r = ts::checkpoint::restore(ck, target);
      r.back().block_until_ready();
    }, 3, 0);
    // True lower bounds: the bytes copied once through memory (into the page
    // cache, or out of it). The disk's own speed is the plain runs' (medians).
    const bench::Floor copy = bench::memory_floor(total, total);
    bench::row("checkpoint::save", copy.seconds, save_s, torch_save);
    bench::row("checkpoint::restore", copy.seconds, restore_s, torch_load);
    std::printf("plain write %.1f ms (runs %.0f..%.0f), cold read %.1f ms (runs %.0f..%.0f) of the same bytes:\n"
                "save at %.2fx and restore at %.2fx the disk's plain bandwidth (goal: at least 0.7x)\n",
                disk_w * 1e3, plain_w.front() * 1e3, plain_w.back() * 1e3, disk_r * 1e3, plain_r.front() * 1e3,
                plain_r.back() * 1e3, disk_w / save_s, disk_r / restore_s);
    if (devices == 8) {
      for (auto [what, s] : {std::pair<const char*, ts::Sharding>{"4 devices, rows", ts::NamedSharding(ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + 4), {4}, {"x"}), P("x"))},
                             {"8 devices, columns", ts::NamedSharding(mesh, P(ts::None, "x"))},
                             {"3 devices, rows (uneven)", ts::NamedSharding(ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + 3), {3}, {"x"}), P("x"))}}) {
        std::vector<ts::ShapeDtypeStruct> other(leaves, ts::ShapeDtypeStruct{{rows, 4096}, ts::float32, s});
        drop_cache(ck);
        auto t0 = std::chrono::steady_clock::now();
        ts::checkpoint::restore(ck, other).back().block_until_ready();
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const auto st = ts::checkpoint::last_restore_stats();
        std::printf("restore onto %-26s %8.1f ms: read %.1f MiB for shards of %.1f MiB (%.3fx)\n", what, sec * 1e3,
                    double(st.bytes_read) / (1 << 20), double(st.bytes_needed) / (1 << 20),
                    double(st.bytes_read) / double(st.bytes_needed));
      }
    }
    for (int k = 0; k < n; ++k) fs::remove_all(root / std::to_string(k));
  }
  fs::remove_all(root);
  return bench::status();
}
