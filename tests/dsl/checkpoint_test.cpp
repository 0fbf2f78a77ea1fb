// Sharded checkpoints (issue 39, tessel/checkpoint.hpp): bit-exact round
// trips of pytrees in every dtype, saved on one sharding and restored onto
// others (other meshes, device counts, replication), zarr-python reading the
// leaves, async saves while the parameters change, CheckpointManager, the
// bytes a restore reads, damaged checkpoints as FileErrors naming the file,
// and a save killed with SIGKILL leaving the previous checkpoint intact.
#include <doctest/doctest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <boost/hana/define_struct.hpp>
#include <tessel/tessel.hpp>

#include "tests/common/io_check.hpp"

extern char** environ;

namespace ts = tessel;
namespace ck = tessel::checkpoint;
namespace fs = std::filesystem;
using ts::P;
using tessel::testing::bytes_of;
using tessel::testing::has;
using tessel::testing::random_bits;

namespace {

struct TempDir : tessel::testing::TempDir {
  TempDir() : tessel::testing::TempDir("tessel_checkpoint_test_") {}
};

std::optional<ts::Sharding> named(ts::Shape mesh, std::vector<std::string> names, ts::PartitionSpec spec) {
  return ts::Sharding(ts::NamedSharding(ts::make_mesh(mesh, names), spec));
}
std::optional<ts::Sharding> on_first(int k, ts::PartitionSpec spec) {
  const auto all = ts::devices();
  return ts::Sharding(ts::NamedSharding(ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"}), spec));
}

std::pair<std::string, int> run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

struct Layer {
  BOOST_HANA_DEFINE_STRUCT(Layer, (ts::Array, w), (ts::Array, b));
};

}  // namespace

TEST_CASE("checkpoint: every dtype, saved on one sharding, restored bit for bit onto others") {
  REQUIRE(ts::device_count() >= 8);
  TempDir dir;
  std::mt19937 rng(39);
  struct Case {
    ts::Shape shape;
    std::optional<ts::Sharding> saved;
    std::vector<std::optional<ts::Sharding>> restored;
    std::string what;
  };
  const std::vector<Case> cases = {
      {{}, std::nullopt, {std::nullopt, named({8}, {"x"}, P())}, "0-d"},
      {{0, 3}, named({4}, {"x"}, P("x")), {std::nullopt, on_first(3, P("x"))}, "(0, 3)"},
      {{5}, named({8}, {"x"}, P("x")), {std::nullopt, on_first(2, P("x")), on_first(3, P())}, "(5,) on 8, empty shards"},
      {{7, 3}, on_first(3, P("x")),
       {on_first(4, P("x")), on_first(3, P(ts::None, "x")), named({4, 2}, {"a", "b"}, P("a", "b")), std::nullopt},
       "(7, 3) on 3, uneven"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P("a", "b")),
       {named({8}, {"x"}, P("x")), named({2, 4}, {"a", "b"}, P("b", "a")), on_first(5, P(ts::None, "x")),
        named({4, 2}, {"a", "b"}, P("a"))},
       "(8, 4) on (4, 2)"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P(ts::None, "b")), {on_first(1, P()), named({8}, {"x"}, P("x"))},
       "(8, 4), 'a' replicated"},
      {{3, 4, 5}, named({2, 2, 2}, {"a", "b", "c"}, P("c", ts::None, "a")),
       {named({2, 2, 2}, {"a", "b", "c"}, P("a", "b", "c")), on_first(7, P(ts::None, ts::None, "x"))},
       "(3, 4, 5) on (2, 2, 2)"},
  };
  for (const std::string compression : {"none", "zstd"}) {
    for (int i = 0; i < ts::kNumDTypes; ++i) {
      const ts::DType t = ts::DType(i);
      std::map<std::string, ts::Array> tree;
      std::vector<ts::Array> host;
      for (std::size_t c = 0; c < cases.size(); ++c) {
        host.push_back(random_bits(rng, t, cases[c].shape));
        tree["leaf" + std::to_string(c)] = cases[c].saved ? ts::device_put(host.back(), *cases[c].saved) : host.back();
      }
      CAPTURE(ts::dtype_name(t));
      CAPTURE(compression);
      const std::string d = dir / (compression + "_" + ts::dtype_name(t));
      ck::save(d, tree, {.compression = compression});
      // Into the arrays themselves (their shardings).
      auto same = ck::restore(d, tree);
      for (std::size_t c = 0; c < cases.size(); ++c) {
        const ts::Array& y = same["leaf" + std::to_string(c)];
        CHECK(y.sharding() == tree["leaf" + std::to_string(c)].sharding());
        CHECK(bytes_of(y) == bytes_of(host[c]));
      }
      // Onto every other layout.
      for (std::size_t k = 0;; ++k) {
        std::map<std::string, ts::ShapeDtypeStruct> target;
        bool any = false;
        for (std::size_t c = 0; c < cases.size(); ++c) {
          const auto& r = cases[c].restored;
          const auto sh = r[std::min(k, r.size() - 1)];
          any = any || k < r.size();
          target["leaf" + std::to_string(c)] = {cases[c].shape, t, sh};
        }
        if (!any) break;
        std::map<std::string, ts::Array> back = ck::restore(d, target);
        for (std::size_t c = 0; c < cases.size(); ++c) {
          CAPTURE(cases[c].what);
          CAPTURE(k);
          const ts::Array& y = back["leaf" + std::to_string(c)];
          CHECK(y.dtype() == t);
          CHECK(y.shape() == cases[c].shape);
          const auto& want = target["leaf" + std::to_string(c)].sharding;
          if (want) CHECK(y.sharding() == *want);
          CHECK(y.committed() == want.has_value());
          CHECK(bytes_of(y) == bytes_of(host[c]));
        }
      }
    }
  }
}

