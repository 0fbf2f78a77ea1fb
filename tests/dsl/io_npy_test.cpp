// NumPy's files (issue 39): ts::load of every file NumPy writes
// (tests/data/npy, from tools/make_npy_fixtures.py), save -> load bit for
// bit for every dtype, shape and sharding, NumPy reading what tessel writes
// (byte for byte what np.save writes, for NumPy's own dtypes), and damaged
// or unreachable files as FileErrors naming the file.
#include <doctest/doctest.h>

#include <unistd.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <tessel/io.hpp>
#include <tessel/tessel.hpp>

#include "dsl/src/npy_format.hpp"
#include "tests/common/io_check.hpp"

namespace ts = tessel;
namespace fs = std::filesystem;
using ts::P;
using tessel::testing::bytes_of;
using tessel::testing::has;
using tessel::testing::random_bits;

namespace {

struct TempDir : tessel::testing::TempDir {
  TempDir() : tessel::testing::TempDir("tessel_io_npy_test_") {}
};

const std::string kData = std::string(TESSEL_SOURCE_DIR) + "/tests/data/npy/";

std::string hex(const std::vector<unsigned char>& b) {
  std::string s;
  for (unsigned char c : b) {
    s += "0123456789abcdef"[c >> 4];
    s += "0123456789abcdef"[c & 15];
  }
  return s;
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A version 1.0 .npy file with the given dict, padded as NumPy pads, then `data`.
std::vector<unsigned char> npy_with_dict(std::string dict, const std::vector<unsigned char>& data) {
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::vector<unsigned char> b(10 + dict.size() + data.size());
  const unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(dict.size() & 0xff),
                                  (unsigned char)(dict.size() >> 8)};
  std::copy(head, head + 10, b.begin());
  std::copy(dict.begin(), dict.end(), b.begin() + 10);
  std::copy(data.begin(), data.end(), b.begin() + 10 + std::ptrdiff_t(dict.size()));
  return b;
}

// The 1-byte floats, which np.save writes as '|V1' (their format unrecorded).
bool one_byte_float(ts::DType t) { return ts::is_floating(t) && ts::dtype_size(t) == 1; }

ts::LoadOptions options_for(ts::DType t) {
  if (one_byte_float(t)) return {.dtype = t};
  return {};
}

std::vector<ts::DType> all_dtypes() {
  std::vector<ts::DType> v;
  for (int i = 0; i < ts::kNumDTypes; ++i) v.push_back(ts::DType(i));
  return v;
}

// stdout of a shell command, and its exit status.
std::pair<std::string, int> run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// Every file in dir: np.load's dtype, shape and bytes (little endian, C
// order), and whether np.save writes the same bytes (NumPy's own dtypes).
nlohmann::json numpy_reads(const std::string& dir) {
  const std::string script = R"PY(
import glob, io, json, os, sys
import numpy as np
def desc(a):
    le = a.astype(a.dtype.newbyteorder('<')) if a.dtype.kind not in 'bV' and a.dtype.itemsize > 1 else a
    return {'dtype': a.dtype.str, 'shape': list(a.shape), 'hex': np.ascontiguousarray(le).tobytes().hex()}
out = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*'))):
    name = os.path.basename(path)
    if name.endswith('.npz'):
        with np.load(path) as z:
            out[name] = {k: desc(z[k]) for k in z.files}
    else:
        a = np.load(path)
        d = desc(a)
        if a.dtype.kind != 'V':
            b = io.BytesIO()
            np.save(b, a)
            d['same_as_np_save'] = b.getvalue() == open(path, 'rb').read()
        out[name] = d
print(json.dumps(out))
)PY";
  const std::string py = dir + "/../reader.py";
  std::ofstream(py) << script;
  auto [out, rc] = run("/usr/bin/python3 -I " + py + " " + dir + " 2>&1");
  INFO(out);
  REQUIRE(rc == 0);
  return nlohmann::json::parse(out);
}

