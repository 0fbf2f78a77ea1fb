#include "tracer/sharding.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <numeric>
#include <set>
#include <sstream>

#include "tessel/core/errors.hpp"

namespace tessel {

using detail::cat;

DeviceMesh::DeviceMesh(std::vector<int> device_ids, std::vector<MeshAxis> axes)
    : device_ids_(std::move(device_ids)), axes_(std::move(axes)) {
  std::int64_t prod = 1;
  std::set<std::string> names;
  for (auto& a : axes_) {
    if (a.size < 1) throw ShardingError(cat("mesh axis '", a.name, "' has size ", a.size, "; sizes must be >= 1"));
    if (!names.insert(a.name).second)
      throw ShardingError(cat("mesh axis name '", a.name, "' is used twice; axis names must be unique"));
    prod *= a.size;
  }
  if (prod != std::int64_t(device_ids_.size())) {
    std::ostringstream shape;
    for (size_t i = 0; i < axes_.size(); ++i) shape << (i ? ", " : "") << axes_[i].size;
    throw ShardingError(cat("Number of devices ", device_ids_.size(),
                            " must equal the product of mesh_shape (", shape.str(),
                            axes_.size() == 1 ? ",)" : ")"));
  }
  std::set<int> ids;
  for (int id : device_ids_)
    if (!ids.insert(id).second) throw ShardingError(cat("a mesh lists the same device twice: device id ", id));
  strides_.assign(axes_.size(), 1);
  for (int i = int(axes_.size()) - 2; i >= 0; --i) strides_[i] = strides_[i + 1] * axes_[i + 1].size;
}

int DeviceMesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return int(i);
  return -1;
}

std::int64_t DeviceMesh::coord(std::int64_t pos, int axis) const {
  return (pos / strides_[axis]) % axes_[axis].size;
}

std::int64_t DeviceMesh::position_of(int device_id) const {
  for (size_t i = 0; i < device_ids_.size(); ++i)
    if (device_ids_[i] == device_id) return std::int64_t(i);
  return -1;
}

std::string DeviceMesh::str() const {
  std::ostringstream os;
  os << "Mesh(";
  for (size_t i = 0; i < axes_.size(); ++i) os << (i ? ", " : "") << '\'' << axes_[i].name << "': " << axes_[i].size;
  os << ')';
  return os.str();
}

std::int64_t AxisSharding::num_tiles(int d) const {
  std::int64_t n = 1;
  for (int a : dims[d]) n *= mesh->axes()[a].size;
  return n;
}

Shape AxisSharding::tile_shape(const Shape& global) const {
  TESSEL_CHECK_INTERNAL(global.size() == dims.size(), "rank ", global.size(), " vs sharding rank ", dims.size());
  Shape t(global.size());
  for (size_t d = 0; d < t.size(); ++d) t[d] = ceil_div(global[d], num_tiles(int(d)));
  return t;
}

std::vector<std::int64_t> AxisSharding::tile_index(std::int64_t pos) const {
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (size_t d = 0; d < dims.size(); ++d)
    for (int a : dims[d]) idx[d] = idx[d] * mesh->axes()[a].size + mesh->coord(pos, a);
  return idx;
}

Box AxisSharding::shard_box(const Shape& global, std::int64_t pos) const {
  Shape tile = tile_shape(global);
  auto idx = tile_index(pos);
  Box b{std::vector<std::int64_t>(global.size()), std::vector<std::int64_t>(global.size())};
  for (size_t d = 0; d < global.size(); ++d) {
    b.start[d] = std::min(idx[d] * tile[d], global[d]);
    b.stop[d] = std::min(b.start[d] + tile[d], global[d]);
  }
  return b;
}

bool AxisSharding::is_fully_replicated() const {
  if (!unreduced.empty()) return false;
  for (auto& d : dims)
    for (int a : d)
      if (mesh->axes()[a].size > 1) return false;
  return true;
}

std::vector<int> AxisSharding::replica_axes() const {
  std::vector<bool> used(mesh->num_axes(), false);
  for (auto& d : dims)
    for (int a : d) used[a] = true;
  for (int a : unreduced) used[a] = true;
  std::vector<int> r;
  for (int a = 0; a < mesh->num_axes(); ++a)
    if (!used[a]) r.push_back(a);
  return r;
}