TEST_CASE("checkpoint: trees of structs, vectors, tuples and scalars; a dtype the target changes") {
  TempDir dir;
  using State = std::tuple<std::vector<Layer>, std::map<std::string, ts::Array>, int, double>;
  const auto sh = named({4, 2}, {"a", "b"}, P("a", "b"));
  State s{{Layer{ts::device_put(ts::arange(0, 24).reshape({6, 4}).astype(ts::float32), *sh), ts::arange(0, 4)},
           Layer{ts::ones({3, 2}), ts::zeros({2})}},
          {{"step", ts::array(7)}, {"lr", ts::array(0.125f)}},
          42,
          2.5};
  ck::save(dir / "s", s);
  CHECK(ck::detail::saved_paths(dir / "s") ==
        std::vector<std::string>{"[0][0].w", "[0][0].b", "[0][1].w", "[0][1].b", "[1]['lr']", "[1]['step']", "[2]",
                                 "[3]"});
  State zero{{Layer{ts::zeros({6, 4}), ts::zeros({4}, ts::int32)}, Layer{ts::zeros({3, 2}), ts::zeros({2})}},
             {{"step", ts::array(0)}, {"lr", ts::array(0.0f)}},
             0,
             0.0};
  State back = ck::restore(dir / "s", zero);
  auto& layers = std::get<0>(back);
  CHECK(layers[0].w.to_vector<float>() == std::get<0>(s)[0].w.to_vector<float>());
  CHECK(layers[0].b.to_vector<int>() == std::vector<int>{0, 1, 2, 3});
  CHECK(layers[1].w.to_vector<float>() == std::vector<float>(6, 1.0f));
  CHECK(std::get<1>(back)["step"].item<int>() == 7);
  CHECK(std::get<1>(back)["lr"].item<float>() == 0.125f);
  CHECK(std::get<2>(back) == 42);
  CHECK(std::get<3>(back) == 2.5);
  // A ShapeDtypeStruct of another dtype converts (as orbax's restore_type).
  std::vector<ts::ShapeDtypeStruct> one = {{{6, 4}, ts::bfloat16, on_first(2, P("x"))}};
  ck::save(dir / "w", std::vector<ts::Array>{std::get<0>(s)[0].w});
  std::vector<ts::Array> w16 = ck::restore(dir / "w", one);
  CHECK(w16[0].dtype() == ts::bfloat16);
  CHECK(w16[0].astype(ts::float32).to_vector<float>() == std::get<0>(s)[0].w.to_vector<float>());
}

