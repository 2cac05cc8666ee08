// A decoder block called directly with a hand-made context: what the layer plugins' own tests
// (plugins/layers/<kind>/tests) share. Hidden 4096, one layer, sequence 4096, micro-batch 1.
#pragma once

#include <cstdint>
#include <string>

#include <mme/sdk/error.hpp>
#include <mme/sdk/layer_model.hpp>

namespace mme::test {

struct BlockCase {
  ModelSpec model;
  LayerSpec layer;
  TrainingSetup setup;
  BlockCase() {
    model.name = "block-test";
    model.num_layers = 1;
    model.hidden_size = 4096;
    model.vocab_size = 32000;
    setup.seq_length = 4096;
    setup.micro_batch_size = 1;
  }
  // seq 4096, micro-batch 1, bf16: T = 4096 / cp tokens per CP rank, T / tp per rank under
  // sequence parallelism (on whenever tp > 1).
  BlockContext context(std::int64_t tp, std::int64_t cp = 1, std::int64_t ep = 1) const {
    BlockContext ctx{model, layer, setup};
    ctx.tp = tp, ctx.cp = cp, ctx.ep = ep;
    ctx.sequence_parallel = tp > 1;
    ctx.tokens = 4096 / cp;
    ctx.local_tokens = ctx.tokens / tp;
    ctx.hidden_dropout = model.hidden_dropout;
    return ctx;
  }
  // The ConfigError the block's validate_spec gives for this layer (index 1), "(no error)" if none.
  std::string spec_error(const LayerMemoryModel& block) const {
    try {
      block.validate_spec(model, layer, 1);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

inline double bytes_of(const BlockCosts& c, CommGroup g, bool forward) {
  return forward ? sum_forward_bytes(c, g) : sum_backward_bytes(c, g);
}

}  // namespace mme::test
