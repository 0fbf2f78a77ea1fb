#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <barrier>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <tessel/tessel.hpp>

#include "runtime/buffer.hpp"
#include "runtime/collectives.hpp"
#include "runtime/device.hpp"

using namespace tessel;

namespace {
rt::Runtime& runtime() {
  devices();  // starts the runtime from ts::config()
  return rt::Runtime::get();
}
}  // namespace

TEST_CASE("each device runs its tasks in order on its own thread") {
  auto& r = runtime();
  REQUIRE(r.device_count() == 8);
  std::vector<std::vector<int>> seen(8);
  std::vector<int> ids = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int k = 0; k < 50; ++k)
    r.launch(ids, [&](int i) -> std::function<void()> {
      return [&, i, k] {
        CHECK(rt::current_device() == i);
        seen[i].push_back(k);
      };
    });
  r.synchronize();
  for (auto& s : seen) {
    REQUIRE(s.size() == 50);
    for (int k = 0; k < 50; ++k) CHECK(s[k] == k);
  }
  CHECK(rt::current_device() == -1);
}

TEST_CASE("launches from many host threads with blocking rendezvous do not deadlock") {
  // Every launch makes its devices meet at a barrier, as a collective does.
  // Launches race from 4 host threads over overlapping device subsets.
  auto& r = runtime();
  std::atomic<int> done{0};
  std::vector<std::thread> hosts;
  const int per_thread = 40;
  for (int h = 0; h < 4; ++h) {
    hosts.emplace_back([&, h] {
      for (int k = 0; k < per_thread; ++k) {
        std::vector<int> ids;
        for (int d = 0; d < 8; ++d)
          if ((d + h + k) % 3 != 0) ids.push_back((d * (h + 1)) % 8);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        auto meet = std::make_shared<std::barrier<>>(std::ptrdiff_t(ids.size()));
        r.launch(ids, [&, meet](int) -> std::function<void()> {
          return [&, meet] {
            meet->arrive_and_wait();
            done.fetch_add(1);
          };
        });
      }
    });
  }
  for (auto& t : hosts) t.join();
  r.synchronize();
  CHECK(done.load() > 4 * per_thread);
}

TEST_CASE("stream_copy copies exactly, at every alignment and size") {
  std::vector<unsigned char> src(70000), dst(70000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (std::size_t bytes : {0, 1, 63, 64, 65, 4095, 4096, 4097, 4160, 65536 + 17})
    for (std::size_t from : {0, 1, 13, 64})
      for (std::size_t to : {0, 3, 32, 63}) {
        std::fill(dst.begin(), dst.end(), 0xAB);
        rt::stream_copy(dst.data() + to, src.data() + from, bytes);
        INFO("bytes ", bytes, " from +", from, " to +", to);
        CHECK(std::equal(dst.begin() + std::ptrdiff_t(to), dst.begin() + std::ptrdiff_t(to + bytes),
                         src.begin() + std::ptrdiff_t(from)));
        // Nothing around the destination is touched.
        CHECK(std::all_of(dst.begin(), dst.begin() + std::ptrdiff_t(to), [](unsigned char c) { return c == 0xAB; }));
        CHECK(std::all_of(dst.begin() + std::ptrdiff_t(to + bytes), dst.end(), [](unsigned char c) { return c == 0xAB; }));
      }
}

TEST_CASE("events carry completion and errors") {
  rt::Event e;
  CHECK_FALSE(e.is_set());
  std::thread t([&] { e.set(); });
  e.wait();
  t.join();
  CHECK(e.is_set());
  rt::Event bad;
  bad.set_error(std::make_exception_ptr(ShapeError("boom")));
  CHECK_THROWS_WITH_AS(bad.wait(), "boom", ShapeError);
}

TEST_CASE("buffers are aligned and owned by a device") {
  auto b = rt::Buffer::allocate(3, 100);
  CHECK(b->device() == 3);
  CHECK(b->bytes() == 100);
  CHECK(reinterpret_cast<std::uintptr_t>(b->data()) % 64 == 0);
  auto z = rt::Buffer::allocate(0, 0);
  CHECK(z->data() != nullptr);
}

TEST_CASE("small device blocks skip the block cache, and a freed one is handed out again for its size") {
  // Under 64 KiB: malloc's, a few freed ones kept per size (runtime/buffer.cpp).
  const std::size_t cached = rt::cached_bytes(), fresh = rt::fresh_bytes();
  void* a = rt::device_alloc(1000);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);
  rt::device_free(a, 1000);
  void* b = rt::device_alloc(1000);
  CHECK(b == a);
  std::vector<void*> many;
  for (int i = 0; i < 200; ++i) many.push_back(rt::device_alloc(1000 + 64 * std::size_t(i % 3)));
  for (std::size_t i = 0; i < many.size(); ++i) {
    CHECK(reinterpret_cast<std::uintptr_t>(many[i]) % 64 == 0);
    std::memset(many[i], int(i), 1000);
  }
  for (std::size_t i = 0; i < many.size(); ++i) rt::device_free(many[i], 1000 + 64 * (i % 3));
  rt::device_free(b, 1000);
  CHECK(rt::cached_bytes() == cached);
  CHECK(rt::fresh_bytes() == fresh);
  // 64 KiB and more: the block cache's.
  void* big = rt::device_alloc(64 << 10);
  rt::device_free(big, 64 << 10);
  CHECK(rt::cached_bytes() >= cached + (64 << 10));
  CHECK(rt::device_alloc(64 << 10) == big);
  rt::device_free(big, 64 << 10);
}