std::string AxisSharding::spec_str() const {
  std::ostringstream os;
  os << "P(";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d) os << ", ";
    if (dims[d].empty()) {
      os << "None";
    } else if (dims[d].size() == 1) {
      os << '\'' << mesh->axes()[dims[d][0]].name << '\'';
    } else {
      os << '(';
      for (size_t i = 0; i < dims[d].size(); ++i) os << (i ? ", " : "") << '\'' << mesh->axes()[dims[d][i]].name << '\'';
      os << ')';
    }
  }
  os << ')';
  if (!unreduced.empty()) {
    os << "{unreduced: ";
    for (size_t i = 0; i < unreduced.size(); ++i) os << (i ? ", " : "") << '\'' << mesh->axes()[unreduced[i]].name << '\'';
    os << '}';
  }
  return os.str();
}

bool AxisSharding::operator==(const AxisSharding& o) const {
  auto sorted = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  return (mesh == o.mesh || (mesh && o.mesh && *mesh == *o.mesh)) && dims == o.dims &&
         sorted(unreduced) == sorted(o.unreduced);
}

std::vector<std::vector<std::int64_t>> collective_groups(const DeviceMesh& mesh, const std::vector<int>& axes) {
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> groups;
  for (std::int64_t p = 0; p < mesh.size(); ++p) {
    std::vector<std::int64_t> fixed;
    for (int a = 0; a < mesh.num_axes(); ++a)
      if (std::find(axes.begin(), axes.end(), a) == axes.end()) fixed.push_back(mesh.coord(p, a));
    groups[fixed].push_back(p);
  }
  // Order members by the coordinates along `axes`, in the order given.
  std::vector<std::vector<std::int64_t>> out;
  for (auto& [k, members] : groups) {
    std::sort(members.begin(), members.end(), [&](std::int64_t x, std::int64_t y) {
      for (int a : axes)
        if (mesh.coord(x, a) != mesh.coord(y, a)) return mesh.coord(x, a) < mesh.coord(y, a);
      return false;
    });
    out.push_back(members);
  }
  return out;
}

CommonMesh unify_meshes(const std::vector<MeshRef>& meshes) {
  TESSEL_CHECK_INTERNAL(!meshes.empty());
  CommonMesh cm;
  const auto& ids = meshes[0]->device_ids();
  const std::int64_t n = std::int64_t(ids.size());
  // Cut points: the row-major strides of every axis, and n.
  std::set<std::int64_t> cuts{1, n};
  for (auto& m : meshes) {
    if (m->device_ids() != ids) throw ShardingError("meshes over different device lists cannot be combined");
    std::int64_t stride = 1;
    for (int a = m->num_axes() - 1; a >= 0; --a) {
      cuts.insert(stride);
      stride *= m->axes()[a].size;
    }
  }
  std::vector<std::int64_t> c(cuts.begin(), cuts.end());
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] % c[i - 1] != 0) throw ShardingError("mesh axes of these shardings do not nest into one mesh");
  // Atoms from major to minor: between consecutive cuts.
  std::vector<std::pair<std::int64_t, std::int64_t>> atoms;  // (stride, size)
  for (int i = int(c.size()) - 1; i >= 1; --i) atoms.push_back({c[i - 1], c[i] / c[i - 1]});
  // Names: an axis of the first mesh that owns the atom, suffixed when split.
  std::vector<MeshAxis> axes(atoms.size());
  for (auto& m : meshes) {
    std::vector<std::vector<int>> of(m->num_axes());
    std::int64_t stride = 1;
    for (int a = m->num_axes() - 1; a >= 0; --a) {
      std::int64_t lo = stride, hi = stride * m->axes()[a].size;
      for (size_t k = 0; k < atoms.size(); ++k)
        if (atoms[k].first >= lo && atoms[k].first < hi) of[a].push_back(int(k));
      stride = hi;
      for (size_t j = 0; j < of[a].size(); ++j) {
        auto& ax = axes[of[a][j]];
        if (ax.name.empty())
          ax = {of[a].size() == 1 ? m->axes()[a].name : m->axes()[a].name + ":" + std::to_string(j),
                atoms[of[a][j]].second};
      }
    }
    cm.sources.push_back(m);
    cm.atoms_of.push_back(of);
  }
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k].name.empty()) axes[k] = {"_atom" + std::to_string(k), atoms[k].second};
  // Keep names unique.
  std::set<std::string> seen;
  for (auto& a : axes)
    while (!seen.insert(a.name).second) a.name += "'";
  cm.mesh = meshes.size() == 1 ? meshes[0] : std::make_shared<const DeviceMesh>(ids, axes);
  if (meshes.size() == 1) {
    cm.atoms_of[0].clear();
    for (int a = 0; a < meshes[0]->num_axes(); ++a) cm.atoms_of[0].push_back({a});
  }
  return cm;
}

