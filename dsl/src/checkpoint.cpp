// Sharded checkpoints (tessel/checkpoint.hpp, docs/checkpoints.md): which
// process writes which chunk, the commit that publishes a save, and the
// restore that reads each new shard from the chunks it covers.
#include <tessel/checkpoint.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/checkpoint_files.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/mpi.hpp"
#include "runtime/transfer.hpp"

namespace tessel::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tessel::detail::cat;

namespace detail {

namespace {

constexpr const char* kMeta = "tessel_checkpoint.json";
constexpr const char* kFormat = "tessel.checkpoint";
constexpr int kVersion = 1;

std::atomic<std::uint64_t> g_bytes_read{0}, g_bytes_needed{0};

std::string normalized(const std::string& dir, const char* what) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d.empty()) throw ValueError(cat("checkpoint::", what, ": the directory is empty"));
  return d;
}
std::string partial_of(const std::string& dir) { return dir + ".tessel-partial"; }
std::string old_of(const std::string& dir) { return dir + ".tessel-old"; }

bool several() { return process_count() > 1; }
bool leader() { return process_index() == 0; }

// Every process's `text`, in rank order.
std::vector<std::string> allgather_text(const std::string& text, const std::string& what) {
  if (!several()) return {text};
  const std::uint64_t n = text.size();
  auto sizes = rt::mpi::allgather(&n, sizeof n, what);
  std::uint64_t most = 0;
  std::vector<std::uint64_t> len(std::size_t(rt::mpi::size()));
  for (std::size_t r = 0; r < len.size(); ++r) {
    std::memcpy(&len[r], sizes.data() + r * sizeof n, sizeof n);
    most = std::max(most, len[r]);
  }
  std::string padded = text;
  padded.resize(most);
  auto all = rt::mpi::allgather(padded.data(), most, what);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < len.size(); ++r) out.emplace_back(all.data() + r * most, len[r]);
  return out;
}

