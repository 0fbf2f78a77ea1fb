#include <tessel/sharding.hpp>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "dsl/src/numpy_format.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::cat;

// ---------------------------------------------------------------- Mesh

namespace {

std::string names_tuple(const std::vector<std::string>& names) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << '\'' << names[i] << '\'';
  if (names.size() == 1) os << ',';
  os << ')';
  return os.str();
}

}  // namespace

namespace detail {
void check_devices_exist(const std::vector<Device>& devices) {
  const int n = device_count();
  for (auto& d : devices)
    if (d.id() < 0 || d.id() >= n)
      throw ShardingError(cat("device id ", d.id(), " does not exist; there are ", n, " devices (ids 0..", n - 1, ")"));
}
}  // namespace detail

namespace {

std::shared_ptr<const DeviceMesh> build_mesh(const std::vector<Device>& devices, const Shape& shape,
                                             const std::vector<std::string>& names) {
  if (shape.size() != names.size())
    throw ShardingError(cat("mesh shape ", shape_str(shape), " has ", shape.size(), " axes but ", names.size(),
                            " axis names were given: ", names_tuple(names)));
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < shape.size(); ++i) axes.push_back({names[i], shape[i]});
  detail::check_devices_exist(devices);
  return std::make_shared<const DeviceMesh>(detail::device_ids(devices), std::move(axes));
}

}  // namespace

Mesh::Mesh(const std::vector<Device>& devices, const Shape& shape, const std::vector<std::string>& axis_names)
    : impl_(build_mesh(devices, shape, axis_names)) {}

Mesh::Mesh(const std::vector<Device>& devices, const std::string& axis_name)
    : impl_(build_mesh(devices, {std::int64_t(devices.size())}, {axis_name})) {}

Shape Mesh::shape() const {
  Shape s;
  for (auto& a : impl_->axes()) s.push_back(a.size);
  return s;
}

std::vector<std::string> Mesh::axis_names() const {
  std::vector<std::string> n;
  for (auto& a : impl_->axes()) n.push_back(a.name);
  return n;
}

std::int64_t Mesh::size() const { return impl_->size(); }

std::vector<Device> Mesh::devices() const {
  std::vector<Device> d;
  for (int id : impl_->device_ids()) d.emplace_back(id);
  return d;
}

std::int64_t Mesh::axis_size(const std::string& name) const {
  int a = impl_->axis_index(name);
  if (a < 0) throw ShardingError(cat("axis '", name, "' is not in mesh ", str(), " with axis names ",
                                     names_tuple(axis_names())));
  return impl_->axes()[a].size;
}

std::string Mesh::str() const { return impl_->str(); }

bool Mesh::operator==(const Mesh& o) const { return impl_ == o.impl_ || *impl_ == *o.impl_; }

Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names) {
  // As jax.make_mesh: the first prod(shape) devices, in id order.
  std::vector<Device> all = devices();
  if (numel(shape) > std::int64_t(all.size()))
    throw ShardingError(cat("Number of devices ", all.size(), " must be >= the product of mesh_shape ",
                            shape_str(shape)));
  all.resize(std::size_t(std::max<std::int64_t>(numel(shape), 0)), Device(0));
  return make_mesh(shape, axis_names, all);
}

Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names, const std::vector<Device>& devs) {
  if (numel(shape) != std::int64_t(devs.size()))
    throw ShardingError(cat("Number of devices ", devs.size(), " must equal the product of mesh_shape ",
                            shape_str(shape)));
  return Mesh(devs, shape, axis_names);
}

// ---------------------------------------------------------------- PartitionSpec

PartitionSpec::PartitionSpec(Entry e0, Entry e1, Entry e2, Entry e3, Entry e4, Entry e5, Entry e6, Entry e7) {
  Entry all[] = {e0, e1, e2, e3, e4, e5, e6, e7};
  int n = 0;
  for (int i = 0; i < 8; ++i)
    if (!all[i].absent()) n = i + 1;
  for (int i = 0; i < n; ++i) {
    if (all[i].absent()) throw ShardingError("PartitionSpec: an entry in the middle was left empty");
    entries_.push_back(all[i]);
  }
}

PartitionSpec::PartitionSpec(std::initializer_list<const char*> tuple_axes) {
  entries_.push_back(Entry::tuple(std::vector<std::string>(tuple_axes.begin(), tuple_axes.end())));
}

PartitionSpec PartitionSpec::from_entries(std::vector<Entry> entries) {
  PartitionSpec p;
  for (auto& e : entries)
    if (e.absent()) e = Entry(None);
  p.entries_ = std::move(entries);
  return p;
}

