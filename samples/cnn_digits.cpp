// A small CNN on real data: scikit-learn's 8x8 handwritten digits (1797
// images, the file Debian's python3-sklearn ships), trained data parallel
// over the devices (the batch split, the weights replicated: the gradients'
// all-reduce is the only communication), or with every image's rows split
// over the devices (--split rows: the convolutions exchange border rows).
// Two convolutions with ReLU and max pooling, a dense layer, softmax
// cross-entropy, SGD with momentum, under jit(value_and_grad). The program
// is the same; only the inputs' sharding changes. The same network in
// PyTorch: tools/cnn_digits_torch.py.
//
//   build/samples/cnn_digits [--epochs N] [--split batch|rows] [--data PATH]
#include <tessel/tessel.hpp>

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace ts = tessel;
namespace lax = tessel::lax;
using ts::Array;
using ts::P;

namespace {

const char* kDigits = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// The rows of digits.csv.gz: 64 pixels (0..16), then the label.
void load(const std::string& path, std::vector<float>& pixels, std::vector<std::int32_t>& labels) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (Debian's python3-sklearn ships it)");
  char line[1024];
  while (gzgets(f, line, sizeof line)) {
    std::stringstream row(line);
    std::string cell;
    std::vector<float> v;
    while (std::getline(row, cell, ',')) v.push_back(std::stof(cell));
    if (v.size() != 65) continue;
    for (int i = 0; i < 64; ++i) pixels.push_back(v[std::size_t(i)] / 16.0f);
    labels.push_back(std::int32_t(v[64]));
  }
  gzclose(f);
}

struct Model {
  Array c1, b1, c2, b2, w3, b3;  // HWIO kernels, biases, the dense layer
};

Model init(Array key) {
  auto k = ts::random::split(key, 3);
  auto he = [](const Array& kk, ts::Shape s, double fan_in) { return ts::random::normal(kk, s) * float(std::sqrt(2.0 / fan_in)); };
  return {he(k.index({0}), {3, 3, 1, 16}, 9), ts::zeros({16}), he(k.index({1}), {3, 3, 16, 32}, 144), ts::zeros({32}),
          he(k.index({2}), {2 * 2 * 32, 10}, 128), ts::zeros({10})};
}

const std::vector<std::string> kNHWC{"NHWC", "HWIO", "NHWC"};

Array logits(const std::vector<Array>& m, const Array& x) {  // x: (N, 8, 8, 1)
  auto block = [](const Array& h, const Array& k, const Array& b) {
    Array y = ts::nn::relu(lax::conv_general_dilated(h, k, {1, 1}, "SAME", {.dimension_numbers = kNHWC}) + b);
    return lax::reduce_window(y, -INFINITY, "max", {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  };
  Array h = block(block(x, m[0], m[1]), m[2], m[3]);  // (N, 2, 2, 32)
  return ts::dot(h.reshape({h.shape()[0], 2 * 2 * 32}), m[4]) + m[5];
}

Array loss(const std::vector<Array>& m, const Array& x, const Array& y) {
  return -ts::mean(ts::sum(ts::nn::log_softmax(logits(m, x)) * ts::nn::one_hot(y, 10), -1));
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 40;
  std::string path = kDigits, split_by = "batch";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--epochs" && i + 1 < argc) epochs = std::stoi(argv[++i]);
    else if (a == "--data" && i + 1 < argc) path = argv[++i];
    else if (a == "--split" && i + 1 < argc && (std::string(argv[i + 1]) == "batch" || std::string(argv[i + 1]) == "rows"))
      split_by = argv[++i];
    else {
      std::cerr << "usage: cnn_digits [--epochs N] [--split batch|rows] [--data PATH]\n";
      return 2;
    }
  }
  std::vector<float> pixels;
  std::vector<std::int32_t> labels;
  load(path, pixels, labels);
  const std::int64_t n = std::int64_t(labels.size()), train_n = 1440, batch = 240;  // 6 batches an epoch
  std::cout << "digits: " << n << " images of 8x8 from " << path << "; " << train_n << " to train, " << n - train_n
            << " to test\n";
  const Array images = ts::array(pixels).reshape({n, 8, 8, 1}), classes = ts::array(labels);
  const Array x_train = images.index({ts::slice(0, train_n)}), y_train = classes.index({ts::slice(0, train_n)});
  const Array x_test = images.index({ts::slice(train_n, n)}), y_test = classes.index({ts::slice(train_n, n)});

  // Every batch split over the devices (by images, or by rows), the weights replicated.
  auto mesh = ts::make_mesh({ts::device_count()}, {"d"});
  const ts::NamedSharding split(mesh, split_by == "rows" ? P(ts::None, "d") : P("d")), replicated(mesh, P());
  const ts::NamedSharding labels_split(mesh, split_by == "rows" ? P() : P("d"));
  Model m0 = init(ts::random::key(0));
  std::vector<Array> params{m0.c1, m0.b1, m0.c2, m0.b2, m0.w3, m0.b3}, velocity;
  for (auto& p : params) p = ts::device_put(p, replicated), velocity.push_back(ts::zeros_like(p));
  auto step = ts::jit([](std::vector<Array> p, std::vector<Array> v, Array x, Array y) {
    auto [value, g] = ts::value_and_grad(loss)(p, x, y);
    for (std::size_t i = 0; i < p.size(); ++i) {
      v[i] = v[i] * 0.9f + g[i];
      p[i] = p[i] - v[i] * 0.05f;
    }
    return std::make_tuple(p, v, value);
  });
  auto accuracy = ts::jit([](std::vector<Array> p, Array x, Array y) {
    return ts::mean((ts::argmax(logits(p, x), -1) == y).astype(ts::float32));
  });
  for (int e = 0; e < epochs; ++e) {
    double total = 0;
    for (std::int64_t b = 0; b < train_n / batch; ++b) {
      const Array xb = ts::device_put(x_train.index({ts::slice(b * batch, (b + 1) * batch)}), split);
      const Array yb = ts::device_put(y_train.index({ts::slice(b * batch, (b + 1) * batch)}), labels_split);
      auto [p, v, value] = step(params, velocity, xb, yb);
      params = p, velocity = v;
      total += value.item<float>();
    }
    if (e % 10 == 9 || e + 1 == epochs)
      std::printf("epoch %3d: loss %.4f, test accuracy %.4f\n", e + 1, total / double(train_n / batch),
                  accuracy(params, x_test, y_test).item<float>());
  }
  const float acc = accuracy(params, x_test, y_test).item<float>();
  std::printf("test accuracy after %d epochs on %d devices (%s split): %.4f\n", epochs, ts::device_count(),
              split_by == "rows" ? "rows" : "batch", acc);
  return acc >= 0.9f ? 0 : 1;
}