TEST_CASE("checkpoint: zarr-python opens every leaf (raw and zstd chunks) and reads the saved values") {
  TempDir dir;
  std::mt19937 rng(5);
  for (const std::string compression : {"none", "zstd"}) {
    std::map<std::string, ts::Array> tree = {
        {"f32", ts::device_put(random_bits(rng, ts::float32, {7, 5}), *named({4, 2}, {"a", "b"}, P("a", "b")))},
        {"i64", ts::device_put(random_bits(rng, ts::int64, {9}), *on_first(4, P("x")))},
        {"u8", random_bits(rng, ts::uint8, {3, 3})},
        {"c64", ts::device_put(random_bits(rng, ts::complex64, {6, 2}), *on_first(3, P("x")))},
        {"bool", ts::device_put(random_bits(rng, ts::bool_, {5, 4}), *on_first(2, P(ts::None, "x")))},
        {"f16", ts::device_put(random_bits(rng, ts::float16, {10}), *on_first(3, P("x")))},
        {"bf16", ts::device_put(random_bits(rng, ts::bfloat16, {4, 4}), *on_first(2, P("x")))},
        {"scalar", ts::array(3.0)},
    };
    const std::string d = dir / ("z_" + compression);
    ck::save(d, tree, {.compression = compression});
    // The values as NumPy files (ts::save; bfloat16 as its uint16 bits) to compare with.
    std::string script = "import sys, json, numpy as np, zarr\nd = sys.argv[1]\nm = json.load(open(d + '/tessel_checkpoint.json'))\nbad = 0\n";
    script += "for leaf in m['leaves']:\n  z = zarr.open(d + '/' + leaf['dir'], mode='r')\n  want = np.load(d + '.' + leaf['path'][2:-2] + '.npy')\n";
    script += "  got = z[...]\n  if leaf['dtype'] == 'bfloat16': got = got.view(np.uint16); want = want.view(np.uint16)\n";
    script += "  if got.shape != want.shape or got.tobytes() != want.tobytes(): bad += 1; print('mismatch', leaf['path'], got.dtype, want.dtype)\n";
    script += "print('checked', len(m['leaves']))\nsys.exit(bad)\n";
    for (auto& [name, a] : tree) ts::save(d + "." + name + ".npy", a);
    std::ofstream(dir / "check.py") << script;
    auto [out, rc] = run("/usr/bin/python3 -I " + (dir / "check.py") + " " + d + " 2>&1");
    INFO(out);
    CHECK(rc == 0);
    CHECK(out.find("checked 8") != std::string::npos);
  }
}

TEST_CASE("checkpoint: an async save returns at once and saves the values of the moment, while training changes them") {
  TempDir dir;
  const auto sh = named({8}, {"x"}, P("x"));
  std::map<std::string, ts::Array> params = {{"w", ts::device_put(ts::ones({1024, 256}), *sh)},
                                             {"b", ts::device_put(ts::zeros({1024}), *sh)}};
  const auto w0 = params["w"].to_vector<float>();
  ck::SaveHandle h = ck::save(dir / "a", params, {.async = true});
  auto step = ts::jit([](const std::map<std::string, ts::Array>& p) {
    std::map<std::string, ts::Array> q;
    for (auto& [k, v] : p) q[k] = v * 0.5f + 1.0f;
    return q;
  });
  for (int i = 0; i < 20; ++i) params = step(params);  // buffers are immutable: the save still reads the old ones
  h.wait();
  CHECK(h.done());
  auto back = ck::restore(dir / "a", params);
  CHECK(back["w"].to_vector<float>() == w0);
  CHECK(back["b"].to_vector<float>() == std::vector<float>(1024, 0.0f));
  CHECK(params["w"].to_vector<float>()[0] != 1.0f);
  h.wait();  // again: a no-op
}

TEST_CASE("checkpoint: CheckpointManager keeps the newest steps and restores any of them") {
  TempDir dir;
  const auto sh = named({4}, {"x"}, P("x"));
  for (bool async : {false, true}) {
    const std::string root = dir / (async ? "async" : "sync");
    {
      ck::CheckpointManager m(root, {.max_to_keep = 2, .async = async});
      CHECK(!m.latest_step());
      for (int s = 0; s < 5; ++s) m.save(s, std::vector<ts::Array>{ts::device_put(ts::full({8, 2}, float(s)), *sh)});
      m.wait_until_finished();
      CHECK(m.all_steps() == std::vector<std::int64_t>{3, 4});
      CHECK(m.latest_step() == 4);
      auto three = m.restore(3, std::vector<ts::ShapeDtypeStruct>{{{8, 2}, ts::float32, sh}});
      CHECK(three[0].to_vector<float>() == std::vector<float>(16, 3.0f));
      CHECK_THROWS_WITH_AS(m.restore(1, std::vector<ts::ShapeDtypeStruct>{{{8, 2}, ts::float32, sh}}),
                           has("no checkpoint of step 1"), ts::FileError);
      CHECK_THROWS_WITH_AS(m.save(4, std::vector<ts::Array>{ts::zeros({2})}), has("step 4 already exists"),
                           ts::ValueError);
    }
    // A new manager over the same directory sees the same steps.
    ck::CheckpointManager again(root);
    CHECK(again.all_steps() == std::vector<std::int64_t>{3, 4});
    auto four = again.restore(4, std::vector<ts::ShapeDtypeStruct>{{{8, 2}, ts::float32, std::nullopt}});
    CHECK(four[0].to_vector<float>() == std::vector<float>(16, 4.0f));
  }
}