// NumPy's type string for what tessel writes.
std::string numpy_str(ts::DType t) {
  if (one_byte_float(t)) return "|V1";
  switch (t) {
    case ts::bfloat16: return "|V2";
    case ts::bool_: return "|b1";
    default: break;
  }
  const std::string n = ts::dtype_name(t);
  const std::size_t size = ts::dtype_size(t);
  const char kind = ts::is_complex(t) ? 'c' : ts::is_floating(t) ? 'f' : ts::is_signed_int(t) ? 'i' : 'u';
  return std::string(size == 1 ? "|" : "<") + kind + std::to_string(size);
}

}  // namespace

TEST_CASE("load: every file NumPy writes, bit for bit") {
  const auto expected = nlohmann::json::parse(std::ifstream(kData + "expected.json"));
  REQUIRE(expected.size() > 40);
  auto check = [](const ts::Array& a, const nlohmann::json& want) {
    CHECK(ts::dtype_name(a.dtype()) == want["dtype"].get<std::string>());
    CHECK(a.shape() == want["shape"].get<ts::Shape>());
    CHECK(hex(bytes_of(a)) == want["hex"].get<std::string>());
    CHECK_FALSE(a.committed());
  };
  for (auto& [file, want] : expected.items()) {
    CAPTURE(file);
    if (want.contains("members")) {
      auto z = ts::load_npz(kData + file);
      REQUIRE(z.size() == want["members"].size());
      for (auto& [name, m] : want["members"].items()) {
        CAPTURE(name);
        REQUIRE(z.count(name));
        check(z.at(name), m);
      }
    } else {
      ts::LoadOptions o;
      if (want.contains("options_dtype")) o.dtype = ts::dtype_from_name(want["options_dtype"].get<std::string>());
      check(ts::load(kData + file, o), want);
    }
  }
}

TEST_CASE("load: LoadOptions names the dtypes a file does not record, and only those") {
  const std::string v1 = kData + "float8_v1.npy", v2 = kData + "bfloat16_v2.npy", f4 = kData + "float32_c.npy";
  // '|V1': an 8-bit float, which one the file does not say.
  CHECK_THROWS_WITH_AS(ts::load(v1), has(v1), ts::TypeError);
  CHECK_THROWS_WITH_AS(ts::load(v1), has("LoadOptions{.dtype = ts::float8_e4m3fn}"), ts::TypeError);
  CHECK(ts::load(v1, {.dtype = ts::float8_e5m2}).dtype() == ts::float8_e5m2);
  CHECK(ts::load(v1, {.dtype = ts::uint8}).to_vector<std::uint8_t>() ==
        std::vector<std::uint8_t>{0x38, 0xC0, 0x7E, 0x7F, 0x00, 0x01});
  CHECK_THROWS_AS(ts::load(v1, {.dtype = ts::float32}), ts::TypeError);
  CHECK_THROWS_AS(ts::load(v1, {.dtype = ts::bool_}), ts::TypeError);
  // '<V2': bfloat16 unless another 2-byte dtype is asked for.
  CHECK(ts::load(v2).dtype() == ts::bfloat16);
  CHECK(ts::load(v2, {.dtype = ts::float16}).dtype() == ts::float16);
  CHECK(hex(bytes_of(ts::load(v2, {.dtype = ts::uint16}))) == hex(bytes_of(ts::load(v2))));
  CHECK_THROWS_WITH_AS(ts::load(v2, {.dtype = ts::int32}), has(v2), ts::TypeError);
  // A file that names its dtype is not converted.
  CHECK(ts::load(f4, {.dtype = ts::float32}).dtype() == ts::float32);
  CHECK_THROWS_WITH_AS(ts::load(f4, {.dtype = ts::float64}), has(f4), ts::TypeError);
  CHECK_THROWS_WITH_AS(ts::load(f4, {.dtype = ts::bfloat16}), has("ts::astype"), ts::TypeError);
  // An .npz: the options are for its members whose type the file does not record.
  CHECK(ts::load_npz(kData + "stored.npz", {.dtype = ts::float8_e4m3fn}).at("a").dtype() == ts::int32);
}

