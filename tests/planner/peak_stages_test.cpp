// The planner's engine call (estimate_peak_stages, framework/src/engine/estimator_internal.hpp)
// skips the middle pipeline stages that cannot set the peak or the bound: one holding, chunk by
// chunk, the same layers as an earlier middle stage with no more micro-batches in flight. Its
// peak, bound and every kept stage are Estimator::run's to the byte, on layouts the planner does
// not search too (layout strings with unequal middle stages, few micro-batches, the combined 1F1B
// schedule, FSDP, LoRA, FP8, activation offloading, CUDA graphs), and it does skip stages. A
// stage it evaluated for one split of a layout serves the same stage of another split (its
// stage memo). Every figure of every kept stage is run()'s.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "agreement_registry.hpp"
#include "engine/estimator_internal.hpp"

namespace mme {
namespace {

const Registry& registry() { return test::agreement_registry(); }

struct Case {
  std::string name;
  TrainingSetup setup;
};

TrainingSetup base(std::int64_t gpus, std::int64_t pp, std::int64_t vpp, std::int64_t ep, std::int64_t global_batch) {
  TrainingSetup s;
  s.parallel.world_size = gpus;
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.ep = ep;
  s.seq_length = 4096;
  s.global_batch_size = global_batch;
  return s;
}

// Every figure of a kept stage equals run()'s stage of the same rank.
void expect_same_stage(const StageEstimate& st, const StageEstimate& want) {
  SCOPED_TRACE(fmt::format("stage {}", st.pp_rank));
  const std::int64_t StageEstimate::*fields[] = {&StageEstimate::layers,
                                                 &StageEstimate::mtp_layers,
                                                 &StageEstimate::parameters,
                                                 &StageEstimate::expert_parameters,
                                                 &StageEstimate::trainable_parameters,
                                                 &StageEstimate::weight_bytes,
                                                 &StageEstimate::gradient_bytes,
                                                 &StageEstimate::optimizer_bytes,
                                                 &StageEstimate::activation_bytes,
                                                 &StageEstimate::other_bytes,
                                                 &StageEstimate::dummy_wgrad_bytes,
                                                 &StageEstimate::static_bytes,
                                                 &StageEstimate::total_bytes,
                                                 &StageEstimate::upper_bytes,
                                                 &StageEstimate::forward_backward_bytes,
                                                 &StageEstimate::optimizer_step_bytes,
                                                 &StageEstimate::step_only_bytes,
                                                 &StageEstimate::step_transient_bytes,
                                                 &StageEstimate::allocator_slack_bytes,
                                                 &StageEstimate::outside_allocator_bytes,
                                                 &StageEstimate::bucket_padding_bytes,
                                                 &StageEstimate::offload_slack_bytes,
                                                 &StageEstimate::cached_output_wgrad_bytes,
                                                 &StageEstimate::inflight_microbatches,
                                                 &StageEstimate::cuda_graph_capture_bytes,
                                                 &StageEstimate::cuda_graph_replay_bytes,
                                                 &StageEstimate::cuda_graph_pool_bytes};
  for (std::size_t i = 0; i < std::size(fields); ++i) EXPECT_EQ(st.*fields[i], want.*fields[i]) << "field " << i;
  EXPECT_STREQ(st.peak_phase, want.peak_phase);
}

// Compares the planner's estimate with run()'s; returns how many stages it skipped.
std::size_t expect_same_figures(const Estimator& e, const TrainingSetup& s) {
  EstimateOptions eo;
  eo.components = false;
  eo.device_memory = false;
  const Estimate full = e.run(s, eo);
  const Estimate kept = estimate_peak_stages(e, s, eo);
  EXPECT_EQ(kept.peak().total_bytes, full.peak().total_bytes);
  EXPECT_EQ(kept.upper_bytes(), full.upper_bytes());
  std::int64_t full_floor = 0, kept_floor = 0;
  for (const auto& st : full.stages)
    full_floor = std::max(full_floor, st.weight_bytes + st.gradient_bytes + st.optimizer_bytes);
  for (const auto& st : kept.stages) {
    kept_floor = std::max(kept_floor, st.weight_bytes + st.gradient_bytes + st.optimizer_bytes);
    expect_same_stage(st, full.stages.at(static_cast<std::size_t>(st.pp_rank)));
  }
  EXPECT_EQ(kept_floor, full_floor);
  // Every skipped stage is dominated by a kept middle stage: the same weights, gradients and
  // optimizer states, no larger peak or bound.
  EXPECT_LE(kept.stages.size(), full.stages.size());
  std::size_t k = 0;
  for (const auto& st : full.stages) {
    if (k < kept.stages.size() && kept.stages[k].pp_rank == st.pp_rank) {
      ++k;
      continue;
    }
    const bool dominated = std::any_of(kept.stages.begin(), kept.stages.end(), [&](const StageEstimate& d) {
      return d.pp_rank > 0 && d.pp_rank < st.pp_rank && d.weight_bytes == st.weight_bytes &&
             d.gradient_bytes == st.gradient_bytes && d.optimizer_bytes == st.optimizer_bytes &&
             d.total_bytes >= st.total_bytes && d.upper_bytes >= st.upper_bytes;
    });
    EXPECT_TRUE(dominated) << "skipped stage " << st.pp_rank;
  }
  EXPECT_EQ(k, kept.stages.size());  // the kept stages in order, each once
  return full.stages.size() - kept.stages.size();
}

TEST(PeakStages, ThePlannersEstimateIsRunsPeakAndBound) {
  struct Model {
    std::string id;
    std::vector<Case> cases;
  };
  std::vector<Model> models;
  {
    Model m{"deepseek-ai/DeepSeek-V3", {}};
    // 61 layers: 6 on the first stage, 7 on the last, 8 on each other (and MTP on the last).
    auto pp8 = [](std::int64_t vpp, std::int64_t global_batch) {
      TrainingSetup s = base(256, 8, vpp, 32, global_batch);
      if (vpp == 1) {
        s.pipeline.first_stage_layers = 6;
        s.pipeline.last_stage_layers = 7;
      } else {
        s.pipeline.layout = "Et*3|(t*4|)*14t*2mL";  // 16 chunks: 3 + 14 x 4 + 2 layers
      }
      return s;
    };
    m.cases.push_back({"PP 8, EP 32, 1F1B", pp8(1, 1024)});
    m.cases.push_back({"PP 8, VPP 2, EP 32", pp8(2, 1024)});
    m.cases.push_back({"PP 8, 4 micro-batches (fewer than the stages)", pp8(1, 4 * 32)});  // DP 32
    TrainingSetup layout = base(128, 8, 1, 16, 512);                                       // unequal middle stages
    layout.pipeline.layout = "Et*3|t*7|t*8|t*9|t*8|t*8|t*8|t*10,mL";
    m.cases.push_back({"layout string, middle stages of 7, 8 and 9 layers", layout});
    TrainingSetup ep_overlap = pp8(2, 1024);
    ep_overlap.comm.ep_overlap = true;
    ep_overlap.dispatcher = TokenDispatcher::kFlex;
    m.cases.push_back({"combined 1F1B (--overlap-moe-expert-parallel-comm)", ep_overlap});
    TrainingSetup full = pp8(1, 1024);
    full.recompute.granularity = RecomputeGranularity::kFull;
    full.recompute.method = RecomputeMethod::kBlock;
    full.recompute.num_layers = 3;
    m.cases.push_back({"full recompute, block of 3", full});
    TrainingSetup fp8 = pp8(1, 1024);
    fp8.precision = Precision::kFP8;
    fp8.comm.overlap_grad_reduce = true;
    m.cases.push_back({"FP8, DDP buckets", fp8});
    models.push_back(m);
  }
  {
    Model m{"moonshotai/Moonlight-16B-A3B", {}};
    m.cases.push_back({"PP 9, EP 8", base(72, 9, 1, 8, 256)});
    TrainingSetup fsdp = base(64, 4, 1, 8, 256);
    fsdp.pipeline.first_stage_layers = 6;
    fsdp.pipeline.last_stage_layers = 5;
    fsdp.fsdp.kind = FsdpKind::kMegatron;
    fsdp.optimizer.distributed = true;
    m.cases.push_back({"Megatron-FSDP, uneven first and last", fsdp});
    auto pp8 = [] {
      TrainingSetup s = base(64, 8, 1, 8, 256);
      s.pipeline.first_stage_layers = 3;  // 27 layers: 3 + 6 x 3 + 6
      s.pipeline.last_stage_layers = 6;
      return s;
    };
    TrainingSetup offload = pp8();
    offload.activation_offload.fine_grained = true;
    offload.activation_offload.modules = kOffloadCoreAttn | kOffloadExpertFc1;
    m.cases.push_back({"fine-grained activation offloading (no stage skipped)", offload});
    TrainingSetup graphs = pp8();
    graphs.cuda_graph.impl = CudaGraphImpl::kTransformerEngine;
    graphs.cuda_graph.modules = kGraphAttn;
    m.cases.push_back({"CUDA graphs (no stage skipped)", graphs});
    models.push_back(m);
  }
  {
    Model m{"meta-llama/Meta-Llama-3-8B", {}};
    TrainingSetup tp = base(64, 8, 4, 1, 512);
    tp.parallel.tp = 2;
    m.cases.push_back({"TP 2, PP 8, VPP 4", tp});
    TrainingSetup lora = base(16, 4, 1, 1, 64);
    lora.lora.rank = 16;
    m.cases.push_back({"LoRA", lora});
    // 16 micro-batches (DP 2): the fewest the interleaved schedule runs at PP 16, and fewer chunk
    // passes (32) than the first stage's warm-up would hold (47).
    TrainingSetup selective = base(32, 16, 2, 1, 32);
    selective.recompute.granularity = RecomputeGranularity::kSelective;
    m.cases.push_back({"PP 16, VPP 2, 16 micro-batches, selective recompute", selective});
    models.push_back(m);
  }

  std::size_t skipped = 0;
  for (const Model& m : models) {
    SCOPED_TRACE(m.id);
    const Estimator e(test::bundled_model(m.id, registry()), registry());
    for (const Case& c : m.cases) {
      SCOPED_TRACE(c.name);
      const std::size_t n = expect_same_figures(e, c.setup);
      if (c.name.find("no stage skipped") != std::string::npos) {
        EXPECT_EQ(n, 0u);
      }
      skipped += n;
    }
  }
  EXPECT_GT(skipped, 20u);
}

// In the layout string's pipeline the later middle stages hold more layers than the first middle
// one: they are kept, and the stage that sets the peak is one of them.
TEST(PeakStages, AMiddleStageWithMoreLayersIsKept) {
  const Estimator e(test::bundled_model("deepseek-ai/DeepSeek-V3", registry()), registry());
  TrainingSetup s = base(128, 8, 1, 16, 512);
  s.pipeline.layout = "Et*3|t*5|t*6|t*7|t*8|t*9|t*10|t*13,mL";
  EstimateOptions eo;
  eo.components = false;
  eo.device_memory = false;
  const Estimate kept = estimate_peak_stages(e, s, eo);
  EXPECT_EQ(kept.stages.size(), 8u);
  EXPECT_EQ(kept.peak().total_bytes, e.run(s, eo).peak().total_bytes);
}

// The planner's splits of one layout: DeepSeek-V3's 61 layers over PP 8 with first and last
// stages of 4 to 9 layers leave middle stages of 8 MoE layers with the same micro-batches in
// flight, and the first (last) stages of two splits can hold the same layers. Asked in one order
// and then the other, with DDP buckets (the first stage's own padding) and the MoE bound's second
// pass, every stage is the split's own.
TEST(PeakStages, AStageOfAnotherSplitServesOnlyTheSameStage) {
  const Estimator e(test::bundled_model("deepseek-ai/DeepSeek-V3", registry()), registry());
  std::vector<TrainingSetup> splits;
  for (const auto& [first, last] : {std::pair{6, 7}, {5, 8}, {7, 6}, {4, 9}, {6, 7}, {9, 4}})
    for (const std::int64_t micro_batch : {1, 2}) {
      TrainingSetup s = base(256, 8, 1, 32, 1024);
      s.pipeline.first_stage_layers = first;
      s.pipeline.last_stage_layers = last;
      s.micro_batch_size = micro_batch;
      s.comm.overlap_grad_reduce = true;
      splits.push_back(s);
    }
  TrainingSetup layout = base(256, 8, 2, 32, 1024);  // VPP 2: chunks of 4, the same in each split
  layout.pipeline.layout = "Et*3|(t*4|)*14t*2mL";
  splits.push_back(layout);
  layout.pipeline.layout = "Et*2|t*5|(t*4|)*13t*2mL";
  splits.push_back(layout);
  for (int pass = 0; pass < 2; ++pass) {
    for (const TrainingSetup& s : splits) {
      SCOPED_TRACE(s.pipeline.layout.empty()
                       ? fmt::format("first {}, last {}, micro-batch {}", s.pipeline.first_stage_layers.value_or(0),
                                     s.pipeline.last_stage_layers.value_or(0), s.micro_batch_size)
                       : s.pipeline.layout);
      (void)expect_same_figures(e, s);
    }
    std::reverse(splits.begin(), splits.end());
  }
}

}  // namespace
}  // namespace mme