TEST_CASE("checkpoint: a restore reads only the chunks (and parts) its new shards cover") {
  TempDir dir;
  // 8 row blocks of 64 KiB... 2 MiB each: pieces are 1 MiB.
  const ts::Shape shape = {8 * 512, 1024};
  ts::Array x = ts::device_put(ts::arange(0, 8 * 512 * 1024).reshape(shape).astype(ts::float32),
                               *named({8}, {"x"}, P("x")));
  ck::save(dir / "r", std::vector<ts::Array>{x});
  const std::uint64_t total = std::uint64_t(ts::numel(shape)) * 4;
  auto restore_on = [&](std::optional<ts::Sharding> s) {
    auto y = ck::restore(dir / "r", std::vector<ts::ShapeDtypeStruct>{{shape, ts::float32, s}});
    CHECK(y[0].to_vector<float>() == x.to_vector<float>());
    return ck::last_restore_stats();
  };
  // Same sharding, fewer devices holding whole chunks, one device: every byte once.
  for (auto s : {named({8}, {"x"}, P("x")), on_first(4, P("x")), on_first(2, P("x")), on_first(1, P())}) {
    auto st = restore_on(s);
    CHECK(st.bytes_needed == total);
    CHECK(st.bytes_read == total);
  }
  // Rows split 3 ways (uneven, across chunk boundaries) and columns split 8
  // ways: each chunk is read once for all the shards it feeds.
  for (auto s : {on_first(3, P("x")), on_first(8, P(ts::None, "x"))}) {
    auto st = restore_on(s);
    CHECK(st.bytes_needed == total);
    CHECK(st.bytes_read == total);
  }
  // On a 4x2 mesh: every saved chunk feeds two devices' tiles, and is read once.
  auto y = ck::restore(dir / "r", std::vector<ts::ShapeDtypeStruct>{{shape, ts::float32, named({4, 2}, {"a", "b"}, P("a", "b"))}});
  CHECK(y[0].to_vector<float>() == x.to_vector<float>());
  CHECK(ck::last_restore_stats().bytes_read == total);
  // Replicated on 2 devices: each process reads its one copy once.
  auto rep = restore_on(on_first(2, P()));
  CHECK(rep.bytes_read == total);
}

