// Arrays over other libraries' memory: ts::from_buffer (no copy, the
// deleter once after the last array), DLPack both ways for every dtype (no
// copy when compact, strided and offset tensors copied right, bad tensors
// as ts::Errors), tensors made as PyTorch and NumPy make them, and
// make_array_from_single_device_arrays on 1..8 devices, even (no copy) and
// uneven (padded copies), with JAX's errors.
#include <doctest/doctest.h>

#include <dlpack/dlpack.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include <tessel/io.hpp>
#include <tessel/tessel.hpp>

#include "tests/common/io_check.hpp"

namespace ts = tessel;
using ts::P;
using tessel::testing::bytes_of;
using tessel::testing::has;
using tessel::testing::random_bytes;

namespace {

// The elements of `index` of a row-major array of `shape` (bytes `all`).
std::vector<unsigned char> cut(const std::vector<unsigned char>& all, const ts::Shape& shape, const ts::Index& index,
                               std::size_t es) {
  std::vector<unsigned char> out;
  ts::Shape extent;
  for (auto& r : index) extent.push_back(r.stop - r.start);
  const std::int64_t n = ts::numel(extent);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t rest = k, flat = 0, stride = 1;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      const std::int64_t i = rest % extent[std::size_t(d)];
      rest /= extent[std::size_t(d)];
      flat += (index[std::size_t(d)].start + i) * stride;
      stride *= shape[std::size_t(d)];
    }
    out.insert(out.end(), all.begin() + std::ptrdiff_t(flat * std::int64_t(es)),
               all.begin() + std::ptrdiff_t((flat + 1) * std::int64_t(es)));
  }
  return out;
}

const void* pointer(const ts::Array& x, std::size_t shard = 0) {
  return reinterpret_cast<const void*>(x.addressable_shards().at(shard).unsafe_buffer_pointer());
}