TEST_CASE("the block cache hands a freed block out again for the same size") {
  rt::BlockCache cache(1 << 20);
  void* a = cache.allocate(1000);
  cache.free(a, 1000);
  CHECK(cache.cached() == 1024);  // rounded to cache lines
  CHECK(cache.allocate(1000) == a);
  CHECK(cache.cached() == 0);
  cache.free(a, 1000);
}

TEST_CASE("a full block cache keeps the blocks it holds and gives the freed one back") {
  rt::BlockCache cache(3 * 1024);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(cache.allocate(1024));
  for (void* b : blocks) cache.free(b, 1024);
  CHECK(cache.cached() == 3 * 1024);
  std::set<void*> reused;
  for (int i = 0; i < 3; ++i) reused.insert(cache.allocate(1024));
  CHECK(reused == std::set<void*>(blocks.begin(), blocks.begin() + 3));  // the last freed went back
  CHECK(cache.fresh() == 4 * 1024);
  for (void* b : reused) cache.free(b, 1024);
}

TEST_CASE("a block not asked for within twice the cache's size in requests goes back") {
  rt::BlockCache cache(4096);
  void* a = cache.allocate(1024);
  cache.free(a, 1024);
  auto request = [&] {
    void* x = cache.allocate(2048);
    cache.free(x, 2048);
  };
  for (int i = 0; i < 4; ++i) request();  // 8 KiB asked for since a was freed: a is not stale yet
  CHECK(cache.cached() == 1024 + 2048);
  request();  // 10 KiB: stale
  CHECK(cache.cached() == 2048);
  CHECK(cache.fresh() == 1024 + 2048);  // the 2 KiB block was asked for: kept throughout
}

TEST_CASE("after a program changes, the block cache comes to hold the new program's blocks") {
  // Two 'programs' each allocating then freeing their own sizes, as the MLP
  // does when the tutorial moves from data to model parallelism. The cap
  // holds one program's blocks and a half: keeping the old program's blocks
  // would leave the new one taking most of its blocks from the system on
  // every run.
  const std::vector<std::size_t> first = {64 << 10, 64 << 10, 128 << 10, 32 << 10};
  const std::vector<std::size_t> second = {48 << 10, 96 << 10, 96 << 10, 80 << 10};
  const std::size_t footprint = (64 + 64 + 128 + 32) << 10, second_footprint = (48 + 96 + 96 + 80) << 10;
  rt::BlockCache cache(footprint * 3 / 2);
  auto run = [&](const std::vector<std::size_t>& sizes) {
    std::vector<void*> live;
    for (auto n : sizes) live.push_back(cache.allocate(n));
    for (size_t i = 0; i < sizes.size(); ++i) cache.free(live[i], sizes[i]);
  };
  run(first), run(first);
  CHECK(cache.cached() == footprint);
  CHECK(cache.fresh() == footprint);
  for (int i = 0; i < 4; ++i) run(second);
  const std::size_t fresh = cache.fresh();
  run(second);
  CHECK(cache.fresh() == fresh);  // every block from the cache
  CHECK(cache.cached() == second_footprint);
}