// Runs f(0..n-1) on up to 4 host threads (file I/O and checksums; the
// devices' threads stay free for programs running beside an async save).
void run_parallel(std::size_t n, const std::function<void(std::size_t)>& f) {
  if (n == 0) return;
  const std::size_t k = std::min<std::size_t>({n, std::max(1u, std::thread::hardware_concurrency()), 4});
  std::atomic<std::size_t> next{0};
  std::mutex m;
  std::exception_ptr error;
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < k; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// The chunk shape of a leaf saved with `layout`: its tile, at least 1 per dim (Zarr's rule).
Shape chunk_shape(const AxisSharding& layout, const Shape& shape) {
  Shape c = layout.tile_shape(shape);
  for (auto& d : c) d = std::max<std::int64_t>(d, 1);
  return c;
}

std::string error_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

// ---------------------------------------------------------------- saving

struct SaveJob {
  std::string dir, partial;
  SaveOptions options;
  std::vector<Array> leaves;  // keeps the buffers alive while the save reads them
  std::vector<std::string> paths, leaf_dirs;
  struct Task {
    std::size_t leaf;
    std::int64_t pos;
    std::vector<std::int64_t> grid;
  };
  std::vector<Task> tasks;
  json records = json::array();  // this process's chunk files
  std::exception_ptr write_error;

  std::mutex m, join_m;
  std::condition_variable cv;
  bool written = false, finished = false;
  std::exception_ptr error;
  std::thread thread;

  void write_chunks();
  void commit();
  void finish(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(m);
    error = e;
    finished = true;
    cv.notify_all();
  }
};

namespace {
// Async saves still running; exit() waits for them before it destroys
// anything they use (registered once, after the runtime exists).
std::mutex g_jobs_m;
std::vector<std::weak_ptr<SaveJob>> g_jobs;
void join_jobs_at_exit() {
  std::vector<std::shared_ptr<SaveJob>> jobs;
  {
    std::lock_guard<std::mutex> lock(g_jobs_m);
    for (auto& w : g_jobs)
      if (auto j = w.lock()) jobs.push_back(j);
    g_jobs.clear();
  }
  for (auto& j : jobs) {
    std::lock_guard<std::mutex> lock(j->join_m);
    if (j->thread.joinable()) j->thread.join();
  }
}
void register_job(const std::shared_ptr<SaveJob>& job) {
  static bool once = (std::atexit(join_jobs_at_exit), true);
  (void)once;
  std::lock_guard<std::mutex> lock(g_jobs_m);
  std::erase_if(g_jobs, [](const std::weak_ptr<SaveJob>& w) { return w.expired(); });
  g_jobs.push_back(job);
}
}  // namespace

void SaveJob::write_chunks() {
  std::mutex rm;
  run_parallel(tasks.size(), [&](std::size_t t) {
    const Task& task = tasks[t];
    const auto& a = tessel::detail::concrete(leaves[task.leaf]);
    const rt::BufferRef& buf = a.buffers.at(std::size_t(task.pos));
    buf->ready().wait();
    const char* data = static_cast<const char*>(buf->data());
    const std::size_t bytes = a.tile_bytes();
    const std::string key = chunk_key(task.grid);
    const std::string path = partial + "/" + leaf_dirs[task.leaf] + "/" + key;
    // What the file holds: the tile's bytes, or their zstd frame.
    std::vector<char> z;
    if (options.compression == "zstd") z = zstd_compress(data, bytes, options.zstd_level);
    const char* stored_data = z.empty() ? data : z.data();
    const std::size_t stored = z.empty() ? bytes : z.size();
    write_file(path, stored_data, stored);
    const std::vector<std::uint32_t> crcs = piece_crcs(stored_data, stored);
    std::lock_guard<std::mutex> lock(rm);
    records.push_back({{"leaf", task.leaf}, {"key", key}, {"bytes", stored}, {"crc32", crcs}});
  });
  // This process's chunks (and, on the leader, the layout) on the disk
  // before the processes agree to publish.
  sync_filesystem(partial);
}

void SaveJob::commit() {
  // Every process's records (or its error): all publish, or none.
  json mine = {{"ok", !write_error}, {"error", write_error ? error_text(write_error) : ""}, {"records", records}};
  std::vector<std::string> all = allgather_text(mine.dump(), "checkpoint::save " + dir);
  std::vector<json> files(leaves.size(), json::object());
  for (std::size_t r = 0; r < all.size(); ++r) {
    json j = json::parse(all[r]);
    if (!j["ok"].get<bool>()) {
      if (write_error) std::rethrow_exception(write_error);
      throw FileError(cat("checkpoint::save ", dir, ": process ", r, " failed: ", j["error"].get<std::string>()));
    }
    for (const auto& rec : j["records"])
      files[rec["leaf"].get<std::size_t>()][rec["key"].get<std::string>()] = {{"bytes", rec["bytes"]},
                                                                              {"crc32", rec["crc32"]}};
  }
  std::string failure;
  if (leader()) {
    try {
      json meta = {{"format", kFormat}, {"version", kVersion}, {"piece_bytes", kPiece}, {"leaves", json::array()}};
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        const auto& a = tessel::detail::concrete(leaves[i]);
        meta["leaves"].push_back({{"path", paths[i]},
                                  {"dir", leaf_dirs[i]},
                                  {"dtype", dtype_name(a.dtype)},
                                  {"shape", a.shape},
                                  {"weak_type", a.weak_type},
                                  {"sharding", leaves[i].sharding().str()},
                                  {"chunks", chunk_shape(a.layout, a.shape)},
                                  {"compression", options.compression},
                                  {"files", files[i]}});
      }
      // The chunks are flushed (write_chunks); the metadata and the
      // directory entries are now, before the rename publishes them.
      const std::string text = meta.dump(1);
      write_file(partial + "/" + kMeta, text.data(), text.size(), true);
      sync_dir(partial);
      // Publish: the rename is the commit point.
      const fs::path parent = fs::absolute(fs::path(dir)).parent_path();
      if (fs::exists(dir)) {
        fs::remove_all(old_of(dir));
        fs::rename(dir, old_of(dir));
        fs::rename(partial, dir);
        sync_dir(parent.string());
        fs::remove_all(old_of(dir));
      } else {
        fs::rename(partial, dir);
        sync_dir(parent.string());
      }
    } catch (const Error& e) {
      failure = e.what();
    } catch (const std::exception& e) {
      failure = cat("checkpoint::save ", dir, ": ", e.what());
    }
  }
  // The leader says whether it published; everyone returns after it did.
  if (several()) {
    std::vector<std::string> status = allgather_text(failure, "checkpoint::save " + dir + " (publishing)");
    failure = status[0];
  }
  if (!failure.empty()) throw FileError(failure);
}