TEST_CASE("load: types tessel lacks are TypeErrors naming the type and the file") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> foreign = {
      {"'|O'", "'|O'"},          {"'<U3'", "'<U3'"},          {"'|S5'", "'|S5'"},  {"'<M8[s]'", "'<M8[s]'"},
      {"'<m8[D]'", "'<m8[D]'"},  {"'<f16'", "'<f16'"},        {"'<c32'", "'<c32'"}, {"'|V4'", "'|V4'"},
      {"[('a', '<f4'), ('b', '<i4')]", "structured"}};
  for (auto& [descr, says] : foreign) {
    CAPTURE(descr);
    const std::string p = dir / "foreign.npy";
    write_file(p, npy_with_dict("{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }",
                                std::vector<unsigned char>(64)));
    CHECK_THROWS_WITH_AS(ts::load(p), has(p), ts::TypeError);
    CHECK_THROWS_WITH_AS(ts::load(p), has(says), ts::TypeError);
  }
}

TEST_CASE("save -> load is bit exact for every dtype, shape and sharding (1..8 devices)") {
  REQUIRE(ts::device_count() >= 8);
  TempDir dir;
  std::mt19937 rng(39);
  struct Layout {
    ts::Shape shape;
    std::optional<ts::Sharding> sharding;
    std::string what;
  };
  auto named = [](ts::Shape mesh, std::vector<std::string> names, ts::PartitionSpec spec) {
    return std::optional<ts::Sharding>(ts::NamedSharding(ts::make_mesh(mesh, names), spec));
  };
  std::vector<Layout> layouts = {
      {{}, std::nullopt, "0-d"},
      {{}, named({8}, {"x"}, P()), "0-d on 8 devices"},
      {{0, 3}, std::nullopt, "(0, 3)"},
      {{0, 3}, named({4}, {"x"}, P("x")), "(0, 3) on 4"},
      {{5}, std::nullopt, "(5,)"},
      {{5}, named({2}, {"x"}, P("x")), "(5,) on 2, uneven"},
      {{5}, named({8}, {"x"}, P("x")), "(5,) on 8, empty shards"},
      {{7, 3}, named({1}, {"x"}, P("x")), "(7, 3) on 1"},
      {{7, 3}, named({3}, {"x"}, P("x")), "(7, 3) on 3, uneven"},
      {{7, 3}, named({4}, {"x"}, P("x", ts::None)), "(7, 3) on 4, uneven"},
      {{7, 3}, named({3}, {"x"}, P(ts::None, "x")), "(7, 3) split along the last dim"},
      {{7, 3}, named({4, 2}, {"a", "b"}, P("a", "b")), "(7, 3) 2-D on (4, 2), uneven both"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P("a", "b")), "(8, 4) 2-D on (4, 2), even"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P("a")), "(8, 4) on (4, 2), 'b' replicated"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P(ts::None, "b")), "(8, 4) on (4, 2), 'a' replicated"},
      {{8, 4}, named({4, 2}, {"a", "b"}, P(ts::PartitionSpec::Entry::tuple({"b", "a"}), ts::None)), "(8, 4) on ('b', 'a')"},
      {{3, 4, 5}, named({2, 2, 2}, {"a", "b", "c"}, P("c", ts::None, "a")), "(3, 4, 5) on (2, 2, 2), 'b' replicated"},
  };
  for (ts::DType t : all_dtypes()) {
    for (auto& l : layouts) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(l.what);
      ts::Array host = random_bits(rng, t, l.shape);
      ts::Array x = l.sharding ? ts::device_put(host, *l.sharding) : host;
      const std::string p = dir / "x.npy";
      ts::save(p, x);
      ts::Array y = ts::load(p, options_for(t));
      CHECK(y.dtype() == t);
      CHECK(y.shape() == l.shape);
      const auto want = bytes_of(host);
      CHECK(hex(bytes_of(y)) == hex(want));
      // The data is the file's tail, in C order, after a 64-byte aligned header.
      const auto file = read_file(p);
      REQUIRE(file.size() >= want.size());
      const std::size_t header = file.size() - want.size();
      CHECK(header % 64 == 0);
      CHECK(std::equal(want.begin(), want.end(), file.begin() + std::ptrdiff_t(header)));
    }
  }
  // No temporary file is left behind.
  std::set<std::string> names;
  for (auto& e : fs::directory_iterator(dir.path)) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"x.npy"});
}