TEST_CASE("parallel_for covers the range exactly once") {
  auto& r = runtime();
  std::vector<std::atomic<int>> hits(1000);
  r.launch({0}, [&](int) -> std::function<void()> {
    return [&] {
      rt::parallel_for(0, 1000, 16, [&](std::int64_t b, std::int64_t e) {
        for (auto i = b; i < e; ++i) hits[i].fetch_add(1);
      });
    };
  });
  r.synchronize();
  for (auto& h : hits) CHECK(h.load() == 1);
}

TEST_CASE("the runtime cannot be restarted with other options") {
  auto& r = runtime();
  rt::RuntimeOptions o;
  o.device_count = 3;
  o.threads_per_device = r.threads_per_device();
  CHECK_THROWS_AS(rt::Runtime::start(o), Error);
}

TEST_CASE("a machine_if_idle compute slot takes every core only while nothing else computes") {
  auto& r = runtime();
  r.synchronize();
  {
    rt::ComputeSlot alone(rt::ComputeSlot::Width::machine_if_idle);
    CHECK(alone.machine_wide());
  }
  rt::ComputeSlot device_share;
  CHECK_FALSE(device_share.machine_wide());
  if (rt::ComputeSlot::machine_threads() >= 2 * r.threads_per_device()) {
    rt::ComputeSlot second(rt::ComputeSlot::Width::machine_if_idle);
    CHECK_FALSE(second.machine_wide());
  }
}

TEST_CASE("a launch's devices count as busy before any starts: none of them takes every core for a machine_if_idle slot") {
  // Each device takes a machine_if_idle slot, notes what it got, gives it
  // back, then waits for its peers. Counted busy only once running, the
  // first device to start could find its peers idle and take every core.
  auto& r = runtime();
  r.synchronize();
  const int n = std::min(r.device_count(), 4);
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i);
  for (int round = 0; round < 50; ++round) {
    std::vector<int> wide(std::size_t(n), -1);
    std::atomic<int> arrived{0};
    r.launch(ids, [&](int i) -> std::function<void()> {
      return [&, i] {
        {
          rt::ComputeSlot slot(rt::ComputeSlot::Width::machine_if_idle);
          wide[std::size_t(i)] = slot.machine_wide();
        }
        arrived.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (arrived.load() < n && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      };
    });
    r.synchronize();
    for (int i = 0; i < n; ++i) CHECK(wide[std::size_t(i)] == 0);
  }
  // Alone again, a slot takes every core.
  int alone = -1;
  r.launch({0}, [&](int) -> std::function<void()> {
    return [&] {
      rt::ComputeSlot slot(rt::ComputeSlot::Width::machine_if_idle);
      alone = slot.machine_wide();
    };
  });
  r.synchronize();
  CHECK(alone == 1);
}

TEST_CASE("a machine_if_idle compute slot stays on its device while another device has a task under way") {
  auto& r = runtime();
  r.synchronize();
  std::atomic<bool> started{false}, release{false};
  r.launch({1}, [&](int) -> std::function<void()> {
    return [&] {
      started = true;
      while (!release) std::this_thread::yield();
    };
  });
  while (!started) std::this_thread::yield();
  {
    rt::ComputeSlot slot(rt::ComputeSlot::Width::machine_if_idle);
    CHECK_FALSE(slot.machine_wide());
  }
  release = true;
  r.synchronize();
  rt::ComputeSlot after(rt::ComputeSlot::Width::machine_if_idle);
  CHECK(after.machine_wide());
}
