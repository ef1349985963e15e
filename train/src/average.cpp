#include "rosetta/train/average.h"

#include <map>
#include <set>

#include "rosetta/core/check.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/train/checkpoint.h"

namespace rosetta::train {

namespace {

// The metadata that says which model the weights belong to (average.h): model.* and run.*.
// Inputs must agree on all of it, or their mean is not a model of anything.
bool identifies_model(const std::string& key) { return key.starts_with("model.") || key.starts_with("run."); }

// Metadata of the newest input that would be false of the mean: a validation loss measured on
// that input alone, and the optimizer's description (its tensors are not averaged).
bool dropped_from_output(const std::string& key) {
  return key.starts_with("valid.") || key.starts_with("optim.");
}

// The model weights of a loaded file: every tensor but the optimizer's (optim.*), by name.
std::map<std::string, Tensor> model_tensors(const SafeTensors& st) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : st.tensors)
    if (!name.starts_with("optim.")) out.emplace(name, t);
  return out;
}

// Throws naming `path` when `other`, the weights and metadata of input `path`, are not those of
// the same model as `first`, read from `first_path`: the first key or tensor that differs.
void check_same_model(const std::map<std::string, std::string>& first_meta, const std::map<std::string, Tensor>& first,
                      const std::string& first_path, const std::map<std::string, std::string>& meta,
                      const std::map<std::string, Tensor>& other, const std::string& path) {
  std::set<std::string> keys;
  for (const auto* m : {&first_meta, &meta})
    for (const auto& [key, value] : *m)
      if (identifies_model(key)) keys.insert(key);
  auto value_of = [](const std::map<std::string, std::string>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string("(absent)") : "'" + it->second + "'";
  };
  for (const std::string& key : keys)
    ROSETTA_CHECK(value_of(first_meta, key) == value_of(meta, key), path, ": not the same model as ", first_path,
                  ": metadata ", key, " is ", value_of(meta, key), " here, ", value_of(first_meta, key), " there");
  for (const auto& [name, t] : first) {
    const auto it = other.find(name);
    ROSETTA_CHECK(it != other.end(), path, ": not the same model as ", first_path, ": no tensor ", name);
    ROSETTA_CHECK(it->second.shape() == t.shape() && it->second.dtype() == t.dtype(), path,
                  ": not the same model as ", first_path, ": tensor ", name, " is ", dtype_name(it->second.dtype()),
                  " ", it->second.shape().str(), " here, ", dtype_name(t.dtype()), " ", t.shape().str(), " there");
  }
  for (const auto& [name, t] : other)
    ROSETTA_CHECK(first.contains(name), path, ": not the same model as ", first_path, ": extra tensor ", name);
}

}  // namespace

std::string average_weight_files(const std::vector<AverageInput>& inputs, const std::string& out) {
  ROSETTA_CHECK(!inputs.empty(), "average: no files to average");
  std::map<std::string, std::string> first_meta, newest_meta;
  std::map<std::string, Tensor> first;   // the first input's weights, to compare the others with
  std::map<std::string, std::vector<double>> sums;
  std::string steps;  // comma-separated
  for (const auto& [path, step] : inputs) {
    const SafeTensors st = load_safetensors(path);
    verify_checksum(st, path);
    std::map<std::string, Tensor> weights = model_tensors(st);
    ROSETTA_CHECK(!weights.empty(), path, ": holds no model weights");
    if (first.empty()) {
      first = weights;
      first_meta = st.metadata;
    } else {
      check_same_model(first_meta, first, inputs.front().path, st.metadata, weights, path);
    }
    for (const auto& named : weights) {
      const Tensor& t = named.second;
      std::vector<double>& sum = sums[named.first];
      sum.resize(size_t(t.numel()));
      try {
        dispatch_float(t.dtype(), [&](auto tag) {
          using T = decltype(tag);
          const std::vector<T> values = t.template to_vector<T>();
          for (size_t i = 0; i < values.size(); ++i) sum[i] += double(values[i]);
        });
      } catch (const Error& e) {
        ROSETTA_FAIL(path, ": tensor ", named.first, ": ", e.what());
      }
    }
    newest_meta = st.metadata;
    const auto train_step = st.metadata.find("train.step");
    steps += (steps.empty() ? "" : ",") +
             (!step.empty() ? step : train_step != st.metadata.end() ? train_step->second : std::string("?"));
  }

  // The mean in each tensor's own dtype (F32 for models trained here). One input gives its own
  // weights back exactly: a float widened to double and divided by 1 is the same float.
  const double n = double(inputs.size());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : first) {
    const std::vector<double>& sum = sums.at(name);
    Tensor mean = Tensor::empty(t.shape(), t.dtype());
    dispatch_float(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = mean.template data<T>();
      for (size_t i = 0; i < sum.size(); ++i) dst[i] = T(sum[i] / n);
    });
    tensors.emplace_back(name, mean);
  }

  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : newest_meta)
    if (!dropped_from_output(key)) meta[key] = value;
  meta["average.steps"] = steps;
  meta[kChecksumKey] = tensors_checksum(tensors);
  save_safetensors(out, tensors, meta);  // atomically: a crash leaves any old `out` whole
  return steps;
}


}  // namespace rosetta::train