TEST_CASE("savez / savez_compressed -> load_npz, sharded members") {
  TempDir dir;
  std::mt19937 rng(7);
  std::map<std::string, ts::Array> m;
  const ts::NamedSharding s(ts::make_mesh({4, 2}, {"a", "b"}), P("a", "b"));
  for (ts::DType t : all_dtypes())
    if (!one_byte_float(t)) m[ts::dtype_name(t)] = ts::device_put(random_bits(rng, t, {7, 3}), s);
  m["scalar"] = random_bits(rng, ts::float32, {});
  m["empty"] = random_bits(rng, ts::int8, {0, 3});
  m["with/slash"] = random_bits(rng, ts::int16, {2});
  for (bool compressed : {false, true}) {
    CAPTURE(compressed);
    const std::string p = dir / (compressed ? "c.npz" : "s.npz");
    compressed ? ts::savez_compressed(p, m) : ts::savez(p, m);
    auto z = ts::load_npz(p);
    REQUIRE(z.size() == m.size());
    for (auto& [name, x] : m) {
      CAPTURE(name);
      REQUIRE(z.count(name));
      CHECK(z.at(name).dtype() == x.dtype());
      CHECK(z.at(name).shape() == x.shape());
      CHECK(hex(bytes_of(z.at(name))) == hex(bytes_of(x)));
    }
  }
  // The 8-bit floats: one format per archive, named when loading.
  const std::string p8 = dir / "f8.npz";
  ts::Array f8 = ts::device_put(random_bits(rng, ts::float8_e5m2, {7, 3}), s);
  ts::savez(p8, {{"w", f8}, {"step", random_bits(rng, ts::int32, {})}});
  CHECK_THROWS_WITH_AS(ts::load_npz(p8), has(p8), ts::TypeError);
  auto z8 = ts::load_npz(p8, {.dtype = ts::float8_e5m2});
  CHECK(hex(bytes_of(z8.at("w"))) == hex(bytes_of(f8)));
  CHECK(z8.at("step").dtype() == ts::int32);
  // No arrays: an empty archive, as np.savez writes.
  ts::savez(dir / "none.npz", {});
  CHECK(ts::load_npz(dir / "none.npz").empty());
}

TEST_CASE("NumPy reads what tessel writes, byte for byte what np.save writes") {
  TempDir dir;
  const std::string out = dir / "out";
  fs::create_directories(out);
  std::mt19937 rng(11);
  std::map<std::string, std::pair<ts::DType, ts::Array>> saved;
  const ts::NamedSharding s(ts::make_mesh({4, 2}, {"a", "b"}), P("a", "b"));
  for (ts::DType t : all_dtypes()) {
    ts::Array x = ts::device_put(random_bits(rng, t, {7, 3}), s);
    ts::save(out + "/" + ts::dtype_name(t) + ".npy", x);
    saved[std::string(ts::dtype_name(t)) + ".npy"] = {t, x};
  }
  ts::Array scalar = random_bits(rng, ts::float64, {}), empty = random_bits(rng, ts::uint16, {0, 3});
  ts::save(out + "/scalar.npy", scalar);
  ts::save(out + "/empty.npy", empty);
  saved["scalar.npy"] = {ts::float64, scalar};
  saved["empty.npy"] = {ts::uint16, empty};
  std::map<std::string, ts::Array> members = {{"a", saved["int32.npy"].second}, {"b", scalar},
                                              {"c", saved["bfloat16.npy"].second}, {"d", empty}};
  ts::savez(out + "/stored.npz", members);
  ts::savez_compressed(out + "/compressed.npz", members);

  const auto got = numpy_reads(out);
  auto check = [](const nlohmann::json& g, ts::DType t, const ts::Array& x) {
    CHECK(g["dtype"].get<std::string>() == numpy_str(t));
    CHECK(g["shape"].get<ts::Shape>() == x.shape());
    CHECK(g["hex"].get<std::string>() == hex(bytes_of(x)));
  };
  for (auto& [name, tx] : saved) {
    CAPTURE(name);
    REQUIRE(got.contains(name));
    check(got[name], tx.first, tx.second);
    if (tx.first != ts::bfloat16 && !one_byte_float(tx.first))
      CHECK(got[name]["same_as_np_save"].get<bool>());
  }
  for (const char* z : {"stored.npz", "compressed.npz"}) {
    CAPTURE(z);
    REQUIRE(got.contains(z));
    REQUIRE(got[z].size() == members.size());
    for (auto& [name, x] : members) {
      CAPTURE(name);
      check(got[z][name], x.dtype(), x);
    }
  }
}