SaveHandle save_leaves(const std::string& dir_in, const std::vector<Array>& leaves,
                       const std::vector<std::string>& paths, const SaveOptions& options) {
  const std::string dir = normalized(dir_in, "save");
  if (options.compression != "none" && options.compression != "zstd")
    throw ValueError(cat("checkpoint::save: compression must be \"none\" or \"zstd\", got \"", options.compression, "\""));
  auto job = std::make_shared<SaveJob>();
  job->dir = dir;
  job->partial = partial_of(dir);
  job->options = options;
  job->paths = paths;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const auto& a = tessel::detail::concrete(leaves[i]);  // ConcretizationError for a tracer
    (void)a;
    job->leaves.push_back(leaves[i]);
    job->leaf_dirs.push_back(leaf_dir_name(i, paths[i]));
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    const bool is_ckpt = fs::exists(fs::path(dir) / kMeta, ec);
    if (!options.force)
      throw ValueError(cat("checkpoint::save: ", dir, " already exists; pass {.force = true} to replace it"));
    if (!is_ckpt && !fs::is_empty(dir, ec))
      throw ValueError(cat("checkpoint::save: ", dir, " exists and is not a checkpoint (no ", kMeta,
                           "); it is left alone"));
  }
  // The leader lays out the partial directory (a stale one from a save
  // that died is removed); the others wait for it.
  std::string failure;
  if (leader()) {
    try {
      fs::remove_all(job->partial);
      fs::create_directories(job->partial);
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        const auto& a = tessel::detail::concrete(leaves[i]);
        const std::string ld = job->partial + "/" + job->leaf_dirs[i];
        fs::create_directory(ld);
        const std::string za = zarray_json(a.shape, chunk_shape(a.layout, a.shape), a.dtype, options.compression,
                                           options.zstd_level);
        write_file(ld + "/.zarray", za.data(), za.size());
        const std::string attrs =
            json({{"tessel_path", paths[i]}, {"tessel_dtype", dtype_name(a.dtype)}}).dump(4);
        write_file(ld + "/.zattrs", attrs.data(), attrs.size());
      }
    } catch (const Error& e) {
      failure = e.what();
    } catch (const std::exception& e) {
      failure = cat("checkpoint::save: cannot lay out ", job->partial, ": ", e.what());
    }
  }
  if (several()) failure = allgather_text(failure, "checkpoint::save " + dir + " (layout)")[0];
  if (!failure.empty()) throw FileError(failure);

  // Chunks: each distinct tile once in the job, by the process holding the
  // first device (in mesh order) that has it.
  rt::Runtime& runtime = tessel::detail::runtime();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const auto& a = tessel::detail::concrete(leaves[i]);
    if (numel(a.shape) == 0) continue;
    const auto& ids = a.layout.mesh->device_ids();
    std::set<std::vector<std::int64_t>> seen;
    for (std::size_t p = 0; p < ids.size(); ++p) {
      auto ti = a.layout.tile_index(std::int64_t(p));
      if (!seen.insert(ti).second) continue;
      if (a.layout.shard_box(a.shape, std::int64_t(p)).empty()) continue;
      if (runtime.is_local(ids[p])) job->tasks.push_back({i, std::int64_t(p), ti});
    }
  }
  auto write = [job] {
    try {
      job->write_chunks();
    } catch (...) {
      job->write_error = std::current_exception();
    }
  };
  if (!options.async) {
    write();
    job->commit();
    job->finish(nullptr);
    return SaveHandle(job);
  }
  // Async: one process commits in the background; several commit in wait()
  // (their agreement is a collective, made on the caller's thread).
  const bool commit_in_background = !several();
  job->thread = std::thread([job, write, commit_in_background] {
    write();
    if (commit_in_background) {
      try {
        job->commit();
        job->finish(nullptr);
      } catch (...) {
        job->finish(std::current_exception());
      }
    } else {
      std::lock_guard<std::mutex> lock(job->m);
      job->written = true;
      job->cv.notify_all();
    }
  });
  register_job(job);
  return SaveHandle(job);
}