// 64-byte aligned memory of `bytes`, freed by std::free.
void* aligned(std::size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

// Counts a tensor's deleter calls: replaces its deleter by one that counts
// and then calls the original (kept in a map by tensor).
struct DeleterSpy {
  static inline std::map<DLManagedTensor*, void (*)(DLManagedTensor*)> originals;
  static inline std::map<DLManagedTensor*, int> calls;
  static void counted(DLManagedTensor* t) {
    ++calls[t];
    auto f = originals.at(t);
    if (f) f(t);
  }
  static DLManagedTensor* watch(DLManagedTensor* t) {
    originals[t] = t->deleter;
    calls[t] = 0;
    t->deleter = counted;
    return t;
  }
};

// A CPU tensor as PyTorch's toDLPack and NumPy's __dlpack__ make one: the
// producer's context owns the storage, shape and strides (explicit strides,
// in elements), the deleter frees the context and the tensor with it.
template <class T>
struct ForeignTensor {
  DLManagedTensor managed{};
  std::vector<T> storage;
  std::vector<std::int64_t> shape, strides;
  static inline int deleted = 0;

  static DLManagedTensor* make(std::vector<T> storage, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                               DLDataType type, std::uint64_t byte_offset = 0) {
    auto* f = new ForeignTensor{{}, std::move(storage), std::move(shape), std::move(strides)};
    DLTensor& t = f->managed.dl_tensor;
    t.data = f->storage.data();
    t.device = {kDLCPU, 0};
    t.ndim = int(f->shape.size());
    t.dtype = type;
    t.shape = f->shape.data();
    t.strides = f->strides.empty() ? nullptr : f->strides.data();
    t.byte_offset = byte_offset;
    f->managed.manager_ctx = f;
    f->managed.deleter = [](DLManagedTensor* self) {
      ++deleted;
      delete static_cast<ForeignTensor*>(self->manager_ctx);
    };
    return &f->managed;
  }
};

// Whether `pred` holds within a few seconds: the devices drop their
// references to an array's buffer when the work reading it is done, which
// may be a moment after the last handle goes.
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::vector<float> iota_f(std::size_t n, float start = 0.f, float step = 1.f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

}  // namespace

// ---- from_buffer -----------------------------------------------------------------------------

TEST_CASE("from_buffer: the array reads the caller's memory, eagerly and under jit; the deleter runs once after the last array") {
  std::vector<float> v = iota_f(12, 0.5f, 0.25f);
  int calls = 0;
  void* seen = nullptr;
  {
    ts::Array x = ts::from_buffer(std::span<float>(v), {3, 4}, ts::Device(2), [&](void* p) {
      ++calls;
      seen = p;
    });
    CHECK(pointer(x) == v.data());
    CHECK(x.dtype() == ts::float32);
    CHECK(x.shape() == ts::Shape{3, 4});
    CHECK(x.devices() == std::set<ts::Device>{ts::Device(2)});
    CHECK(x.committed());
    CHECK(x.to_vector<float>() == v);
    // Eager and compiled results over it.
    std::vector<float> want(12);
    for (int i = 0; i < 12; ++i) want[std::size_t(i)] = v[std::size_t(i)] * 2.f + 1.f;
    CHECK((x * 2.0f + 1.0f).to_vector<float>() == want);
    auto f = ts::jit([](const ts::Array& a) { return ts::sum(a * a, {1}); });
    auto rows = f(x).to_vector<float>();
    for (int r = 0; r < 3; ++r) {
      float s = 0;
      for (int c = 0; c < 4; ++c) s += v[std::size_t(4 * r + c)] * v[std::size_t(4 * r + c)];
      CHECK(rows[std::size_t(r)] == doctest::Approx(s));
    }
    CHECK(ts::matmul(x, ts::transpose(x)).block_until_ready().shape() == ts::Shape{3, 3});
    // Arrays that may share its buffer: device_put to its device, jit's identity, a reshape.
    ts::Array same = ts::device_put(x, ts::Device(2));
    ts::Array ident = ts::jit([](const ts::Array& a) { return a; })(x);
    ts::Array flat = ts::reshape(x, {12});
    ts::Array other = ts::device_put(x, ts::Device(5));  // a copy on another device
    x = ts::Array();
    CHECK(calls == 0);
    CHECK(same.to_vector<float>() == v);
    CHECK(ident.to_vector<float>() == v);
    CHECK(flat.to_vector<float>() == v);
    same = ts::Array();
    ident = ts::Array();
    flat = ts::Array();
    CHECK(other.to_vector<float>() == v);
  }
  CHECK(eventually([&] { return calls == 1; }));
  CHECK(calls == 1);
  CHECK(seen == v.data());

  // No deleter: the memory stays the caller's.
  std::vector<std::int32_t> iv = {1, 2, 3, 4, 5, 6};
  {
    ts::Array y = ts::from_buffer(std::span<std::int32_t>(iv), {2, 3}, ts::Device(0));
    CHECK(pointer(y) == iv.data());
    CHECK(ts::sum(y).item<std::int32_t>() == 21);
  }
  CHECK(iv[5] == 6);
}

TEST_CASE("from_buffer: any 64-byte alignment reads in place; an element's own misalignment is copied") {
  auto* block = static_cast<unsigned char*>(aligned(4096));
  const std::vector<float> vals = iota_f(64, -3.f, 0.5f);
  auto jit_sum = ts::jit([](const ts::Array& a) { return ts::sum(a * 3.0f, {0}); });
  float want = 0;
  for (float f : vals) want += f * 3.f;
  // 4 bytes past a cache line: a float's alignment, not 64 bytes'.
  for (std::size_t offset : {std::size_t(4), std::size_t(12), std::size_t(1), std::size_t(3)}) {
    CAPTURE(offset);
    unsigned char* p = block + offset;
    std::memcpy(p, vals.data(), vals.size() * sizeof(float));
    int calls = 0;
    {
      ts::Array x = ts::from_buffer(p, {64}, ts::float32, ts::Device(1), [&](void* q) {
        CHECK(q == p);
        ++calls;
      });
      const bool in_place = offset % alignof(float) == 0;
      CHECK((pointer(x) == p) == in_place);
      // A copy gives the caller's memory back at once.
      CHECK(calls == (in_place ? 0 : 1));
      CHECK(x.to_vector<float>() == vals);
      CHECK(jit_sum(x).item<float>() == doctest::Approx(want));
      CHECK(ts::jit([](const ts::Array& a) { return a + 1.0f; })(x).to_vector<float>()[63] == vals[63] + 1.f);
      // In both cases, no 64-byte alignment of the result assumed either.
      CHECK(ts::matmul(ts::reshape(x, {8, 8}), ts::reshape(x, {8, 8})).shape() == ts::Shape{8, 8});
    }
    CHECK(eventually([&] { return calls == 1; }));
  }
  // complex128 at 8 bytes past a line: in place (std::complex<double> is 8-byte aligned).
  {
    std::vector<std::complex<double>> c = {{1, 2}, {3, -4}, {0.5, 0.25}};
    std::memcpy(block + 8, c.data(), sizeof(c[0]) * c.size());
    ts::Array z = ts::from_buffer(block + 8, {3}, ts::complex128, ts::Device(0));
    CHECK(pointer(z) == block + 8);
    CHECK(ts::jit([](const ts::Array& a) { return a * a; })(z).to_vector<std::complex<double>>()[1] ==
          std::complex<double>(3, -4) * std::complex<double>(3, -4));
  }
  // int64 at 4 bytes: copied.
  {
    std::vector<std::int64_t> i = {1, -2, 3000000000LL};
    std::memcpy(block + 4, i.data(), sizeof(i[0]) * i.size());
    ts::Array y = ts::from_buffer(block + 4, {3}, ts::int64, ts::Device(0));
    CHECK(pointer(y) != block + 4);
    CHECK(ts::sum(y).item<std::int64_t>() == 2999999999LL);
  }
  std::free(block);
}

TEST_CASE("from_buffer: errors leave the memory with the caller") {
  std::vector<float> v(6);
  int calls = 0;
  auto count = [&](void*) { ++calls; };
  CHECK_THROWS_WITH_AS(ts::from_buffer(std::span<float>(v), {2, 4}, ts::Device(0), count), has("(2, 4)"), ts::ShapeError);
  CHECK_THROWS_WITH_AS(ts::from_buffer(nullptr, {2, 3}, ts::float32, ts::Device(0), count), has("null"), ts::ValueError);
  CHECK_THROWS_AS(ts::from_buffer(v.data(), {2, 3}, ts::float32, ts::Device(99), count), ts::ShardingError);
  CHECK_THROWS_AS(ts::from_buffer(v.data(), {2, -3}, ts::float32, ts::Device(0), count), ts::Error);
  CHECK(calls == 0);
  // Empty: null is fine, and the deleter still runs.
  {
    ts::Array e = ts::from_buffer(nullptr, {0, 3}, ts::float32, ts::Device(0), count);
    CHECK(e.shape() == ts::Shape{0, 3});
    CHECK(ts::sum(e).item<float>() == 0.f);
  }
  CHECK(eventually([&] { return calls == 1; }));
}

// ---- DLPack -----------------------------------------------------------------------------------

TEST_CASE("DLPack: every dtype round trips bit for bit without a copy, the deleter once") {
  std::mt19937 rng(9);
  struct Want {
    ts::DType t;
    std::uint8_t code, bits;
  };
  const std::vector<Want> types = {
      {ts::bool_, 6, 8},        {ts::int8, kDLInt, 8},      {ts::int16, kDLInt, 16},     {ts::int32, kDLInt, 32},
      {ts::int64, kDLInt, 64},  {ts::uint8, kDLUInt, 8},    {ts::uint16, kDLUInt, 16},   {ts::uint32, kDLUInt, 32},
      {ts::uint64, kDLUInt, 64}, {ts::float16, kDLFloat, 16}, {ts::float32, kDLFloat, 32}, {ts::float64, kDLFloat, 64},
      {ts::bfloat16, kDLBfloat, 16}, {ts::complex64, kDLComplex, 64}, {ts::complex128, kDLComplex, 128},
      {ts::float8_e4m3fn, 10, 8}, {ts::float8_e5m2, 12, 8}, {ts::float8_e8m0fnu, 13, 8}};
  // Every dtype but float4_e2m1fn, which DLPack packs two to a byte (below).
  REQUIRE(types.size() + 1 == std::size_t(ts::kNumDTypes));
  CHECK_THROWS_WITH_AS(ts::to_dlpack(ts::zeros({2}).astype(ts::float4_e2m1fn)),
                       doctest::Contains("packs two per byte"), ts::TypeError);
  for (const ts::Shape& shape : {ts::Shape{3, 5}, ts::Shape{}, ts::Shape{0, 4}, ts::Shape{2, 1, 3}}) {
    for (auto& w : types) {
      CAPTURE(ts::dtype_name(w.t));
      CAPTURE(ts::shape_str(shape));
      const auto bytes = random_bytes(rng, w.t, shape);
      ts::Array x = ts::device_put(ts::detail::from_host(w.t, shape, bytes.data()), ts::Device(3));
      DLManagedTensor* t = DeleterSpy::watch(ts::to_dlpack(x));
      const DLTensor& d = t->dl_tensor;
      CHECK(d.device.device_type == kDLCPU);
      CHECK(d.device.device_id == 0);
      CHECK(int(d.dtype.code) == int(w.code));
      CHECK(int(d.dtype.bits) == int(w.bits));
      CHECK(d.dtype.lanes == 1);
      REQUIRE(d.ndim == int(shape.size()));
      CHECK(std::vector<std::int64_t>(d.shape, d.shape + d.ndim) == shape);
      std::int64_t stride = 1;
      for (int k = d.ndim - 1; k >= 0; --k) {
        CHECK(d.strides[k] == stride);
        stride *= shape[std::size_t(k)];
      }
      CHECK(d.byte_offset == 0);
      if (!bytes.empty()) {
        CHECK(d.data == pointer(x));
        CHECK(std::memcmp(d.data, bytes.data(), bytes.size()) == 0);
      }
      const void* where = d.data;
      {
        ts::Array y = ts::from_dlpack(t);
        CHECK(y.dtype() == w.t);
        CHECK(y.shape() == shape);
        CHECK_FALSE(y.committed());
        CHECK(y.devices() == std::set<ts::Device>{ts::local_devices().at(0)});
        if (!bytes.empty()) CHECK(pointer(y) == where);
        x = ts::Array();  // the tensor keeps the buffer
        CHECK(bytes_of(y) == bytes);
        CHECK(DeleterSpy::calls.at(t) == 0);
        // On a device named: committed there, still no copy.
        if (!bytes.empty()) {
          ts::Array z = ts::from_dlpack(DeleterSpy::watch(ts::to_dlpack(y)), ts::Device(6));
          CHECK(z.committed());
          CHECK(z.devices() == std::set<ts::Device>{ts::Device(6)});
          CHECK(pointer(z) == where);
        }
      }
      CHECK(eventually([&] { return DeleterSpy::calls.at(t) == 1; }));
    }
  }
}

TEST_CASE("DLPack: strided tensors are copied in C order, byte_offset honoured, compact ones read in place") {
  // A 4x3 row-major matrix seen transposed: shape (3, 4), strides (1, 3).
  ForeignTensor<double>::deleted = 0;
  std::vector<double> m(12);
  for (int i = 0; i < 12; ++i) m[std::size_t(i)] = i * 1.5 - 2;
  {
    DLManagedTensor* t = ForeignTensor<double>::make(m, {3, 4}, {1, 3}, {kDLFloat, 64, 1});
    const void* storage = t->dl_tensor.data;
    ts::Array x = ts::from_dlpack(t);
    CHECK(ForeignTensor<double>::deleted == 1);  // copied, then given back at once
    CHECK(pointer(x) != storage);
    std::vector<double> want(12);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c) want[std::size_t(4 * r + c)] = m[std::size_t(3 * c + r)];
    CHECK(x.to_vector<double>() == want);
    CHECK(ts::transpose(x).to_vector<double>() == m);
  }
  // A 3-D slice with a byte offset: rows 1..2 and every other column of a (3, 2, 6) block.
  {
    std::vector<std::int16_t> s(36);
    for (int i = 0; i < 36; ++i) s[std::size_t(i)] = std::int16_t(i * 7 - 100);
    const std::int64_t off = 1 * 12 + 1;  // element (1, 0, 1)
    DLManagedTensor* t = ForeignTensor<std::int16_t>::make(s, {2, 2, 3}, {12, 6, 2}, {kDLInt, 16, 1},
                                                            std::uint64_t(off) * 2);
    ts::Array x = ts::from_dlpack(t, ts::Device(4));
    std::vector<std::int16_t> want;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 3; ++c) want.push_back(s[std::size_t(off + 12 * a + 6 * b + 2 * c)]);
    CHECK(x.to_vector<std::int16_t>() == want);
  }
  // Negative and zero strides (a reversed row, a broadcast axis).
  {
    std::vector<float> s = iota_f(5, 10.f);
    DLManagedTensor* t = ForeignTensor<float>::make(s, {3, 5}, {0, -1}, {kDLFloat, 32, 1}, 4 * 4);
    ts::Array x = ts::from_dlpack(t);
    std::vector<float> want;
    for (int r = 0; r < 3; ++r)
      for (int c = 4; c >= 0; --c) want.push_back(s[std::size_t(c)]);
    CHECK(x.to_vector<float>() == want);
  }
  // Compact with a byte offset, and unit axes with odd strides: in place.
  {
    ForeignTensor<float>::deleted = 0;
    std::vector<float> s = iota_f(16);
    DLManagedTensor* t = ForeignTensor<float>::make(s, {2, 1, 5}, {5, 77, 1}, {kDLFloat, 32, 1}, 3 * 4);
    const char* first = static_cast<const char*>(t->dl_tensor.data) + 12;
    {
      ts::Array x = ts::from_dlpack(t);
      CHECK(pointer(x) == first);
      CHECK(x.to_vector<float>() == std::vector<float>(s.begin() + 3, s.begin() + 13));
      CHECK(ts::jit([](const ts::Array& a) { return ts::sum(a); })(x).item<float>() == 75.f);
      CHECK(ForeignTensor<float>::deleted == 0);
    }
    CHECK(eventually([] { return ForeignTensor<float>::deleted == 1; }));
  }
  // A byte offset that misaligns the elements: copied.
  {
    std::vector<std::int32_t> s = {0x01020304, 0x05060708, 0x090a0b0c};
    DLManagedTensor* t = ForeignTensor<std::int32_t>::make(s, {2}, {}, {kDLInt, 32, 1}, 2);
    const char* first = static_cast<const char*>(t->dl_tensor.data) + 2;
    std::vector<std::int32_t> want(2);
    std::memcpy(want.data(), first, 8);
    ts::Array x = ts::from_dlpack(t);
    CHECK(pointer(x) != first);
    CHECK(x.to_vector<std::int32_t>() == want);
  }
}