std::string PartitionSpec::str() const {
  std::ostringstream os;
  os << "P(";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i) os << ", ";
    const Entry& e = entries_[i];
    if (e.is_none()) {
      os << "None";
    } else if (!e.is_tuple()) {
      os << '\'' << e.axes()[0] << '\'';
    } else {
      os << names_tuple(e.axes());
    }
  }
  os << ')';
  return os.str();
}

bool PartitionSpec::operator==(const PartitionSpec& o) const {
  size_t n = std::max(entries_.size(), o.entries_.size());
  for (size_t i = 0; i < n; ++i) {
    Entry a = i < entries_.size() ? entries_[i] : Entry(None);
    Entry b = i < o.entries_.size() ? o.entries_[i] : Entry(None);
    if (!(a == b)) return false;
  }
  return true;
}

// ---------------------------------------------------------------- NamedSharding

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec) : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  std::set<std::string> seen;
  for (auto& e : spec_.entries()) {
    for (auto& a : e.axes()) {
      if (mesh_.impl()->axis_index(a) < 0)
        throw ShardingError(cat("Resource axis: ", a, " of ", spec_.str(), " is not found in mesh: ",
                                names_tuple(mesh_.axis_names()), "."));
      if (!seen.insert(a).second)
        throw ShardingError(cat("A single NamedSharding spec specification can map every mesh axis to at most one "
                                "positional dimension, but ",
                                spec_.str(), " has duplicate entries for `", a, "`"));
    }
  }
}

std::string NamedSharding::str() const { return "NamedSharding(mesh=" + mesh_.str() + ", spec=" + spec_.str() + ")"; }

// ---------------------------------------------------------------- PositionalSharding

PositionalSharding::PositionalSharding(std::vector<Device> devices) : devices_(std::move(devices)) {
  if (devices_.empty()) throw ShardingError("PositionalSharding requires at least one device, got []");
  std::set<Device> uniq;
  for (auto& d : devices_)
    if (!uniq.insert(d).second)
      throw ShardingError(cat("PositionalSharding lists the same device twice: device id ", d.id()));
  detail::check_devices_exist(devices_);
  shape_ = {std::int64_t(devices_.size())};
  for (int i = 0; i < int(devices_.size()); ++i) sets_.push_back({i});
}

PositionalSharding::PositionalSharding(std::vector<Device> devices, Shape shape, std::vector<std::vector<int>> sets)
    : devices_(std::move(devices)), shape_(std::move(shape)), sets_(std::move(sets)) {}

PositionalSharding PositionalSharding::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  std::int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < -1)
      throw ShardingError(cat("PositionalSharding.reshape: bad shape ", shape_str(shape),
                              " (sizes must be >= 0, with at most one -1) for ", sets_.size(), " devices"));
    if (s[i] == -1) {
      if (infer >= 0) throw ShardingError("PositionalSharding.reshape: only one dimension can be -1");
      infer = int(i);
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      throw ShardingError(cat("PositionalSharding.reshape: shape ", shape_str(shape), " does not fit ", sets_.size(),
                              " devices"));
    }
  }
  if (infer >= 0 && known > 0 && std::int64_t(sets_.size()) % known == 0) s[infer] = std::int64_t(sets_.size()) / known;
  if (numel(s) != std::int64_t(sets_.size()) || (infer >= 0 && s[infer] == -1))
    throw ShardingError(cat("cannot reshape PositionalSharding of shape ", shape_str(shape_), " into shape ",
                            shape_str(shape)));
  return PositionalSharding(devices_, s, sets_);
}

PositionalSharding PositionalSharding::transpose(const std::vector<int>& perm_in) const {
  const int r = ndim();
  std::vector<int> perm = perm_in;
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int> check = perm;
  std::sort(check.begin(), check.end());
  for (int i = 0; i < r; ++i)
    if (int(check.size()) != r || check[i] != i)
      throw ShardingError(cat("PositionalSharding.transpose: axes ", shape_str(Shape(perm.begin(), perm.end())),
                              " are not a permutation of the sharding's ", r, " dims"));
  Shape ns(r);
  for (int i = 0; i < r; ++i) ns[i] = shape_[perm[i]];
  auto os = row_major_strides(shape_);
  std::vector<std::vector<int>> nsets(sets_.size());
  std::vector<std::int64_t> idx(r, 0);
  for (std::int64_t flat = 0; flat < std::int64_t(sets_.size()); ++flat) {
    std::int64_t src = 0;
    for (int i = 0; i < r; ++i) src += idx[i] * os[perm[i]];
    nsets[flat] = sets_[src];
    for (int k = r - 1; k >= 0; --k) {
      if (++idx[k] < ns[k]) break;
      idx[k] = 0;
    }
  }
  return PositionalSharding(devices_, ns, nsets);
}

PositionalSharding PositionalSharding::T() const { return transpose({}); }