// ---------------------------------------------------------------- restoring

namespace {

struct SavedLeaf {
  std::string path, dir;
  DType dtype;
  Shape shape, chunks;
  bool weak_type;
  std::string compression;
  // chunk key -> (bytes, CRC-32 per piece)
  std::map<std::string, std::pair<std::size_t, std::vector<std::uint32_t>>> files;
};

std::vector<SavedLeaf> read_meta(const std::string& dir) {
  const std::string meta_path = dir + "/" + kMeta;
  std::error_code ec;
  if (!fs::exists(meta_path, ec)) {
    if (fs::exists(partial_of(dir), ec))
      throw FileError(cat("checkpoint::restore: ", dir, " is not a checkpoint: a save into it did not finish (",
                          partial_of(dir), " is what it left)"));
    if (!fs::exists(dir, ec)) throw FileError(cat("checkpoint::restore: ", dir, " does not exist"));
    throw FileError(cat("checkpoint::restore: ", dir, " is not a checkpoint (it has no ", kMeta, ")"));
  }
  const std::string text = read_text(meta_path);
  std::vector<SavedLeaf> out;
  try {
    const json j = json::parse(text);
    if (j.at("format").get<std::string>() != kFormat) throw FileError("not a tessel checkpoint");
    const int version = j.at("version").get<int>();
    if (version != kVersion)
      throw FileError(cat("format version ", version, ", which this tessel (version ", kVersion, ") cannot read"));
    if (j.at("piece_bytes").get<std::size_t>() != kPiece) throw FileError("checksums over pieces of another size");
    for (const auto& l : j.at("leaves")) {
      SavedLeaf s;
      s.path = l.at("path").get<std::string>();
      s.dir = l.at("dir").get<std::string>();
      s.dtype = dtype_from_name(l.at("dtype").get<std::string>());
      s.shape = l.at("shape").get<Shape>();
      s.chunks = l.at("chunks").get<Shape>();
      s.weak_type = l.at("weak_type").get<bool>();
      s.compression = l.at("compression").get<std::string>();
      if (s.chunks.size() != s.shape.size() || s.dir.find('/') != std::string::npos || s.dir.find("..") != std::string::npos)
        throw FileError("a leaf's chunks or directory are malformed");
      for (auto d : s.chunks)
        if (d < 1) throw FileError("a chunk dimension below 1");
      for (const auto& [key, f] : l.at("files").items())
        s.files[key] = {f.at("bytes").get<std::size_t>(), f.at("crc32").get<std::vector<std::uint32_t>>()};
      out.push_back(std::move(s));
    }
  } catch (const FileError& e) {
    throw FileError(cat("checkpoint::restore: ", meta_path, ": ", e.what()));
  } catch (const Error& e) {
    throw FileError(cat("checkpoint::restore: ", meta_path, " is damaged: ", e.what()));
  } catch (const std::exception& e) {
    throw FileError(cat("checkpoint::restore: ", meta_path, " is damaged: ", e.what()));
  }
  return out;
}

// Where a saved chunk's values go: the part `region` (global coordinates)
// into the tile of shape `tile` at `origin`, held in `dst`.
struct Dest {
  Box region;
  void* dst;
  Shape tile;
  std::vector<std::int64_t> origin;
};

// Reads saved chunk `grid` of leaf `s` once for all its destinations;
// returns the bytes read from the file. Raw chunks are read only in the
// pieces that hold the destinations' rows (or straight into the one
// destination that is the same tile).
std::size_t read_chunk(const std::string& dir, const SavedLeaf& s, const std::vector<std::int64_t>& grid,
                       const std::vector<Dest>& dests) {
  const std::size_t es = dtype_size(s.dtype);
  const std::string key = chunk_key(grid);
  const std::string path = dir + "/" + s.dir + "/" + key;
  auto it = s.files.find(key);
  if (it == s.files.end())
    throw FileError(cat("checkpoint::restore: the metadata of ", dir, " lists no chunk ", key, " for the leaf ", s.path,
                        " (", path, "): the checkpoint is incomplete"));
  const auto& [bytes, crcs] = it->second;
  ChunkReader reader(path, bytes, crcs);
  std::vector<std::int64_t> origin(grid.size());
  for (std::size_t d = 0; d < grid.size(); ++d) origin[d] = grid[d] * s.chunks[d];
  const std::size_t raw_bytes = std::size_t(numel(s.chunks)) * es;
  // A copy of the chunk where one is needed: one per thread, kept across
  // chunks (a fresh one per chunk would pay its page faults every time).
  thread_local std::vector<char> staging, frame;
  auto staged = [&] {
    if (staging.size() < raw_bytes) staging.resize(raw_bytes);
    return staging.data();
  };
  if (s.compression == "zstd") {
    if (frame.size() < bytes) frame.resize(bytes);
    const std::size_t n = reader.read_all(frame.data());
    char* chunk = staged();
    zstd_decompress(frame.data(), bytes, chunk, raw_bytes, path);
    for (const Dest& d : dests) rt::copy_region(chunk, s.chunks, origin, d.dst, d.tile, d.origin, d.region, es);
    return n;
  }
  if (bytes != raw_bytes)
    throw FileError(cat("checkpoint::restore: the metadata says the raw chunk ", path, " has ", bytes,
                        " bytes, but a chunk of shape ", shape_str(s.chunks), " in ", dtype_name(s.dtype), " has ",
                        raw_bytes));
  // The same tile on both sides: read it in place.
  if (dests.size() == 1 && dests[0].tile == s.chunks && dests[0].origin == origin)
    return reader.read_all(static_cast<char*>(dests[0].dst));
  const int r = int(s.chunks.size());
  std::vector<std::int64_t> stride(r, 1);
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * s.chunks[d + 1];
  // A destination taking whole rows (every trailing dim whole, in the chunk
  // and in its tile alike) is one contiguous range on both sides: read in
  // place, only its end pieces through a piece-sized buffer.
  std::size_t n = 0;
  std::vector<const Dest*> rest;
  std::unique_ptr<char[]> edge;
  std::size_t edge_piece = SIZE_MAX;
  for (const Dest& dest : dests) {
    bool rows = r >= 1;
    for (int d = 1; d < r && rows; ++d)
      rows = dest.region.start[d] == origin[d] && dest.region.stop[d] - dest.region.start[d] == s.chunks[d] &&
             dest.tile[d] == s.chunks[d] && dest.origin[d] == origin[d];
    if (!rows) {
      rest.push_back(&dest);
      continue;
    }
    if (!edge) edge.reset(new char[kPiece]);
    const std::size_t row = std::size_t(stride[0]) * es;
    n += reader.read_range(std::size_t(dest.region.start[0] - origin[0]) * row,
                           std::size_t(dest.region.stop[0] - dest.region.start[0]) * row,
                           static_cast<char*>(dest.dst) + std::size_t(dest.region.start[0] - dest.origin[0]) * row,
                           edge.get(), edge_piece);
  }
  if (rest.empty()) return n;
  // Else only the pieces that hold the regions' rows, through the staging
  // copy: runs along the trailing dims that a region spans whole are contiguous.
  std::vector<char> want(reader.pieces(), 0);
  for (const Dest* dp : rest) {
    const Dest& dest = *dp;
    std::vector<std::int64_t> lo(r), ext(r);
    for (int d = 0; d < r; ++d) {
      lo[d] = dest.region.start[d] - origin[d];
      ext[d] = dest.region.stop[d] - dest.region.start[d];
    }
    int k = r - 1;  // runs vary dims < k; dim k and after are one run
    while (k > 0 && ext[k] == s.chunks[k]) --k;
    const std::int64_t run = r == 0 ? 1 : ext[k] * stride[k];
    std::vector<std::int64_t> idx(std::size_t(std::max(k, 0)), 0);
    for (bool more = true; more;) {
      std::int64_t off = r == 0 ? 0 : lo[k] * stride[k];
      for (int d = 0; d < k; ++d) off += (lo[d] + idx[d]) * stride[d];
      const std::size_t b0 = std::size_t(off) * es, b1 = std::size_t(off + run) * es;
      for (std::size_t p = b0 / kPiece; p <= (b1 - 1) / kPiece; ++p) want[p] = 1;
      more = false;
      for (int d = k - 1; d >= 0; --d) {
        if (++idx[d] < ext[d]) {
          more = true;
          break;
        }
        idx[d] = 0;
      }
    }
  }
  char* chunk = staged();
  for (std::size_t p = 0; p < want.size();) {
    if (!want[p]) {
      ++p;
      continue;
    }
    std::size_t q = p;
    while (q + 1 < want.size() && want[q + 1]) ++q;
    n += reader.read_pieces(p, q, chunk);
    p = q + 1;
  }
  for (const Dest* d : rest) rt::copy_region(chunk, s.chunks, origin, d->dst, d->tile, d->origin, d->region, es);
  return n;
}

}  // namespace