TEST_CASE("checkpoint: damage, a missing file and a target that does not match are errors naming the file") {
  TempDir dir;
  std::vector<ts::Array> tree = {ts::device_put(ts::arange(0, 4096).reshape({64, 64}).astype(ts::float32),
                                                *named({4}, {"x"}, P("x")))};
  std::vector<ts::ShapeDtypeStruct> target = {{{64, 64}, ts::float32, std::nullopt}};
  auto fresh = [&](const std::string& name) {
    const std::string d = dir / name;
    ck::save(d, tree);
    return d;
  };
  const std::string chunk = "/0.0/1.0";  // leaf 0 (path "[0]", directory "0.0"), rows 16..31
  {
    const std::string d = fresh("flip");
    std::fstream f(d + chunk, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
    f.close();
    CHECK_THROWS_WITH_AS(ck::restore(d, target), has(d + chunk + " is damaged"), ts::FileError);
  }
  {
    const std::string d = fresh("truncate");
    fs::resize_file(d + chunk, 1000);
    CHECK_THROWS_WITH_AS(ck::restore(d, target), has(d + chunk + " has 1000 bytes"), ts::FileError);
  }
  {
    const std::string d = fresh("missing");
    fs::remove(d + chunk);
    CHECK_THROWS_WITH_AS(ck::restore(d, target), has(d + chunk), ts::FileError);
  }
  {
    const std::string d = fresh("meta");
    std::ofstream(d + "/tessel_checkpoint.json") << "{\"format\": \"tessel.checkpoint\", \"version\": 1, \"lea";
    CHECK_THROWS_WITH_AS(ck::restore(d, target), has(d + "/tessel_checkpoint.json is damaged"), ts::FileError);
  }
  {
    const std::string d = fresh("future");
    std::string m;
    {
      std::ifstream f(d + "/tessel_checkpoint.json");
      m.assign(std::istreambuf_iterator<char>(f), {});
    }
    m.replace(m.find("\"version\": 1"), 12, "\"version\": 9");
    std::ofstream(d + "/tessel_checkpoint.json") << m;
    CHECK_THROWS_WITH_AS(ck::restore(d, target), has("format version 9"), ts::FileError);
  }
  const std::string d = fresh("ok");
  CHECK_THROWS_WITH_AS(ck::restore(d, std::vector<ts::ShapeDtypeStruct>{{{64, 32}, ts::float32, std::nullopt}}),
                       has("has shape (64, 64) but the target says (64, 32)"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ck::restore(d, std::map<std::string, ts::ShapeDtypeStruct>{{"w", {{64, 64}, ts::float32, {}}}}),
                       has("is [0] but the target's leaf 0 is ['w']"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ck::restore(d, std::vector<ts::ShapeDtypeStruct>{}), has("holds 1 leaves"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ck::restore(dir / "nothing", target), has(dir / "nothing"), ts::FileError);
  CHECK_THROWS_WITH_AS(ck::save(d, tree), has("already exists"), ts::ValueError);
  ck::save(d, tree, {.force = true});  // replaces it
  CHECK(ck::restore(d, target)[0].to_vector<float>() == tree[0].to_vector<float>());
  fs::create_directories(dir / "user");
  std::ofstream(dir / "user/notes.txt") << "mine";
  CHECK_THROWS_WITH_AS(ck::save(dir / "user", tree, {.force = true}), has("is not a checkpoint"), ts::ValueError);
  CHECK(fs::exists(dir / "user/notes.txt"));
  CHECK_THROWS_WITH_AS(ck::save(dir / "c", tree, {.compression = "lz4"}), has("\"none\" or \"zstd\""), ts::ValueError);
}

// The child of the SIGKILL test: saves ever larger steps until killed.
TEST_CASE("checkpoint: (child process of the SIGKILL test; does nothing on its own)") {
  const char* root = std::getenv("TESSEL_CHECKPOINT_CHILD");
  if (!root) return;
  ck::CheckpointManager m(root);
  const auto sh = named({8}, {"x"}, P("x"));
  for (int s = 2;; ++s) m.save(s, std::vector<ts::Array>{ts::device_put(ts::full({8 * 1024, 2048}, float(s)), *sh)});
}

TEST_CASE("checkpoint: a save killed by SIGKILL leaves the previous checkpoint intact, and is never taken for one") {
  TempDir dir;
  const std::string root = dir / "steps";
  const auto sh = named({8}, {"x"}, P("x"));
  {
    ck::CheckpointManager m(root);
    m.save(1, std::vector<ts::Array>{ts::device_put(ts::full({8 * 1024, 2048}, 1.0f), *sh)});
  }
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string env = "TESSEL_CHECKPOINT_CHILD=" + root;
  std::vector<std::string> args = {exe, "--no-intro=true", "-tc=checkpoint: (child process*"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs = {env};
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid;
  REQUIRE(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()) == 0);
  // Kill it once a save has begun writing chunks (64 MiB a step, a file per device).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool writing = false;
  while (!writing && std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (int s = 2; s < 6 && !writing; ++s) writing = fs::exists(root + "/" + std::to_string(s) + ".tessel-partial/0.0/0.0", ec);
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(writing);
  CHECK(WIFSIGNALED(status));
  ck::CheckpointManager m(root);
  const auto steps = m.all_steps();
  REQUIRE(!steps.empty());
  CHECK(steps.front() == 1);
  // Every step the manager lists is whole; the one being written is not listed.
  for (auto s : steps) {
    auto y = m.restore(s, std::vector<ts::ShapeDtypeStruct>{{{8 * 1024, 2048}, ts::float32, sh}});
    CHECK(ts::all(y[0] == float(s)).item<bool>());
  }
  const std::string partial = root + "/" + std::to_string(steps.back() + 1);
  CHECK(fs::exists(partial + ".tessel-partial"));
  CHECK_THROWS_WITH_AS(ck::restore(partial, std::vector<ts::ShapeDtypeStruct>{{{8 * 1024, 2048}, ts::float32, sh}}),
                       has("did not finish"), ts::FileError);
  // Saving that step again replaces the leftovers.
  m.save(steps.back() + 1, std::vector<ts::Array>{ts::device_put(ts::full({8 * 1024, 2048}, 9.0f), *sh)});
  CHECK(!fs::exists(partial + ".tessel-partial"));
  CHECK(m.latest_step() == steps.back() + 1);
}
