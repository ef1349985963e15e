// Checkpoint averaging from the library (train/average.h): the elementwise mean of the inputs'
// weights, with their metadata and a checksum; inputs of another model are refused by name.
#include <unistd.h>

#include <filesystem>

#include "rosetta/core/safetensors.h"
#include "rosetta/nn/layers.h"
#include "rosetta/train/average.h"
#include "rosetta/train/checkpoint.h"
#include "support.h"

using namespace rosetta;
namespace fs = std::filesystem;

TEST_CASE("average_weight_files writes the elementwise mean of its inputs", "[train][average]") {
  const fs::path dir = fs::temp_directory_path() / ("rosetta-test-average-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<train::AverageInput> inputs;
  std::vector<std::vector<float>> weights, biases;
  for (int i = 0; i < 3; ++i) {
    Generator g(uint64_t(10 + i));
    nn::Linear layer(nn::LinearOptions(5, 3), g);
    Tensor bias = layer.bias.data();  // shares the parameter's storage
    bias.fill_(float(i));             // biases 0, 1, 2: mean 1
    const std::string path = (dir / ("step-" + std::to_string(100 * (i + 1)) + ".safetensors")).string();
    train::save_model_weights(path, layer, {{"model.kind", "linear"}, {"valid.loss", std::to_string(i)}});
    inputs.push_back({path, std::to_string(100 * (i + 1))});
    weights.push_back(layer.weight.data().to_vector<float>());
    biases.push_back(layer.bias.data().to_vector<float>());
  }
  const std::string out = (dir / "averaged.safetensors").string();
  REQUIRE(train::average_weight_files(inputs, out) == "100,200,300");
  const SafeTensors st = load_safetensors(out);
  train::verify_checksum(st, out);
  const std::vector<float> w = st.find("weight")->to_vector<float>();
  for (size_t k = 0; k < w.size(); ++k)
    REQUIRE(w[k] == float((double(weights[0][k]) + double(weights[1][k]) + double(weights[2][k])) / 3));
  for (float b : st.find("bias")->to_vector<float>()) REQUIRE(b == 1.0f);
  REQUIRE(st.metadata.at("model.kind") == "linear");
  REQUIRE(st.metadata.at("average.steps") == "100,200,300");
  REQUIRE_FALSE(st.metadata.contains("valid.loss"));  // a score of one input, not of the mean

  // One input gives its own weights back exactly.
  train::average_weight_files({inputs[1]}, out);
  REQUIRE(load_safetensors(out).find("weight")->to_vector<float>() == weights[1]);

  // Another model (other shapes) is refused, naming the file and the tensor.
  Generator g(1);
  nn::Linear wider(nn::LinearOptions(6, 3), g);
  const std::string other = (dir / "other.safetensors").string();
  train::save_model_weights(other, wider, {{"model.kind", "linear"}});
  REQUIRE_THROWS_WITH(train::average_weight_files({inputs[0], {other, ""}}, out),
                      Catch::Contains(other + ": not the same model as " + inputs[0].path) &&
                          Catch::Contains("tensor weight"));
  fs::remove_all(dir);
}