PositionalSharding PositionalSharding::replicate(int axis, bool keepdims) const {
  const int r = ndim();
  if (axis < -r || axis >= r)
    throw ShardingError(cat("PositionalSharding.replicate: axis ", axis, " is out of bounds for a sharding of ", r,
                            " dims"));
  if (axis < 0) axis += r;
  Shape ns = shape_;
  ns[axis] = 1;
  auto os = row_major_strides(shape_);
  auto nstr = row_major_strides(ns);
  std::vector<std::vector<int>> nsets(numel(ns));
  for (std::int64_t flat = 0; flat < std::int64_t(sets_.size()); ++flat) {
    std::int64_t dst = 0;
    for (int i = 0; i < r; ++i) {
      std::int64_t c = (flat / os[i]) % shape_[i];
      if (i != axis) dst += c * nstr[i];
    }
    nsets[dst].insert(nsets[dst].end(), sets_[flat].begin(), sets_[flat].end());
  }
  for (auto& s : nsets) std::sort(s.begin(), s.end());
  if (!keepdims) ns.erase(ns.begin() + axis);
  return PositionalSharding(devices_, ns, nsets);
}

PositionalSharding PositionalSharding::replicate() const {
  PositionalSharding s = *this;
  for (int a = 0; a < ndim(); ++a) s = s.replicate(a, true);
  return s;
}

std::vector<int> PositionalSharding::device_ids_at(std::int64_t flat) const {
  const auto n = std::int64_t(sets_.size());
  if (flat < 0 || flat >= n)
    throw ValueError("PositionalSharding.device_ids_at: index " + std::to_string(flat) +
                     " is out of bounds for a PositionalSharding of shape " + shape_str(shape_) + " with " +
                     std::to_string(n) + " positions (valid: 0 .. " + std::to_string(n - 1) + ")");
  std::vector<int> ids;
  for (int p : sets_[size_t(flat)]) ids.push_back(devices_[p].id());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::string PositionalSharding::str() const {
  std::vector<std::string> words;
  for (std::int64_t i = 0; i < std::int64_t(sets_.size()); ++i) {
    std::ostringstream w;
    w << "{CPU ";
    auto ids = device_ids_at(i);
    for (size_t k = 0; k < ids.size(); ++k) w << (k ? ", " : "") << ids[k];
    w << '}';
    words.push_back(w.str());
  }
  detail::Array2StringOptions opt;
  opt.prefix = "PositionalSharding(";
  opt.suffix = ")";
  opt.linewidth = 100;
  return "PositionalSharding(" + detail::layout_array(shape_, words, opt) + ", shape=" + shape_str(shape_) + ")";
}

// ---------------------------------------------------------------- SingleDevice, Sharding

std::string SingleDeviceSharding::str() const { return "SingleDeviceSharding(device=" + to_string(device_) + ")"; }

const NamedSharding& Sharding::as_named() const {
  if (auto* p = std::get_if<NamedSharding>(&v_)) return *p;
  throw ShardingError(cat("expected a NamedSharding, got ", str()));
}
const PositionalSharding& Sharding::as_positional() const {
  if (auto* p = std::get_if<PositionalSharding>(&v_)) return *p;
  throw ShardingError(cat("expected a PositionalSharding, got ", str()));
}
const SingleDeviceSharding& Sharding::as_single_device() const {
  if (auto* p = std::get_if<SingleDeviceSharding>(&v_)) return *p;
  throw ShardingError(cat("expected a SingleDeviceSharding, got ", str()));
}

std::string Sharding::str() const {
  return std::visit([](const auto& s) { return s.str(); }, v_);
}

std::string to_string(const Index& idx) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i].start << ':' << idx[i].stop;
  if (idx.size() == 1) os << ',';
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Mesh& m) { return os << m.str(); }
std::ostream& operator<<(std::ostream& os, const PartitionSpec& p) { return os << p.str(); }
std::ostream& operator<<(std::ostream& os, const NamedSharding& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const PositionalSharding& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const SingleDeviceSharding& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const Sharding& s) { return os << s.str(); }
std::ostream& operator<<(std::ostream& os, const Index& idx) { return os << to_string(idx); }

// ---------------------------------------------------------------- the axis form