AxisSharding CommonMesh::rewrite(const AxisSharding& s) const {
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!(sources[i] == s.mesh || *sources[i] == *s.mesh)) continue;
    AxisSharding out = replicated(mesh, s.rank());
    for (int d = 0; d < s.rank(); ++d)
      for (int a : s.dims[d]) out.dims[d].insert(out.dims[d].end(), atoms_of[i][a].begin(), atoms_of[i][a].end());
    for (int a : s.unreduced) out.unreduced.insert(out.unreduced.end(), atoms_of[i][a].begin(), atoms_of[i][a].end());
    return out;
  }
  throw InternalError("rewrite: the sharding's mesh is not one of the unified meshes");
}

std::optional<AxisSharding> CommonMesh::express_on(const AxisSharding& s, const MeshRef& target) const {
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!(sources[i] == target || *sources[i] == *target)) continue;
    AxisSharding out = replicated(target, s.rank());
    for (int d = 0; d < s.rank(); ++d) {
      size_t k = 0;
      while (k < s.dims[d].size()) {
        int found = -1;
        for (int a = 0; a < target->num_axes() && found < 0; ++a) {
          const auto& at = atoms_of[i][a];
          if (!at.empty() && k + at.size() <= s.dims[d].size() &&
              std::equal(at.begin(), at.end(), s.dims[d].begin() + k))
            found = a;
        }
        if (found < 0) return std::nullopt;
        out.dims[d].push_back(found);
        k += atoms_of[i][found].size();
      }
    }
    if (!s.unreduced.empty()) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

AxisSharding replicated(MeshRef mesh, int rank) {
  return AxisSharding{std::move(mesh), std::vector<std::vector<int>>(rank), {}};
}

namespace {

// One factor of a transposed iota: `size` consecutive values with `stride`.
struct Superdim {
  std::int64_t size, stride;
};

// Writes `assignment` as arange(n).reshape(...).transpose(...).flatten():
// returns its superdims from the minor-most (fastest varying in the
// assignment) outwards, or nothing when it is not of that form.
std::vector<Superdim> unflatten_superdims(const std::vector<std::int64_t>& assignment) {
  std::vector<Superdim> dims;
  std::vector<std::int64_t> flat = assignment;
  if (flat.empty() || flat[0] != 0) return {};
  while (flat.size() > 1) {
    std::int64_t stride = flat[1];
    size_t i = 0;
    while (i < flat.size() && flat[i] == std::int64_t(i) * stride) ++i;
    if (i < 2 || flat.size() % i != 0) return {};
    dims.push_back({std::int64_t(i), stride});
    std::vector<std::int64_t> next;
    for (size_t j = 0; j < flat.size(); j += i) next.push_back(flat[j]);
    flat = std::move(next);
  }
  // Verify: rebuild the assignment from the superdims.
  std::vector<std::int64_t> rebuilt(assignment.size(), 0);
  for (size_t k = 0; k < rebuilt.size(); ++k) {
    std::int64_t rem = std::int64_t(k), v = 0;
    for (auto& sd : dims) {
      v += (rem % sd.size) * sd.stride;
      rem /= sd.size;
    }
    rebuilt[k] = v;
  }
  if (rebuilt != assignment) return {};
  return dims;
}

}  // namespace