TEST_CASE("DLPack: bad tensors and arrays are ts::Errors naming what is wrong; the tensor stays the caller's") {
  ForeignTensor<float>::deleted = 0;
  auto make = [] { return ForeignTensor<float>::make(iota_f(6), {2, 3}, {3, 1}, {kDLFloat, 32, 1}); };
  DLManagedTensor* t = make();
  CHECK_THROWS_WITH_AS(ts::from_dlpack(nullptr), has("null"), ts::ValueError);
  t->dl_tensor.device = {kDLCUDA, 1};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("kDLCUDA"), ts::ValueError);
  t->dl_tensor.device = {DLDeviceType(42), 0};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("device type 42"), ts::ValueError);
  t->dl_tensor.device = {kDLCPU, 0};
  t->dl_tensor.dtype = {kDLFloat, 32, 2};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("lanes 2"), ts::TypeError);
  t->dl_tensor.dtype = {kDLOpaqueHandle, 64, 1};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("kDLOpaqueHandle"), ts::TypeError);
  t->dl_tensor.dtype = {kDLFloat, 8, 1};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("kDLFloat (code 2) with 8 bits"), ts::TypeError);
  t->dl_tensor.dtype = {11, 8, 1};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("kDLFloat8_e4m3fnuz"), ts::TypeError);
  t->dl_tensor.dtype = {99, 32, 1};
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("type code 99"), ts::TypeError);
  t->dl_tensor.dtype = {kDLUInt, 1, 1};
  CHECK_THROWS_AS(ts::from_dlpack(t), ts::TypeError);
  t->dl_tensor.dtype = {kDLFloat, 32, 1};
  void* data = t->dl_tensor.data;
  t->dl_tensor.data = nullptr;
  CHECK_THROWS_WITH_AS(ts::from_dlpack(t), has("null"), ts::ValueError);
  t->dl_tensor.data = data;
  CHECK_THROWS_AS(ts::from_dlpack(t, ts::Device(99)), ts::ShardingError);
  CHECK(ForeignTensor<float>::deleted == 0);
  // The same tensor, repaired, is taken.
  CHECK(ts::from_dlpack(t).to_vector<float>() == iota_f(6));
  CHECK(eventually([] { return ForeignTensor<float>::deleted == 1; }));

  // to_dlpack: single-device arrays only (JAX's rule), sharded or replicated.
  ts::Array x = ts::arange(16.0f);
  const ts::NamedSharding split(ts::make_mesh({4}, {"x"}), P("x"));
  const ts::NamedSharding repl(ts::make_mesh({2}, {"x"}), P());
  CHECK_THROWS_WITH_AS(ts::to_dlpack(ts::device_put(x, split)), has("4 devices"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::to_dlpack(ts::device_put(x, repl)), has("2 devices"), ts::ValueError);
  CHECK_THROWS_AS(ts::to_dlpack(ts::Array()), ts::Error);
  // A shard of it is fine.
  DLManagedTensor* one = ts::to_dlpack(ts::device_put(x, split).addressable_shards()[2].data());
  CHECK(static_cast<const float*>(one->dl_tensor.data)[0] == 8.f);
  one->deleter(one);
}