std::vector<std::string> saved_paths(const std::string& dir_in) {
  std::vector<std::string> out;
  for (const auto& l : read_meta(normalized(dir_in, "restore"))) out.push_back(l.path);
  return out;
}

std::vector<Array> restore_leaves(const std::string& dir_in, const std::vector<LeafTarget>& targets,
                                  const std::vector<std::string>& paths) {
  const std::string dir = normalized(dir_in, "restore");
  const std::vector<SavedLeaf> saved = read_meta(dir);
  if (saved.size() != targets.size()) {
    std::string list;
    for (std::size_t i = 0; i < saved.size() && i < 8; ++i) list += (i ? ", " : "") + saved[i].path;
    throw ValueError(cat("checkpoint::restore: ", dir, " holds ", saved.size(), " leaves (", list,
                         saved.size() > 8 ? ", ..." : "", ") but the target has ", targets.size()));
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].path != paths[i])
      throw ValueError(cat("checkpoint::restore: leaf ", i, " of ", dir, " is ", saved[i].path,
                           " but the target's leaf ", i, " is ", paths[i], ": the trees differ"));
    if (saved[i].shape != targets[i].shape)
      throw ValueError(cat("checkpoint::restore: the leaf ", paths[i], " of ", dir, " has shape ",
                           shape_str(saved[i].shape), " but the target says ", shape_str(targets[i].shape)));
  }
  rt::Runtime& runtime = tessel::detail::runtime();
  const Device default_device = local_devices().at(0);
  // Per leaf: its sharding and layout, and one read per distinct local tile.
  struct Out {
    Sharding sharding;
    AxisSharding layout;
    bool committed;
    std::vector<rt::BufferRef> buffers;
  };
  std::vector<Out> outs;
  // Each distinct tile this process holds, read into its first device's
  // buffer, which the devices holding the same tile view.
  struct Tile {
    std::size_t leaf;
    std::vector<std::int64_t> positions;
    Box box;
    Shape shape;
    rt::BufferRef buffer;
  };
  std::vector<Tile> tiles;
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const auto& t = targets[i];
    Sharding sh = t.sharding ? *t.sharding : Sharding(SingleDeviceSharding(default_device));
    AxisSharding layout = t.sharding ? tessel::detail::axis_sharding(sh, saved[i].shape)
                                     : replicated(tessel::detail::flat_mesh({default_device}), int(saved[i].shape.size()));
    const auto& ids = layout.mesh->device_ids();
    std::map<std::vector<std::int64_t>, std::size_t> by_tile;
    for (std::size_t p = 0; p < ids.size(); ++p) {
      if (!runtime.is_local(ids[p])) continue;
      auto ti = layout.tile_index(std::int64_t(p));
      auto [it, fresh] = by_tile.emplace(ti, tiles.size());
      if (fresh) tiles.push_back({i, {}, layout.shard_box(saved[i].shape, std::int64_t(p)), layout.tile_shape(saved[i].shape), nullptr});
      tiles[it->second].positions.push_back(std::int64_t(p));
    }
    outs.push_back({sh, layout, t.sharding && t.committed, std::vector<rt::BufferRef>(ids.size())});
  }
  // Each saved chunk that a tile needs is read once, for all the tiles it feeds.
  struct ChunkJob {
    std::size_t leaf;
    std::vector<std::int64_t> grid;
    std::vector<Dest> dests;
  };
  std::vector<ChunkJob> jobs;
  std::map<std::pair<std::size_t, std::vector<std::int64_t>>, std::size_t> job_of;
  std::uint64_t needed = 0;
  for (Tile& tile : tiles)
    tessel::detail::check_allocation(std::size_t(numel(tile.shape)) * dtype_size(saved[tile.leaf].dtype), 1,
                                     "checkpoint::restore of " + saved[tile.leaf].path);
  run_parallel(tiles.size(), [&](std::size_t k) {
    Tile& tile = tiles[k];
    const std::size_t tile_bytes = std::size_t(numel(tile.shape)) * dtype_size(saved[tile.leaf].dtype);
    const auto& ids = outs[tile.leaf].layout.mesh->device_ids();
    tile.buffer = rt::Buffer::allocate(ids[std::size_t(tile.positions[0])], tile_bytes);
    if (numel(tile.box.extent()) != numel(tile.shape)) std::memset(tile.buffer->data(), 0, tile_bytes);  // padding reads as zeros
  });
  for (Tile& tile : tiles) {
    const SavedLeaf& s = saved[tile.leaf];
    const std::size_t es = dtype_size(s.dtype);
    if (tile.box.empty()) continue;
    needed += std::uint64_t(numel(tile.box.extent())) * es;
    const int r = int(s.shape.size());
    std::vector<std::int64_t> g0(r), g1(r), g(r);
    for (int d = 0; d < r; ++d) {
      g0[d] = tile.box.start[d] / s.chunks[d];
      g1[d] = (tile.box.stop[d] - 1) / s.chunks[d];
      g[d] = g0[d];
    }
    for (bool more = true; more;) {
      Box cb;
      for (int d = 0; d < r; ++d) {
        cb.start.push_back(g[d] * s.chunks[d]);
        cb.stop.push_back(std::min(s.shape[d], (g[d] + 1) * s.chunks[d]));
      }
      Box part = intersect(cb, tile.box);
      if (!part.empty()) {
        auto [it, fresh] = job_of.emplace(std::make_pair(tile.leaf, g), jobs.size());
        if (fresh) jobs.push_back({tile.leaf, g, {}});
        jobs[it->second].dests.push_back({std::move(part), tile.buffer->data(), tile.shape, tile.box.start});
      }
      more = false;
      for (int d = r - 1; d >= 0; --d) {
        if (++g[d] <= g1[d]) {
          more = true;
          break;
        }
        g[d] = g0[d];
      }
    }
  }
  // Jobs write disjoint parts of the tiles: no two touch the same bytes.
  std::atomic<std::uint64_t> read{0};
  run_parallel(jobs.size(), [&](std::size_t j) { read += read_chunk(dir, saved[jobs[j].leaf], jobs[j].grid, jobs[j].dests); });
  run_parallel(tiles.size(), [&](std::size_t k) {
    Tile& tile = tiles[k];
    Out& o = outs[tile.leaf];
    const auto& ids = o.layout.mesh->device_ids();
    tile.buffer->ready().set();
    o.buffers[std::size_t(tile.positions[0])] = tile.buffer;
    // Replicas on this process's other devices view the one block (the
    // buffers are immutable: runtime/buffer.hpp), as a collective's results do.
    for (std::size_t c = 1; c < tile.positions.size(); ++c) {
      auto replica = rt::Buffer::deferred(ids[std::size_t(tile.positions[c])], tile.buffer->bytes());
      replica->view(tile.buffer);
      replica->ready().set();
      o.buffers[std::size_t(tile.positions[c])] = replica;
    }
  });
  g_bytes_read = read.load();
  g_bytes_needed = needed;
  std::vector<Array> result;
  for (std::size_t i = 0; i < saved.size(); ++i) {
    Out& o = outs[i];
    Array a = tessel::detail::make_array(saved[i].dtype, saved[i].shape, saved[i].weak_type, o.sharding, o.layout,
                                         o.committed, std::move(o.buffers));
    if (targets[i].dtype && *targets[i].dtype != saved[i].dtype) a = a.astype(*targets[i].dtype);
    result.push_back(a);
  }
  return result;
}

}  // namespace detail

