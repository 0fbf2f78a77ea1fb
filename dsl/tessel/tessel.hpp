// tessel: JAX's distributed-array model in C++. The one header users include.
//
//   #include <tessel/tessel.hpp>
//   namespace ts = tessel;
//   using ts::P;
#pragma once

#include <tessel/array.hpp>
#include <tessel/autodiff.hpp>
#include <tessel/checkpoint.hpp>
#include <tessel/conv.hpp>
#include <tessel/creation.hpp>
#include <tessel/custom.hpp>
#include <tessel/debug.hpp>
#include <tessel/device.hpp>
#include <tessel/device_put.hpp>
#include <tessel/dtype_info.hpp>
#include <tessel/distributed.hpp>
#include <tessel/fft.hpp>
#include <tessel/ffi.hpp>
#include <tessel/initializers.hpp>
#include <tessel/io.hpp>
#include <tessel/jacobian.hpp>
#include <tessel/jit.hpp>
#include <tessel/lax.hpp>
#include <tessel/linalg.hpp>
#include <tessel/nn.hpp>
#include <tessel/numpy.hpp>
#include <tessel/ops.hpp>
#include <tessel/profiler.hpp>
#include <tessel/random.hpp>
#include <tessel/remat.hpp>
#include <tessel/shard_map.hpp>
#include <tessel/sharding.hpp>
#include <tessel/sorting.hpp>
#include <tessel/special.hpp>
#include <tessel/tree.hpp>
#include <tessel/vmap.hpp>
#include <tessel/warnings.hpp>