TEST_CASE("DLPack: tensors as PyTorch and NumPy make them, in and out") {
  // In: a PyTorch-style contiguous float32 (2, 3, 4) tensor (explicit strides), no copy.
  ForeignTensor<float>::deleted = 0;
  std::vector<float> w = iota_f(24, -1.f, 0.125f);
  DLManagedTensor* torch = ForeignTensor<float>::make(w, {2, 3, 4}, {12, 4, 1}, {kDLFloat, 32, 1});
  const void* storage = torch->dl_tensor.data;
  // NumPy's bool array (kDLBool, 8 bits) and a complex64 vector.
  std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0};
  DLManagedTensor* np_bool = ForeignTensor<std::uint8_t>::make(mask, {3, 4}, {4, 1}, {6, 8, 1});
  {
    ts::Array a = ts::from_dlpack(torch);
    ts::Array b = ts::from_dlpack(np_bool);
    CHECK(pointer(a) == storage);
    CHECK(b.dtype() == ts::bool_);
    auto f = ts::jit([](const ts::Array& a, const ts::Array& m) { return ts::sum(ts::where(m, a, ts::zeros_like(a)), {0}); });
    auto got = f(a, b).to_vector<float>();
    REQUIRE(got.size() == 12);
    for (int i = 0; i < 12; ++i)
      CHECK(got[std::size_t(i)] == (mask[std::size_t(i)] ? w[std::size_t(i)] + w[std::size_t(12 + i)] : 0.f));

    // Out: a tessel result read as a consumer reads it (through shape, strides
    // and dtype), then given back through its deleter.
    ts::Array r = f(a, b);
    DLManagedTensor* out = ts::to_dlpack(r);
    const DLTensor& d = out->dl_tensor;
    REQUIRE(d.ndim == 2);
    CHECK((d.shape[0] == 3 && d.shape[1] == 4));
    CHECK((d.dtype.code == kDLFloat && d.dtype.bits == 32 && d.dtype.lanes == 1));
    for (std::int64_t i = 0; i < d.shape[0]; ++i)
      for (std::int64_t j = 0; j < d.shape[1]; ++j)
        CHECK(static_cast<const float*>(d.data)[i * d.strides[0] + j * d.strides[1]] == got[std::size_t(4 * i + j)]);
    r = ts::Array();
    // The consumer still reads it: the tensor holds the buffer.
    CHECK(static_cast<const float*>(d.data)[0] == got[0]);
    out->deleter(out);
  }
  CHECK(eventually([] { return ForeignTensor<float>::deleted == 1 && ForeignTensor<std::uint8_t>::deleted == 1; }));
}