namespace detail {

std::vector<int> device_ids(const std::vector<Device>& devices) {
  std::vector<int> ids;
  for (auto& d : devices) ids.push_back(d.id());
  return ids;
}

MeshRef flat_mesh(const std::vector<Device>& devices) {
  check_devices_exist(devices);
  std::vector<MeshAxis> axes;
  if (devices.size() > 1) axes.push_back({"_flat", std::int64_t(devices.size())});
  return std::make_shared<const DeviceMesh>(device_ids(devices), axes);
}

namespace {

AxisSharding named_axis(const NamedSharding& s, int rank) {
  const auto& spec = s.spec();
  if (spec.size() > rank)
    throw ShardingError(cat("Sharding ", s.str(), " is only valid for values of rank at least ", spec.size(),
                            ", but was applied to a value of rank ", rank));
  AxisSharding a = replicated(s.mesh().impl(), rank);
  for (int d = 0; d < spec.size(); ++d)
    for (auto& name : spec[d].axes()) a.dims[d].push_back(s.mesh().impl()->axis_index(name));
  return a;
}

AxisSharding positional_axis(const PositionalSharding& s, int rank) {
  bool replicated_all = numel(s.shape()) == 1;
  if (replicated_all) return replicated(flat_mesh(s.devices()), rank);
  if (s.ndim() != rank)
    throw ShardingError(cat("Sharding ", s.str(), " is only valid for values of rank ", s.ndim(),
                            ", but was applied to a value of rank ", rank));
  return sharding_from_tiles(device_ids(s.devices()), s.shape(), s.position_sets());
}

}  // namespace

AxisSharding axis_sharding_for_rank(const Sharding& s, int rank) {
  if (s.is_named()) return named_axis(s.as_named(), rank);
  if (s.is_positional()) return positional_axis(s.as_positional(), rank);
  return replicated(flat_mesh({s.as_single_device().device()}), rank);
}

AxisSharding axis_sharding(const Sharding& s, const Shape& global) {
  for (auto d : global)
    if (d < 0) throw ShapeError(cat("negative dimensions are not allowed: shape ", shape_str(global), " for ", s.str()));
  AxisSharding a = axis_sharding_for_rank(s, int(global.size()));
  if (s.is_positional() && !s.as_positional().is_fully_replicated()) {
    const Shape& ps = s.as_positional().shape();
    for (size_t d = 0; d < global.size(); ++d)
      if (global[d] % ps[d] != 0)
        throw ShardingError(cat("One of device_put args was given the sharding of ", s.str(),
                                ", which implies that the global size of its dimension ", d,
                                " should be divisible by ", ps[d], ", but it is equal to ", global[d],
                                " (full shape: ", shape_str(global), ")"));
  }
  return a;
}

Shape sharding_shard_shape(const Sharding& s, const Shape& global) {
  // Uneven dimensions: the largest shard (ceil division), which is also the
  // padded shape every device stores.
  return axis_sharding(s, global).tile_shape(global);
}

std::map<Device, Index> sharding_indices(const Sharding& s, const Shape& global) {
  AxisSharding a = axis_sharding(s, global);
  std::map<Device, Index> out;
  for (std::int64_t p = 0; p < a.mesh->size(); ++p) {
    Box b = a.shard_box(global, p);
    Index idx;
    for (size_t d = 0; d < global.size(); ++d) idx.push_back({b.start[d], b.stop[d]});
    out.emplace(Device(a.mesh->device_ids()[p]), std::move(idx));
  }
  return out;
}

bool sharding_replicated(const Sharding& s) {
  if (s.is_positional()) return numel(s.as_positional().shape()) == 1;
  if (s.is_single_device()) return true;
  return axis_sharding_for_rank(s, s.as_named().spec().size()).is_fully_replicated();
}

std::vector<Device> sharding_devices(const Sharding& s) {
  if (s.is_named()) return s.as_named().mesh().devices();
  if (s.is_positional()) return s.as_positional().devices();
  return {s.as_single_device().device()};
}

bool sharding_equivalent(const Sharding& a, const Sharding& b, int ndim) {
  AxisSharding x = axis_sharding_for_rank(a, ndim), y = axis_sharding_for_rank(b, ndim);
  if (sharding_devices(a).size() != sharding_devices(b).size()) return false;
  Shape probe(ndim);
  for (int d = 0; d < ndim; ++d) probe[d] = 2 * x.num_tiles(d) * y.num_tiles(d);
  return sharding_indices(a, probe) == sharding_indices(b, probe);
}

void add_to_key(Key& k, const Sharding& s) {
  if (s.is_named()) {
    const NamedSharding& n = s.as_named();
    k.tag('N');
    tessel::add_to_key(k, *n.mesh().impl());
    k.pod(std::uint64_t(n.spec().size()));
    for (auto& e : n.spec().entries()) {
      k.pod(e.is_tuple()).pod(std::uint64_t(e.axes().size()));
      for (auto& a : e.axes()) k.str(a);
    }
  } else if (s.is_positional()) {
    const PositionalSharding& p = s.as_positional();
    k.tag('P').seq(device_ids(p.devices())).seq(p.shape()).pod(std::uint64_t(p.position_sets().size()));
    for (auto& set : p.position_sets()) k.seq(set);
  } else {
    k.tag('D').pod(s.as_single_device().device().id());
  }
}

}  // namespace detail
}  // namespace tessel
