// The error types. User errors (bad input) derive from tessel::Error and say
// what was wrong with shapes, dtypes, shardings and device ids; internal errors
// (a bug in tessel) are InternalError, a different type on purpose.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessel {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes that do not fit an operation (rank, sizes, broadcasting).
class ShapeError : public Error {
 public:
  using Error::Error;
};

// Dtypes that do not fit an operation, or a value of the wrong C++ type.
class TypeError : public Error {
 public:
  using Error::Error;
};

// Bad shardings, meshes and partition specs.
class ShardingError : public Error {
 public:
  using Error::Error;
};

// Committed arguments on different device sets or device orders.
class DeviceMismatchError : public Error {
 public:
  using Error::Error;
};

// A traced value used where a concrete one is needed.
class ConcretizationError : public Error {
 public:
  using Error::Error;
};

// Memory that cannot be had (JAX's RESOURCE_EXHAUSTED): raised before any
// device allocates, never std::bad_alloc or an OOM kill.
class ResourceExhaustedError : public Error {
 public:
  using Error::Error;
};

// A value out of range that is not a shape, dtype or sharding (JAX's
// ValueError): a bad environment variable, an empty reduction without an
// identity, a NaN bound, a setting changed too late.
class ValueError : public Error {
 public:
  using Error::Error;
};

// An axis name that no enclosing shard_map binds (JAX's NameError:
// "unbound axis name: x").
class NameError : public Error {
 public:
  using Error::Error;
};

// A combination tessel does not support yet, said plainly rather than
// computed wrongly (JAX's NotImplementedError).
class NotImplementedError : public Error {
 public:
  using Error::Error;
};

// Several processes that do not agree (jax.distributed): a peer process
// that failed, exited or did not arrive within the timeout, or that reached
// a collective with a different program; reading data another process holds.
class DistributedError : public Error {
 public:
  using Error::Error;
};

// A bug in tessel, not in the user's program.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
// Builds a message from streamable pieces: cat("rank ", 3, " > ", 2).
template <class... Ts>
std::string cat(Ts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Ts>(parts));
  return os.str();
}
}  // namespace detail

#define TESSEL_CHECK_INTERNAL(cond, ...)                                          \
  do {                                                                            \
    if (!(cond))                                                                  \
      throw ::tessel::InternalError(::tessel::detail::cat(                        \
          __FILE__, ":", __LINE__, ": internal check failed: " #cond ". ", ##__VA_ARGS__)); \
  } while (0)

}  // namespace tessel