// ---- make_array_from_single_device_arrays --------------------------------------------------------

TEST_CASE("make_array_from_single_device_arrays: 1..8 devices, even (no copy) and uneven, 1-D and 2-D meshes") {
  REQUIRE(ts::device_count() >= 8);
  std::mt19937 rng(5);
  struct Layout {
    ts::Shape shape;
    ts::Shape mesh;
    std::vector<std::string> names;
    ts::PartitionSpec spec;
    std::string what;
  };
  const std::vector<Layout> layouts = {
      {{6}, {1}, {"x"}, P("x"), "(6,) on 1"},
      {{8}, {2}, {"x"}, P("x"), "(8,) on 2"},
      {{7}, {2}, {"x"}, P("x"), "(7,) on 2, uneven"},
      {{9, 2}, {3}, {"x"}, P("x"), "(9, 2) on 3"},
      {{16, 3}, {8}, {"x"}, P("x"), "(16, 3) on 8"},
      {{5, 3}, {8}, {"x"}, P("x"), "(5, 3) on 8, empty shards"},
      {{4, 10}, {4}, {"x"}, P(ts::None, "x"), "(4, 10) on 4 along the last dim, uneven"},
      {{8, 4}, {4, 2}, {"a", "b"}, P("a", "b"), "(8, 4) on (4, 2)"},
      {{7, 3}, {4, 2}, {"a", "b"}, P("a", "b"), "(7, 3) on (4, 2), uneven"},
      {{8, 4}, {4, 2}, {"a", "b"}, P("a"), "(8, 4) on (4, 2), 'b' replicated"},
      {{6, 5}, {2, 4}, {"a", "b"}, P(ts::None, "a"), "(6, 5) on (2, 4), 'b' replicated, uneven"},
      {{8}, {8}, {"x"}, P(), "(8,) replicated on 8"},
      {{}, {4}, {"x"}, P(), "0-d on 4"},
  };
  for (ts::DType t : {ts::float32, ts::int8, ts::complex128, ts::bfloat16}) {
    for (auto& l : layouts) {
      CAPTURE(std::string(ts::dtype_name(t)));
      CAPTURE(l.what);
      const ts::NamedSharding s(ts::make_mesh(l.mesh, l.names), l.spec);
      const auto bytes = random_bytes(rng, t, l.shape);
      ts::Array host = ts::detail::from_host(t, l.shape, bytes.data());
      // Each device's shard, as a single-device array of the user's (from_buffer), in reverse order.
      const auto map = s.devices_indices_map(l.shape);
      std::vector<ts::Array> shards;
      std::map<int, const void*> given;
      for (auto it = map.rbegin(); it != map.rend(); ++it) {
        // (Cut on the host, bit for bit: a slice computed by tessel reads
        // narrow floats through float32.)
        ts::Shape extent;
        for (auto& r : it->second) extent.push_back(r.stop - r.start);
        auto mine = std::make_shared<std::vector<unsigned char>>(cut(bytes, l.shape, it->second, ts::dtype_size(t)));
        mine->reserve(mine->size() + 64);  // never null, even for an empty shard
        shards.push_back(ts::from_buffer(mine->data(), extent, t, it->first, [mine](void*) {}));
        given[it->first.id()] = mine->data();
      }
      ts::Array g = ts::make_array_from_single_device_arrays(l.shape, s, shards);
      CHECK(g.shape() == l.shape);
      CHECK(g.dtype() == t);
      CHECK(g.sharding() == ts::Sharding(s));
      CHECK(g.committed());
      CHECK(bytes_of(g) == bytes);
      // Even: each device's buffer is the array given for it.
      for (auto& sh : g.addressable_shards()) {
        CAPTURE(sh.device().id());
        ts::Shape extent;
        for (auto& r : sh.index()) extent.push_back(r.stop - r.start);
        const bool fills_tile = extent == s.shard_shape(l.shape);
        CHECK((reinterpret_cast<const void*>(sh.unsafe_buffer_pointer()) == given.at(sh.device().id())) == fills_tile);
      }
      // Computations over it see the values.
      if (t == ts::float32) {
        auto f = ts::jit([](const ts::Array& a) { return a * 2.0f + 1.0f; });
        CHECK(bytes_of(f(g)) == bytes_of(host * 2.0f + 1.0f));
      }
    }
  }
}