TEST_CASE("damaged .npy files are FileErrors naming the file") {
  TempDir dir;
  const std::string good = dir / "good.npy";
  ts::save(good, ts::detail::from_host(ts::float32, {4, 5}, std::vector<float>(20, 1.5f).data()));
  const auto bytes = read_file(good);
  REQUIRE(bytes.size() == 128 + 80);
  const std::string p = dir / "bad.npy";
  auto fails = [&](const std::vector<unsigned char>& b, const std::string& says) {
    write_file(p, b);
    CHECK_THROWS_WITH_AS(ts::load(p), has(p), ts::FileError);
    CHECK_THROWS_WITH_AS(ts::load(p), has(says), ts::FileError);
  };
  auto prefix = [&](std::size_t n) { return std::vector<unsigned char>(bytes.begin(), bytes.begin() + std::ptrdiff_t(n)); };
  SUBCASE("truncated data") { fails(prefix(bytes.size() - 1), "truncated"); }
  SUBCASE("truncated header") { fails(prefix(40), "truncated"); }
  SUBCASE("no header at all") { fails(prefix(8), "truncated"); }
  SUBCASE("empty file") { fails({}, "0 bytes"); }
  SUBCASE("bad magic") {
    auto b = bytes;
    b[1] = 'n';
    fails(b, "magic");
  }
  SUBCASE("unknown version") {
    auto b = bytes;
    b[6] = 4;
    fails(b, "version 4.0");
  }
  SUBCASE("header length beyond the file") {
    auto b = prefix(128);
    b[9] = 0x40;
    fails(b, "truncated");
  }
  const std::vector<unsigned char> data(bytes.begin() + 128, bytes.end());
  SUBCASE("a missing key") { fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, }", data), "'shape'"); }
  SUBCASE("an extra key") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (20,), 'x': 1}", data), "'x'");
  }
  SUBCASE("a shape larger than the data") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 5), }", data), "truncated");
  }
  SUBCASE("a shape larger than the data, by a wider dtype") {
    fails(npy_with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 5), }", data), "truncated");
  }
  SUBCASE("a shape whose size overflows") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data),
          "int64");
  }
  SUBCASE("a dimension that overflows an int64") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data),
          "int64");
  }
  SUBCASE("a negative dimension") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 5), }", data), "negative");
  }
  SUBCASE("a shape that is not a tuple") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (20), }", data), "tuple");
  }
  SUBCASE("an order that is not a bool") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (20,), }", data), "fortran_order");
  }
  SUBCASE("a descr that is no NumPy type") {
    fails(npy_with_dict("{'descr': '<f5', 'fortran_order': False, 'shape': (20,), }", data), "'<f5'");
  }
  SUBCASE("an unterminated dict") { fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False", data), "dict"); }
  SUBCASE("garbage after the dict") {
    fails(npy_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (20,)} x", data), "after");
  }
  SUBCASE("every truncation fails, none crashes") {
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      CAPTURE(n);
      write_file(p, prefix(n));
      CHECK_THROWS_AS(ts::load(p), ts::FileError);
    }
  }
  SUBCASE("any header byte changed: a tessel error or the right array, never a crash") {
    const std::vector<float> want(20, 1.5f);
    for (std::size_t i = 0; i < 128; ++i)
      for (unsigned char v : {0x00, 0x27, 0x29, 0x2c, 0x31, 0x39, 0x7b, 0xff}) {
        auto b = bytes;
        if (b[i] == v) continue;
        b[i] = v;
        write_file(p, b);
        try {
          ts::Array a = ts::load(p);
          // What loads must be what the changed header says of the same data.
          CHECK(std::size_t(ts::numel(a.shape())) * ts::dtype_size(a.dtype()) <= data.size());
        } catch (const ts::Error& e) {
          CAPTURE(e.what());
          CHECK(std::string(e.what()).find(p) != std::string::npos);
        }
      }
  }
}