AxisSharding sharding_from_tiles(const std::vector<int>& device_ids, const Shape& grid,
                                 const std::vector<std::vector<int>>& tile_positions) {
  const std::int64_t n = std::int64_t(device_ids.size());
  const std::int64_t tiles = numel(grid);
  auto fail = [&](const std::string& why) {
    return ShardingError("cannot express the tile assignment over " + std::to_string(n) +
                         " devices with tile grid " + shape_str(grid) + " as a mesh sharding: " + why);
  };
  if (std::int64_t(tile_positions.size()) != tiles) throw fail("wrong number of tiles");
  const std::int64_t replicas = tile_positions.empty() ? 0 : std::int64_t(tile_positions[0].size());
  std::vector<std::int64_t> assignment;
  for (auto& t : tile_positions) {
    if (std::int64_t(t.size()) != replicas) throw fail("tiles are held by different numbers of devices");
    std::vector<int> s = t;
    std::sort(s.begin(), s.end());
    assignment.insert(assignment.end(), s.begin(), s.end());
  }
  if (std::int64_t(assignment.size()) != n) throw fail("every device must hold exactly one tile");
  {
    std::vector<std::int64_t> check = assignment;
    std::sort(check.begin(), check.end());
    for (std::int64_t i = 0; i < n; ++i)
      if (check[i] != i) throw fail("every device must hold exactly one tile");
  }
  std::vector<Superdim> sds = unflatten_superdims(assignment);
  if (n > 1 && sds.empty()) throw fail("the device order is not a transposed iota");

  // The index space of the assignment is (grid..., replicas), row-major; walk
  // it from the minor end, cutting superdims at the boundaries of its dims.
  Shape space = grid;
  space.push_back(replicas);
  std::vector<std::vector<Superdim>> pieces(space.size());  // per space dim, minor to major
  size_t next = 0;
  Superdim cur{1, 0};
  for (int d = int(space.size()) - 1; d >= 0; --d) {
    std::int64_t need = space[d];
    while (need > 1) {
      if (cur.size == 1) {
        if (next >= sds.size()) throw fail("internal factorisation mismatch");
        cur = sds[next++];
      }
      if (cur.size <= need) {
        if (need % cur.size != 0) throw fail("tile counts do not factor the device order");
        pieces[d].push_back(cur);
        need /= cur.size;
        cur = {1, 0};
      } else {
        if (cur.size % need != 0) throw fail("tile counts do not factor the device order");
        pieces[d].push_back({need, cur.stride});
        cur = {cur.size / need, cur.stride * need};
        need = 1;
      }
    }
  }
  // Mesh axes: every piece, ordered by stride, largest (major) first.
  struct AxisOf {
    Superdim sd;
    int space_dim;
  };
  std::vector<AxisOf> all;
  for (size_t d = 0; d < pieces.size(); ++d)
    for (auto& p : pieces[d]) all.push_back({p, int(d)});
  std::sort(all.begin(), all.end(), [](const AxisOf& a, const AxisOf& b) { return a.sd.stride > b.sd.stride; });
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < all.size(); ++i) axes.push_back({"_" + std::to_string(i), all[i].sd.size});
  auto mesh = std::make_shared<const DeviceMesh>(device_ids, axes);
  AxisSharding out = replicated(mesh, int(grid.size()));
  // pieces[d] runs minor to major; the sharding lists axes major to minor.
  for (size_t d = 0; d < grid.size(); ++d)
    for (auto it = pieces[d].rbegin(); it != pieces[d].rend(); ++it)
      for (size_t i = 0; i < all.size(); ++i)
        if (all[i].sd.stride == it->stride && all[i].space_dim == int(d)) out.dims[d].push_back(int(i));
  return out;
}

void add_to_key(Key& k, const DeviceMesh& m) {
  k.tag('M').seq(m.device_ids()).pod(std::uint64_t(m.axes().size()));
  for (auto& a : m.axes()) k.str(a.name).pod(a.size);
}

void add_to_key(Key& k, const AxisSharding& s) {
  k.tag('S');
  if (s.mesh) add_to_key(k, *s.mesh);
  else k.tag('-');
  k.pod(std::uint64_t(s.dims.size()));
  for (auto& d : s.dims) k.seq(d);
  k.seq(s.unreduced);
}

}  // namespace tessel
