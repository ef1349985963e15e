// ModuleList, ModuleListOf and Sequential: children named "0", "1", ..., checked access,
// state dicts, and Sequential's forward and backward against the modules chained by hand.
#include <algorithm>

#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;

namespace {
std::vector<std::string> names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, _] : m.named_parameters()) out.push_back(n);
  return out;
}

// A pre-norm block of a user's model: x + attn(norm(x)).
class Block : public Module {
 public:
  Block(int64_t dim, Generator& gen) {
    norm = register_module("norm", std::make_shared<LayerNorm>(dim));
    attn = register_module("attn",
                           std::make_shared<MultiHeadAttention>(dim, 2, 0.0, std::make_shared<Generator>(1), gen));
  }
  Var forward(const Var& x) const {
    const Var h = norm->forward(x);
    return x + attn->forward(h, h, Tensor());
  }
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<MultiHeadAttention> attn;
};

// The example: blocks registered as a list, then filled.
class Model : public Module {
 public:
  Model(int64_t n, int64_t dim, Generator& gen) {
    blocks = register_module("blocks", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < n; ++i) blocks->push_back(std::make_shared<Block>(dim, gen));
    head = register_module("head", std::make_shared<Linear>(LinearOptions(dim, 3), gen));
  }
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<Linear> head;
};

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST_CASE("a module list names its modules 0, 1, ... under its own name", "[nn][containers]") {
  Generator g(1);
  Model m(2, 8, g);
  const auto n = names(m);
  REQUIRE(n.front() == "blocks.0.norm.weight");
  REQUIRE(has(n, "blocks.0.attn.q_proj.weight"));
  REQUIRE(has(n, "blocks.1.attn.out_proj.bias"));
  REQUIRE_FALSE(has(n, "blocks.2.norm.weight"));
  REQUIRE(n.back() == "head.bias");
  REQUIRE(m.blocks->size() == 2);
  REQUIRE_FALSE(m.blocks->empty());
}

TEST_CASE("a dotted name is refused with a pointer to ModuleList", "[nn][containers]") {
  struct Bad : Module {
    explicit Bad(Generator& g) { register_module("blocks.0", std::make_shared<Linear>(LinearOptions(2, 2), g)); }
  };
  Generator g(1);
  REQUIRE_THROWS_WITH(Bad(g), Catch::Contains("invalid name 'blocks.0'") && Catch::Contains("ModuleList"));
}

TEST_CASE("modules pushed after registration appear in the parent's names and mode", "[nn][containers]") {
  Generator g(2);
  Model m(1, 8, g);
  const size_t before = m.named_parameters().size(), per_block = before - 2;  // the head has 2
  m.eval();
  m.blocks->push_back(std::make_shared<Block>(8, g));
  const auto n = names(m);
  REQUIRE(n.size() == before + per_block);
  REQUIRE(has(n, "blocks.1.attn.k_proj.weight"));
  // The new block joins in the list's mode, and follows the parent from then on.
  REQUIRE_FALSE(m.blocks->at(1)->is_training());
  m.train();
  REQUIRE(m.blocks->ptr<Block>(1)->attn->is_training());
}

TEST_CASE("lists nest: a list in a list gives two indices", "[nn][containers]") {
  Generator g(3);
  auto outer = std::make_shared<ModuleList>();
  for (int i = 0; i < 2; ++i) {
    auto inner = std::make_shared<ModuleList>();
    inner->push_back(std::make_shared<Linear>(LinearOptions(4, 4), g));
    inner->push_back(std::make_shared<LayerNorm>(4));
    outer->push_back(inner);
  }
  const auto n = names(*outer);
  REQUIRE(n == std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "1.0.weight",
                                        "1.0.bias", "1.1.weight", "1.1.bias"});
}

TEST_CASE("module lists: iteration, typed access, and errors", "[nn][containers]") {
  Generator g(4);
  ModuleList list(std::make_shared<Linear>(LinearOptions(4, 5), g), std::make_shared<ReLU>(),
                  std::make_shared<LayerNorm>(5));
  std::vector<const Module*> seen;
  for (const auto& m : list) seen.push_back(m.get());
  REQUIRE(seen == std::vector<const Module*>{list[0].get(), list[1].get(), list.at(2).get()});
  REQUIRE(list.ptr<Linear>(0)->options.out_features() == 5);
  REQUIRE_THROWS_WITH(list.ptr<Linear>(1), Catch::Contains("module 1 is not of the requested type"));
  REQUIRE_THROWS_WITH(list.at(3), Catch::Contains("index 3 out of range for 3 modules"));
  REQUIRE_THROWS_WITH(list[7], Catch::Contains("index 7 out of range for 3 modules"));
  REQUIRE_THROWS_WITH(list.push_back(nullptr), Catch::Contains("null"));
  REQUIRE(list.size() == 3);  // the failed push_back added nothing

  // A typed list hands out its type, no casts needed.
  ModuleListOf<Linear> linears;
  linears.push_back(std::make_shared<Linear>(LinearOptions(2, 3), g));
  REQUIRE(linears[0]->weight.shape() == Shape{3, 2});
  REQUIRE_THROWS_WITH(ModuleListOf<Linear>().at(0), Catch::Contains("index 0 out of range for 0 modules"));
}