TEST_CASE("damaged .npz files are FileErrors naming the file") {
  TempDir dir;
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f;
  std::map<std::string, ts::Array> m = {{"a", ts::detail::from_host(ts::float32, {1000}, v.data())}};
  for (bool compressed : {false, true}) {
    CAPTURE(compressed);
    const std::string good = dir / "good.npz";
    compressed ? ts::savez_compressed(good, m) : ts::savez(good, m);
    const auto bytes = read_file(good);
    const std::string p = dir / "bad.npz";
    auto fails = [&](const std::vector<unsigned char>& b) {
      write_file(p, b);
      CHECK_THROWS_WITH_AS(ts::load_npz(p), has(p), ts::FileError);
    };
    // A byte flipped inside the member's data (after the local header and
    // name, before the central directory): its CRC (or its deflate stream) fails.
    {
      auto b = bytes;
      b[b.size() / 3] ^= 0x10;
      write_file(p, b);
      CHECK_THROWS_WITH_AS(ts::load_npz(p), has(p), ts::FileError);
      if (!compressed) CHECK_THROWS_WITH_AS(ts::load_npz(p), has("CRC"), ts::FileError);
    }
    fails(std::vector<unsigned char>(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() / 2)));
    fails(std::vector<unsigned char>(bytes.begin(), bytes.end() - 10));
    fails({'n', 'o', 't', ' ', 'a', ' ', 'z', 'i', 'p'});
    fails({});
  }
  // An .npy is not an .npz.
  ts::save(dir / "x.npy", m.at("a"));
  CHECK_THROWS_WITH_AS(ts::load_npz(dir / "x.npy"), has(dir / "x.npy"), ts::FileError);
}

TEST_CASE("paths that cannot be read or written are FileErrors naming them") {
  TempDir dir;
  const ts::Array x = ts::detail::from_host(ts::int32, {3}, std::vector<std::int32_t>{1, 2, 3}.data());
  const std::map<std::string, ts::Array> m = {{"x", x}};
  const std::string missing = dir / "missing.npy", missing_z = dir / "missing.npz";
  CHECK_THROWS_WITH_AS(ts::load(missing), has(missing), ts::FileError);
  CHECK_THROWS_WITH_AS(ts::load_npz(missing_z), has(missing_z), ts::FileError);
  CHECK_THROWS_WITH_AS(ts::load(dir.path.string()), has(dir.path.string()), ts::FileError);
  CHECK_THROWS_WITH_AS(ts::load_npz(dir.path.string()), has(dir.path.string()), ts::FileError);
  // No such directory; a file where a directory should be.
  const std::string nodir = dir / "no/such/dir/x.npy";
  CHECK_THROWS_WITH_AS(ts::save(nodir, x), has(nodir), ts::FileError);
  CHECK_THROWS_WITH_AS(ts::savez(nodir, m), has(nodir), ts::FileError);
  write_file(dir / "file", {1});
  const std::string under_file = dir / "file/x.npy";
  CHECK_THROWS_WITH_AS(ts::save(under_file, x), has(under_file), ts::FileError);
  CHECK_THROWS_WITH_AS(ts::savez_compressed(under_file, m), has(under_file), ts::FileError);
  // A directory where the file should be: nothing of the save is left.
  fs::create_directories(dir.path / "taken.npy");
  CHECK_THROWS_WITH_AS(ts::save(dir / "taken.npy", x), has(dir / "taken.npy"), ts::FileError);
  CHECK(fs::is_directory(dir.path / "taken.npy"));
  // A directory this process may not write (root may write anywhere).
  if (::geteuid() != 0) {
    const fs::path ro = dir.path / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH_AS(ts::save((ro / "x.npy").string(), x), has((ro / "x.npy").string()),
                         ts::FileError);
    fs::permissions(ro, fs::perms::owner_all);
  }
  // Saving over a file replaces it whole; nothing else is left in the directory.
  const std::string over = dir / "over.npy";
  ts::save(over, ts::detail::from_host(ts::float64, {100}, std::vector<double>(100, 2.0).data()));
  ts::save(over, x);
  CHECK(ts::load(over).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3});
  ts::savez(dir / "over.npz", m);
  ts::savez_compressed(dir / "over.npz", {{"y", x}});
  CHECK(ts::load_npz(dir / "over.npz").count("y") == 1);
  std::set<std::string> names;
  for (auto& e : fs::directory_iterator(dir.path)) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"file", "taken.npy", "over.npy", "over.npz"});
}