TEST_CASE("make_array_from_single_device_arrays: wrong count, shape, dtype or device are JAX's errors") {
  const ts::NamedSharding s(ts::make_mesh({4}, {"x"}), P("x"));
  ts::Array host = ts::arange(8.0f);
  std::vector<ts::Array> shards;
  for (int d = 0; d < 4; ++d)
    shards.push_back(ts::device_put(host.index({ts::slice(2 * d, 2 * d + 2)}), ts::Device(d)));
  CHECK(ts::make_array_from_single_device_arrays({8}, s, shards).to_vector<float>() == host.to_vector<float>());
  // Count.
  auto three = std::vector<ts::Array>(shards.begin(), shards.begin() + 3);
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, three), has("got 3"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, three), has("4 addressable device(s)"),
                       ts::ValueError);
  // Shape: names the index, the device, the shard's shape and the array's.
  auto bad = shards;
  bad[2] = ts::device_put(ts::arange(3.0f), ts::Device(2));
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("arrays[2] (device 2) has shape (3,)"),
                       ts::ShapeError);
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("has shape (2,)"), ts::ShapeError);
  // dtype.
  bad = shards;
  bad[1] = ts::device_put(ts::astype(shards[1], ts::float64), ts::Device(1));
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("float64"), ts::TypeError);
  // Device: one the sharding lacks, twice the same, several.
  bad = shards;
  bad[3] = ts::device_put(shards[3], ts::Device(6));
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("device 6"), ts::ValueError);
  bad = shards;
  bad[3] = shards[0];
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("both on device 0"), ts::ValueError);
  bad = shards;
  bad[0] = ts::device_put(shards[0], ts::NamedSharding(ts::make_mesh({2}, {"y"}), P()));
  CHECK_THROWS_WITH_AS(ts::make_array_from_single_device_arrays({8}, s, bad), has("arrays[0] is on 2 devices"),
                       ts::ValueError);
  // A shape the sharding does not fit.
  CHECK_THROWS_AS(ts::make_array_from_single_device_arrays({8, 2}, ts::NamedSharding(ts::make_mesh({4}, {"x"}), P("x", "x")), shards),
                  ts::Error);
}
