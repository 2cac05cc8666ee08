// Fuzz target: pipeline layouts (--pipeline-model-parallel-layout strings such as
// 'Et*3|(tt|)*6mL') and the pipeline partition and schedule around them.
//
// Input: a first line of sizes, "PP VPP LAYERS MTP MICROBATCHES FIRST LAST FLAGS" (missing
// ones are 1 1 0 0 0 -1 -1 0; each is folded into a small range: PP 1-64, VPP 1-8, LAYERS
// 0-4096 with 0 = the layout's own count, MTP 0-7, MICROBATCHES 0-999 with 0 = unknown, FIRST
// and LAST -1 (unset) to LAYERS + 1, FLAGS bit 0 = account for the embedding, bit 1 = for the
// loss), then the layout text. The text goes through parse_pipeline_layout and resolve_setup
// and, with the sizes, partition_pipeline with the layout; then the sizes alone go through
// partition_pipeline without a layout (even split, then the FIRST/LAST stage counts), and the
// in-flight micro-batches of every rank.
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); an accepted partition holds every
// decoder layer exactly once, in order, its MTP layers, one loss, the embedding first; every
// rank holds a non-negative number of micro-batches per chunk, at least one in all.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include <mme/engine/pipeline.hpp>
#include <mme/sdk/training_setup.hpp>

#include "fuzz_support.hpp"

namespace {

void check_partition(const mme::PipelinePartition& part, std::int64_t L, std::int64_t M, std::int64_t m) {
  auto fail = [](const std::string& what) { mme::fuzz::finding("pipeline_layout", what); };
  if (part.pp < 1 || part.vpp < 1 || static_cast<std::int64_t>(part.chunks.size()) != part.pp * part.vpp)
    fail(fmt::format("{} chunks for PP {} x VPP {}", part.chunks.size(), part.pp, part.vpp));
  // Model order: virtual stage vr of every rank r, then vr + 1.
  std::int64_t next = 0, mtp = 0, losses = 0;
  for (std::int64_t vr = 0; vr < part.vpp; ++vr) {
    for (std::int64_t r = 0; r < part.pp; ++r) {
      const auto& c = part.at(r, vr);
      if (c.num_layers < 0 || c.mtp_layers < 0) fail("a chunk with a negative layer count");
      if (c.first_layer != next)
        fail(fmt::format("chunk ({}, {}) starts at layer {}, expected {}", r, vr, c.first_layer, next));
      next += c.num_layers;
      mtp += c.mtp_layers;
      losses += c.loss ? 1 : 0;
    }
  }
  if (next != L) fail(fmt::format("the chunks hold {} decoder layers of {}", next, L));
  if (mtp != M) fail(fmt::format("the chunks hold {} MTP layers of {}", mtp, M));
  if (losses != 1) fail(fmt::format("{} chunks hold the loss", losses));
  if (!part.at(0, 0).embedding) fail("the first chunk has no embedding");
  for (std::int64_t r = 0; r < part.pp; ++r) {
    const auto inflight = mme::inflight_microbatches(part.pp, part.vpp, r, m);
    if (static_cast<std::int64_t>(inflight.size()) != part.vpp) fail("in-flight counts for the wrong number of chunks");
    std::int64_t sum = 0;
    for (auto x : inflight) {
      if (x < 0) fail("a negative number of micro-batches in flight");
      sum += x;
    }
    if (sum < 1) fail(fmt::format("rank {} holds no micro-batch at its peak", r));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = input.find('\n');
  const std::string header(input.substr(0, eol));
  const std::string layout(eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1));
  long long v[8] = {1, 1, 0, 0, 0, -1, -1, 0};
  {
    std::istringstream in(header);
    for (auto& x : v)
      if (!(in >> x)) break;
  }
  auto fold = [](long long x, long long lo, long long hi) {  // into [lo, hi]
    const long long span = hi - lo + 1;
    return static_cast<std::int64_t>(lo + ((x % span) + span) % span);
  };
  const std::int64_t pp = fold(v[0], 1, 64), vpp = fold(v[1], 1, 8), layers = fold(v[2], 0, 4096);
  const std::int64_t mtp = fold(v[3], 0, 7), micro_batches = fold(v[4], 0, 999);

  mme::fuzz::run_checked("pipeline_layout", [&] {
    const auto stages = mme::parse_pipeline_layout(layout);
    std::int64_t decoders = 0, mtps = 0;
    for (const auto& s : stages) {
      if (s.decoder < 0 || s.mtp < 0) mme::fuzz::finding("pipeline_layout", "a stage with a negative count");
      decoders += s.decoder;
      mtps += s.mtp;
    }
    const std::int64_t L = layers == 0 ? decoders : layers;
    const std::int64_t M = layers == 0 ? mtps : mtp;
    mme::TrainingSetup setup;
    setup.parallel.pp = pp;
    setup.parallel.world_size = pp;
    setup.pipeline.layout = layout;
    setup = mme::resolve_setup(setup);
    const auto part = mme::partition_pipeline(L, M, setup.parallel, setup.pipeline);
    if (part.vpp != setup.parallel.vpp)
      mme::fuzz::finding("pipeline_layout", "resolve_setup and the partition disagree on VPP");
    check_partition(part, L, M, micro_batches);
  });

  // The same sizes without a layout: the even split, then first/last-stage counts.
  const std::int64_t L = std::max<std::int64_t>(layers, 1);
  mme::ParallelLayout par;
  par.pp = pp;
  par.vpp = vpp;
  mme::PipelineSplit split;
  split.account_for_embedding = (v[7] & 1) != 0;
  split.account_for_loss = (v[7] & 2) != 0;
  mme::fuzz::run_checked("pipeline_layout",
                         [&] { check_partition(mme::partition_pipeline(L, mtp, par, split), L, mtp, micro_batches); });
  if (v[5] >= 0) split.first_stage_layers = fold(v[5], 0, L + 1);
  if (v[6] >= 0) split.last_stage_layers = fold(v[6], 0, L + 1);
  if (split.first_stage_layers || split.last_stage_layers)
    mme::fuzz::run_checked("pipeline_layout", [&] {
      check_partition(mme::partition_pipeline(L, mtp, par, split), L, mtp, micro_batches);
    });
  return 0;
}