TEST_CASE("a header over 65535 bytes is written as version 2.0, and read back by NumPy and tessel") {
  TempDir dir;
  const ts::Shape shape(25000, 1);  // "(1, 1, ...)": 75000 bytes of dict
  const std::string h = ts::detail::npy::make_header(ts::float32, shape);
  CHECK(h[6] == 2);
  CHECK(h.size() % 64 == 0);
  CHECK(h.back() == '\n');
  const std::string p = dir / "v2.npy";
  std::vector<unsigned char> b(h.begin(), h.end());
  const float v = 2.5f;
  b.insert(b.end(), reinterpret_cast<const unsigned char*>(&v), reinterpret_cast<const unsigned char*>(&v) + 4);
  write_file(p, b);
  std::size_t off = 0;
  const auto header = ts::detail::npy::read_header(
      [&](void* dst, std::size_t n) {
        std::memcpy(dst, b.data() + off, n);
        off += n;
      },
      b.size(), p);
  CHECK(header.major == 2);
  CHECK(header.shape == shape);
  CHECK(header.descr == "<f4");
  CHECK(header.data_offset == h.size());
  // NumPy arrays have at most 32 dimensions: NumPy reads the header only.
  auto [out, rc] = run("/usr/bin/python3 -I -c \"import numpy as np, sys; f = open(sys.argv[1], 'rb'); "
                       "v = np.lib.format.read_magic(f); "
                       "s, o, t = np.lib.format.read_array_header_2_0(f, max_header_size=10**6); "
                       "sys.exit(0 if v == (2, 0) and s == (1,) * 25000 and not o and t == np.float32 "
                       "and f.tell() % 64 == 0 else 1)\" " + p + " 2>&1");
  INFO(out);
  CHECK(rc == 0);
}

TEST_CASE("larger arrays split along either dimension are written in order") {
  TempDir dir;
  std::mt19937 rng(3);
  const ts::Shape shape = {1029, 515};  // uneven over 8, more than the staging buffer
  ts::Array host = random_bits(rng, ts::float32, shape);
  const auto want = bytes_of(host);
  const ts::Mesh mesh = ts::make_mesh({8}, {"x"});
  for (auto spec : {P("x"), P(ts::None, "x"), P()}) {
    CAPTURE(spec.str());
    const std::string p = dir / "big.npy";
    ts::save(p, ts::device_put(host, ts::NamedSharding(mesh, spec)));
    CHECK(hex(bytes_of(ts::load(p))) == hex(want));
    const std::string z = dir / "big.npz";
    ts::savez_compressed(z, {{"big", ts::device_put(host, ts::NamedSharding(mesh, spec))}});
    CHECK(hex(bytes_of(ts::load_npz(z).at("big"))) == hex(want));
  }
}

TEST_CASE("load of an .npz says to use load_npz") {
  CHECK_THROWS_WITH_AS(ts::load(kData + "stored.npz"), has("ts::load_npz"), ts::FileError);
}

TEST_CASE("fromfile reads raw bytes (with count and offset) and text, as np.fromfile") {
  TempDir dir;
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  {
    std::ofstream f(dir / "raw.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  }
  CHECK(ts::fromfile(dir / "raw.bin").to_vector<float>() == v);
  CHECK(ts::fromfile(dir / "raw.bin", ts::float32, 2, "", 4).to_vector<float>() == std::vector<float>{-2.0f, 3.25f});
  CHECK(ts::fromfile(dir / "raw.bin", ts::uint8).size() == 20);
  std::ofstream(dir / "text.txt") << "1 2 3.5 4";
  CHECK(ts::fromfile(dir / "text.txt", ts::float64, -1, " ").to_vector<double>() == std::vector<double>{1, 2, 3.5, 4});
  CHECK_THROWS_WITH_AS(ts::fromfile(dir / "missing.bin"), has(dir / "missing.bin"), ts::FileError);
  CHECK_THROWS_AS(ts::fromfile(dir / "raw.bin", ts::float32, 9), ts::ValueError);
}