void SaveHandle::wait() {
  if (!job_) return;
  auto& j = *job_;
  {
    std::lock_guard<std::mutex> lock(j.join_m);  // one joiner (not j.m: the thread takes that to finish)
    if (j.thread.joinable() && j.thread.get_id() != std::this_thread::get_id()) j.thread.join();
  }
  bool commit_here = false;
  {
    std::lock_guard<std::mutex> lock(j.m);
    commit_here = !j.finished && j.written;
  }
  if (commit_here) {
    try {
      j.commit();
      j.finish(nullptr);
    } catch (...) {
      j.finish(std::current_exception());
    }
  }
  std::unique_lock<std::mutex> lock(j.m);
  j.cv.wait(lock, [&] { return j.finished; });
  if (j.error) std::rethrow_exception(j.error);
}

bool SaveHandle::done() const {
  if (!job_) return true;
  std::lock_guard<std::mutex> lock(job_->m);
  return job_->finished;
}

RestoreStats last_restore_stats() { return {detail::g_bytes_read.load(), detail::g_bytes_needed.load()}; }

}  // namespace tessel::checkpoint

// ---------------------------------------------------------------- manager

namespace tessel::checkpoint {

namespace {
bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

CheckpointManager::CheckpointManager(std::string dir, CheckpointManagerOptions options)
    : dir_(detail::normalized(dir, "CheckpointManager")), options_(std::move(options)) {
  if (options_.max_to_keep && *options_.max_to_keep < 1)
    throw ValueError(cat("CheckpointManager: max_to_keep must be at least 1, got ", *options_.max_to_keep));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_, ec))
    throw FileError(cat("CheckpointManager: cannot make the directory ", dir_, ": ", ec.message()));
}

