// The newest two training checkpoints (train/checkpoint.h): KeepPrevious::yes keeps the one a
// save replaces, in a file of its own, and the loaders fall back on it when the newest does not
// load.
#include <sys/stat.h>

#include <filesystem>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/nn/nn.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/trainer.h"
#include "support.h"

using namespace rosetta;
namespace fs = std::filesystem;

namespace {

// A linear model on a fixed task; `steps()` updates so far.
struct Run {
  Generator gen{3};
  nn::Linear model{nn::LinearOptions(4, 3), gen};
  optim::Adam opt{model.parameters(), optim::AdamOptions{}};
  train::Trainer trainer{model, opt};
  Tensor x = Generator(1).normal({6, 4}, 0.0, 1.0), y = Generator(2).randint({6}, 0, 3);

  void step() {
    trainer.step({6}, 6, [&](nn::Module& m, size_t, int64_t b0, int64_t b1) {
      const Var logits = static_cast<nn::Linear&>(m).forward(Var(x.narrow(0, b0, b1 - b0).contiguous()));
      return train::ShardLoss{cross_entropy(logits, y.narrow(0, b0, b1 - b0).contiguous(), 0.0, -1), b1 - b0};
    });
  }
};

std::string step_of(const std::string& path) { return load_safetensors(path).metadata.at("train.step"); }

ino_t inode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

void flip_a_tensor_byte(const std::string& path) {
  std::string bytes = read_file(path);
  bytes[bytes.size() - 2] ^= 0x08;
  write_file_atomic(path, bytes);
}

}  // namespace

TEST_CASE("a save that keeps the previous checkpoint keeps it in a file of its own, and the loaders fall back on it",
          "[train][checkpoint]") {
  const test::ScratchDir dir;
  const std::string path = dir.file("checkpoint.safetensors"), previous = dir.file("checkpoint.prev.safetensors");
  REQUIRE(train::previous_checkpoint(path) == previous);
  Run run;
  run.step();
  train::save_training_checkpoint(path, run.trainer, {}, train::KeepPrevious::yes);
  REQUIRE(!fs::exists(previous));  // nothing to keep yet
  run.step();
  train::save_training_checkpoint(path, run.trainer, {}, train::KeepPrevious::yes);
  run.step();
  train::save_training_checkpoint(path, run.trainer, {}, train::KeepPrevious::yes);
  REQUIRE(step_of(path) == "3");
  REQUIRE(step_of(previous) == "2");
  // Two files, not two names of one: a bad sector in the newest leaves the previous one whole.
  REQUIRE(inode_of(path) != inode_of(previous));
  REQUIRE(dir.listing() == std::vector<std::string>{"checkpoint.prev.safetensors", "checkpoint.safetensors"});

  // A second save at the same step with KeepPrevious::no replaces the newest alone.
  train::save_training_checkpoint(path, run.trainer, {{"app.final", "1"}}, train::KeepPrevious::no);
  REQUIRE(step_of(previous) == "2");
  REQUIRE(load_safetensors(path).metadata.count("app.final") == 1);

  SECTION("the newest loads: no fallback") {
    Run other;
    const train::LoadedCheckpoint loaded = train::load_newest_training_checkpoint(path, other.trainer);
    REQUIRE(loaded.from.path == path);
    REQUIRE(loaded.from.skipped.empty());
    REQUIRE(other.trainer.steps() == 3);
  }
  SECTION("a corrupted newest: the previous one, and why the newest was skipped") {
    flip_a_tensor_byte(path);
    Run other;
    const train::LoadedCheckpoint loaded = train::load_newest_training_checkpoint(path, other.trainer);
    REQUIRE(loaded.from.path == previous);
    REQUIRE(loaded.from.skipped.size() == 1);
    REQUIRE_THAT(loaded.from.skipped[0], Catch::StartsWith(path) && Catch::Contains("corrupted"));
    REQUIRE(other.trainer.steps() == 2);
    // Set aside, so that the next save cannot keep it as the previous one.
    REQUIRE(train::set_aside_checkpoint(path) == path + ".skipped");
    REQUIRE(!fs::exists(path));
    REQUIRE(fs::exists(path + ".skipped"));
  }
  SECTION("both corrupted: one error naming both") {
    flip_a_tensor_byte(path);
    flip_a_tensor_byte(previous);
    Run other;
    REQUIRE_THROWS_WITH(train::load_newest_training_checkpoint(path, other.trainer),
                        Catch::StartsWith(path) && Catch::Contains(previous) && Catch::Contains("corrupted"));
  }
}
