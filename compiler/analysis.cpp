// Cost, communication, cheapness, cache size and memory checks of a compiled
// program (compiler/analysis.hpp).
#include "compiler/analysis.hpp"

#include <algorithm>
#include <sstream>
#include <string>

#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::compiler {

CostAnalysis cost_of(const Graph& local) {
  CostAnalysis c;
  for (auto& n : local.topo_order()) {
    const NodeCost own = rules(n->op).cost(*n);
    c.flops += own.flops, c.transcendentals += own.transcendentals, c.bytes_accessed += own.bytes_accessed;
    CostAnalysis inner;
    for (auto& g : n->regions()) {
      const CostAnalysis r = cost_of(*g);
      if (own.one_region) {
        inner.flops = std::max(inner.flops, r.flops);
        inner.transcendentals = std::max(inner.transcendentals, r.transcendentals);
        inner.bytes_accessed = std::max(inner.bytes_accessed, r.bytes_accessed);
      } else {
        inner.flops += r.flops, inner.transcendentals += r.transcendentals, inner.bytes_accessed += r.bytes_accessed;
      }
    }
    c.flops += own.region_runs * inner.flops;
    c.transcendentals += own.region_runs * inner.transcendentals;
    c.bytes_accessed += own.region_runs * inner.bytes_accessed;
  }
  return c;
}

std::vector<CommStat> communication_of(const Graph& local) {
  std::vector<CommStat> out;
  for (auto& n : local.topo_order()) {
    const NodeCost own = rules(n->op).cost(*n);
    if (own.communicates) out.push_back({op_name(n->op), own.bytes_moved});
    if (n->regions().empty()) continue;
    std::vector<CommStat> inner;
    double most = -1;
    for (auto& g : n->regions()) {
      std::vector<CommStat> r = communication_of(*g);
      if (!own.one_region) {
        inner.insert(inner.end(), r.begin(), r.end());
        continue;
      }
      double moved = 0;
      for (auto& s : r) moved += s.bytes_per_device;
      if (moved > most) most = moved, inner = std::move(r);
    }
    for (auto& s : inner) out.push_back({s.collective, s.bytes_per_device * own.region_runs});
  }
  return out;
}

// Straight-line kernels and collectives of a few microseconds on all devices
// together, every thunk able to run for all devices on one thread.
bool is_cheap(const Program& p, const rt::Executable& e) {
  if (!p.global.effects.empty()) return false;
  for (auto& t : e.thunks) {
    const std::string c = t->category();
    if ((c != "kernel" && c != "dot" && c != "constant" && c != "collective") || !t->can_run_all()) return false;
  }
  double moved = 0;  // collectives' bytes per device
  for (auto& c : p.communication) moved += c.bytes_per_device;
  // Waking the devices costs tens of microseconds, and each collective
  // another rendezvous of every device thread: about what one thread reads
  // and writes of 256 KiB. Capped, so that no inline run keeps the caller
  // for more than a fraction of a millisecond.
  const double n = double(p.common.mesh->size());
  const double budget = std::min(256.0 * 1024 * double(1 + p.communication.size()), 4.0 * 1024 * 1024);
  return n * (p.cost.bytes_accessed + moved) <= budget && n * p.cost.flops <= 1e6 &&
         n * p.cost.transcendentals <= 1e5;
}

std::size_t program_bytes(const Program& p, std::size_t code_bytes, std::size_t object_bytes) {
  return object_bytes + p.global_text.size() + p.local_text.size() + p.thunks_text.size() + code_bytes +
         256 * std::size_t(p.partitioned.local.topo_order().size());
}

namespace {

std::string bytes_str(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) b /= 1024, ++u;
  std::ostringstream os;
  os.precision(u ? 3 : 0);
  os << std::fixed << b << ' ' << units[u];
  return os.str();
}

}  // namespace

// The devices of a run share the host's memory.
void check_memory(const Program& p) {
  const std::size_t devices = std::size_t(p.common.mesh->size());
  if (rt::fits_host(p.peak_bytes, devices)) return;
  const double need = double(p.peak_bytes) * double(p.common.mesh->size());
  std::string largest;
  double most = -1;
  for (auto& node : p.partitioned.local.topo_order()) {
    const double b = double(numel(node->shape())) * double(dtype_size(node->dtype()));
    if (b > most) most = b, largest = aval_str(node->dtype(), node->shape());
  }
  throw ResourceExhaustedError("RESOURCE_EXHAUSTED: " + p.global.name + " needs " + bytes_str(double(p.peak_bytes)) +
                               " on each of its " + std::to_string(p.common.mesh->size()) + " device(s) " +
                               ids_str(p.common.mesh->device_ids()) + " (" + bytes_str(need) +
                               " in all; its largest per-device buffer is " + largest + "), more than the host's " +
                               bytes_str(double(rt::host_memory_bytes())) + " of memory");
}

std::string ids_str(const std::vector<int>& ids) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? ", " : "") << ids[i];
  os << ']';
  return os.str();
}

bool same_placement(const AxisSharding& a, const AxisSharding& b, const Shape& shape) {
  // The same sharding places every element alike (the common case: an
  // argument already laid out as the program wants it).
  if ((a.mesh == b.mesh || *a.mesh == *b.mesh) && a.dims == b.dims && a.unreduced == b.unreduced) return true;
  if (a.mesh->device_ids() != b.mesh->device_ids()) return false;
  if (a.tile_shape(shape) != b.tile_shape(shape)) return false;
  for (std::int64_t p = 0; p < a.mesh->size(); ++p)
    if (a.shard_box(shape, p) != b.shard_box(shape, p)) return false;
  return true;
}

}  // namespace tessel::compiler
