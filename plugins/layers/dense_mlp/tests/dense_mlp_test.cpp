// The dense MLP block called directly with hand-made contexts; the expected values are worked
// out by hand beside each (FLOPs: 2 per weight and token of the rank's share).
#include "dense_mlp.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "block_case.hpp"

namespace mme::plugins {
namespace {

TEST(DenseMlpBlock, CostsAndTheirRecompute) {
  test::BlockCase b;
  b.model.gated_linear_unit = true;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlp;
  BlockCosts c;
  DenseMlpModel().costs(b.context(2), c);
  // fc1 4096 x 28672 (gated) = 117,440,512 and fc2 14336 x 4096 = 58,720,256 weights:
  // 2 x 176,160,768 x 2048.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 721'554'505'728.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 721'554'505'728.0);
  EXPECT_EQ(c.attention_flops, 0);
}

TEST(DenseMlpBlock, ChecksItsOwnFields) {
  test::BlockCase b;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  EXPECT_EQ(b.spec_error(DenseMlpModel()), "(no error)");
  b.layer.mlp.ffn_hidden_size = std::int64_t{1} << 40;
  EXPECT_THAT(b.spec_error(DenseMlpModel()),
              ::testing::HasSubstr("block-test: layer 1 ffn_hidden_size = 1099511627776 is larger than"));
  EXPECT_EQ(DenseMlpModel().megatron_block(), MegatronBlock::kMlp);
}

}  // namespace
}  // namespace mme::plugins
