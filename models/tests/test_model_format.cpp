// weights.msgpack / model.json round trips and strict decoding.
#include <gtest/gtest.h>

#include <filesystem>

#include "diode/error.h"
#include "diode/io.h"
#include "mlp_infer.h"
#include "model_format.h"
#include "model_test_util.h"

using namespace diode;
using namespace diode::models;
using diode::models::test::random_model;
using diode::models::test::temp_dir;

TEST(ModelFormat, WeightsRoundTripBitExact) {
  const ModelDir m = random_model(16, 2, 1);
  const std::string bytes = encode_weights(m.weights);
  EXPECT_EQ(decode_weights(bytes, m.arch), m.weights);
}

TEST(ModelFormat, DirectoryRoundTrip) {
  ModelDir m = random_model(8, 1, 2);
  m.metrics = {{"rmse_log", 0.1}};
  const std::string dir = temp_dir("dir");
  save_model_dir(dir, m);
  const ModelDir back = load_model_dir(dir);
  EXPECT_EQ(back.weights, m.weights);
  EXPECT_EQ(back.arch.hidden, 8);
  EXPECT_EQ(back.hardware_key, m.hardware_key);
  EXPECT_EQ(back.metrics, m.metrics);
  EXPECT_EQ(model_json(back), model_json(m));
  std::filesystem::remove_all(dir);
}

TEST(ModelFormat, RejectsMismatchedOrCorruptWeights) {
  const ModelDir m = random_model(8, 1, 3);
  const std::string bytes = encode_weights(m.weights);
  Architecture other = m.arch;
  other.hidden = 9;
  EXPECT_THROW(decode_weights(bytes, other), WireError);
  other = m.arch;
  other.blocks = 2;
  EXPECT_THROW(decode_weights(bytes, other), WireError);
  EXPECT_THROW(decode_weights(bytes.substr(0, bytes.size() - 3), m.arch), WireError);
  EXPECT_THROW(decode_weights(bytes + "x", m.arch), WireError);
  std::vector<NamedTensor> w = m.weights;
  w[0].data.pop_back();  // byte count no longer prod(shape) * 4
  EXPECT_THROW(decode_weights(encode_weights(w), m.arch), WireError);
  w = m.weights;
  std::swap(w[0], w[1]);
  EXPECT_THROW(decode_weights(encode_weights(w), m.arch), WireError);
}

TEST(ModelFormat, RejectsBadModelJson) {
  const ModelDir m = random_model(8, 1, 4);
  const std::string dir = temp_dir("bad");
  save_model_dir(dir, m);
  auto j = model_json(m);
  j["architecture"]["activation"] = "gelu";
  io::write_file_atomic(dir + "/model.json", j.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  j = model_json(m);
  j["architecture"]["input"] = 3;
  io::write_file_atomic(dir + "/model.json", j.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  io::write_file_atomic(dir + "/model.json", "{not json");
  EXPECT_THROW(load_model_dir(dir), WireError);
  std::filesystem::remove_all(dir);
}

TEST(MlpInfer, MatchesAHandComputedForward) {
  // One input feature row through a model whose layers are small and known.
  ModelDir m = random_model(2, 1, 5);
  for (auto& t : m.weights) std::fill(t.data.begin(), t.data.end(), 0.0f);
  m.weights[0].data[0] = 1.0f;             // input.weight[0][0]: h0 = x0
  m.weights[4].data[0] = 2.0f;             // blocks.0.fc2.weight[0][0] (fc1 output is relu(0)=0 -> bias)
  m.weights[3].data[0] = 1.0f;             // blocks.0.fc1.bias[0] = 1 -> t0 = relu(1) = 1
  m.weights[6].data[0] = 3.0f;             // head.weight[0][0]
  m.weights[7].data[0] = 0.5f;             // head.bias
  m.arch.activation = "relu";
  MlpInfer net(m);
  std::vector<float> x(size_t(m.arch.input), 0.0f);
  x[0] = 2.0f;
  // h = relu(2) = 2 ; t = relu(0*h + 1) = 1 ; y = 2*t = 2 ; h = relu(2 + 2) = 4 ; out = 3*4 + 0.5
  EXPECT_FLOAT_EQ(net.predict(x, 1)[0], 12.5f);
  x[0] = -1.0f;  // h = 0, t = 1, y = 2, h = 2, out = 6.5
  EXPECT_FLOAT_EQ(net.predict(x, 1)[0], 6.5f);
}