TEST_CASE("a model with a module list round-trips through its state dict", "[nn][containers]") {
  Generator g1(5), g2(6);
  Model a(3, 8, g1), b(3, 8, g2);
  REQUIRE_FALSE(a.blocks->ptr<Block>(2)->attn->q_proj->weight.data().to_vector<float>() ==
                b.blocks->ptr<Block>(2)->attn->q_proj->weight.data().to_vector<float>());
  b.load_state_dict(a.state_dict());
  const auto sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    REQUIRE(sa[i].first == sb[i].first);
    REQUIRE(sa[i].second.to_vector<float>() == sb[i].second.to_vector<float>());
  }
  // A model with fewer blocks does not match, and the error names the missing keys.
  Model shallow(2, 8, g2);
  REQUIRE_THROWS_WITH(shallow.load_state_dict(a.state_dict()), Catch::Contains("unexpected blocks.2.norm.weight"));
}

TEST_CASE("Sequential's forward and gradients equal the modules chained by hand", "[nn][containers]") {
  Generator g(7);
  auto lin1 = std::make_shared<Linear>(LinearOptions(6, 10), g);
  auto lin2 = std::make_shared<Linear>(LinearOptions(10, 6), g);
  auto norm = std::make_shared<LayerNorm>(6);
  auto drop = std::make_shared<Dropout>(0.5, std::make_shared<Generator>(3));
  auto inner = std::make_shared<Sequential>(std::make_shared<GELU>(), drop);  // nests
  Sequential seq(lin1, std::make_shared<ReLU>(), lin2, norm, inner);
  REQUIRE(names(seq) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias"});
  seq.eval();  // dropout off, as the manual chain below
  REQUIRE_FALSE(drop->is_training());

  const Var x(g.normal({2, 3, 6}), true);
  const Var y = seq.forward(x);
  const Var manual = gelu(norm->forward(lin2->forward(relu(lin1->forward(x)))));
  REQUIRE(y.data().to_vector<float>() == manual.data().to_vector<float>());

  // loss = ((y + 1)^2).mean(): every parameter and the input get the gradient of the chain.
  auto grads = [&](const Var& out) {
    seq.zero_grad();
    x.zero_grad();
    const Var s = out + 1.0;
    mean(s * s).backward();
    std::vector<std::vector<float>> gs{x.grad().to_vector<float>()};
    for (const Var& p : seq.parameters()) gs.push_back(p.grad().to_vector<float>());
    return gs;
  };
  const auto via_seq = grads(seq.forward(x));
  const auto by_hand = grads(gelu(norm->forward(lin2->forward(relu(lin1->forward(x))))));
  REQUIRE(via_seq == by_hand);
  for (const auto& gv : via_seq) REQUIRE(std::any_of(gv.begin(), gv.end(), [](float v) { return v != 0; }));
}

TEST_CASE("an empty Sequential is the identity and a training one applies its dropout", "[nn][containers]") {
  Generator g(8);
  const Var x(g.normal({4, 5}));
  REQUIRE(Sequential().forward(x).data().to_vector<float>() == x.data().to_vector<float>());
  Sequential drop(std::make_shared<Dropout>(0.5, std::make_shared<Generator>(1)));
  const auto y = drop.forward(x).data().to_vector<float>();
  REQUIRE(std::count(y.begin(), y.end(), 0.0f) > 0);
}

TEST_CASE("the Transformer's layer stacks are module lists with the names of before", "[nn][containers]") {
  Generator g(9);
  Transformer m(TransformerOptions().src_vocab(11).tgt_vocab(11).d_model(8).heads(2).ff(16).encoder_layers(2)
                    .decoder_layers(3).max_len(16),
                g);
  REQUIRE(m.encoder->layers->size() == 2);
  REQUIRE(m.decoder->layers->size() == 3);
  const auto n = names(m);
  REQUIRE(has(n, "encoder.layers.1.self_attn.q_proj.weight"));
  REQUIRE(has(n, "decoder.layers.2.cross_attn.v_proj.bias"));
  REQUIRE(has(n, "decoder.layers.0.norm3.weight"));
  REQUIRE_FALSE(has(n, "decoder.layers.3.norm1.weight"));
  REQUIRE(m.decoder->layers->at(2)->cross_attn.get() != nullptr);
}