CheckpointManager::~CheckpointManager() {
  try {
    wait_until_finished();
  } catch (...) {
    // A failed background save was the caller's to see through wait_until_finished.
  }
}

std::string CheckpointManager::step_dir(std::int64_t step) const { return dir_ + "/" + std::to_string(step); }

std::vector<std::int64_t> CheckpointManager::all_steps() const {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (all_digits(name) && fs::exists(it->path() / detail::kMeta, ec)) steps.push_back(std::stoll(name));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<std::int64_t> CheckpointManager::latest_step() const {
  auto steps = all_steps();
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

void CheckpointManager::begin_save(std::int64_t step) {
  wait_until_finished();
  if (step < 0) throw ValueError(cat("CheckpointManager::save: the step must be >= 0, got ", step));
  auto steps = all_steps();
  if (std::find(steps.begin(), steps.end(), step) != steps.end())
    throw ValueError(cat("CheckpointManager::save: step ", step, " already exists in ", dir_));
}

std::string CheckpointManager::existing_step_dir(std::int64_t step) const {
  auto steps = all_steps();
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
    std::string list;
    for (std::size_t i = 0; i < steps.size(); ++i) list += (i ? ", " : "") + std::to_string(steps[i]);
    throw FileError(cat("CheckpointManager::restore: no checkpoint of step ", step, " in ", dir_,
                        steps.empty() ? std::string(" (it holds none)") : " (it holds steps " + list + ")"));
  }
  return step_dir(step);
}

void CheckpointManager::wait_until_finished() {
  if (!pending_step_) return;
  SaveHandle h = std::move(pending_);
  pending_ = SaveHandle();
  pending_step_.reset();
  h.wait();
  if (options_.max_to_keep && detail::leader()) {
    auto steps = all_steps();
    for (std::size_t i = 0; i + std::size_t(*options_.max_to_keep) < steps.size(); ++i) {
      std::error_code ec;
      fs::remove_all(step_dir(steps[i]), ec);
      if (ec) throw FileError(cat("CheckpointManager: cannot remove the old step ", step_dir(steps[i]), ": ", ec.message()));
    }
  }
}

}  // namespace tessel::checkpoint
