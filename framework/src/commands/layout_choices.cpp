#include "mme/commands/layout_choices.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/core.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/pipeline.hpp>
#include <mme/engine/setup_checks.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/sdk/error.hpp>

#include "resolve.hpp"

namespace mme::commands {

namespace {

std::vector<std::int64_t> divisors(std::int64_t n, std::int64_t max) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= std::min(n, max); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// "1, 2, 4" (at most `max` values, then ", ...").
std::string listed(const std::vector<std::int64_t>& values, std::size_t max = 16) {
  std::string out;
  for (std::size_t i = 0; i < values.size() && i < max; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return values.size() > max ? out + ", ..." : out;
}

// The form's setup: each flag on its own, so one that does not parse leaves only itself unset.
TrainingSetup form_setup(const SetupFlags& form) {
  TrainingSetup s;
  for (const auto& name : form.names()) {
    SetupFlags one;
    if (const auto v = form.value(name))
      one.set(name, *v);
    else if (form.on(name))
      one.set_switch(name);
    else
      continue;
    try {
      s = setup_from_mme_flags(one, s);
    } catch (const Error&) {
    }
  }
  // The seed's ETP = 1 when the form leaves it unset, as `mme estimate` has it.
  if (!form.given("etp")) s.parallel.etp = 1;
  return s;
}

// Whether the engine accepts the layout of `s` on its smallest GPU count (the layout's checks,
// not the blocks': those are BlockLimits).
bool layout_ok(const ModelSpec& model, TrainingSetup s) {
  s.parallel.world_size = std::max<std::int64_t>(cli::layout_gpu_multiple(s.parallel), 1);
  try {
    const TrainingSetup r = resolve_setup(s);
    validate_setup(model, r);
    (void)partition_pipeline(model.num_layers, model.mtp_num_layers, r.parallel, r.pipeline);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

BlockLimits block_limits(const ModelSpec& model, const Registry& registry) {
  BlockLimits b;
  b.num_layers = model.num_layers;
  b.mtp_layers = model.mtp_num_layers;
  std::int64_t heads = 0;
  for (const auto& l : model.layers) {
    if (heads == 0) heads = l.attention.num_heads;
    if (l.mlp.num_experts > b.experts) {
      b.experts = l.mlp.num_experts;
      b.expert_width = l.mlp.expert_ffn_hidden_size;
    }
  }
  const Estimator estimator(model, registry);
  EstimateOptions eo;
  eo.components = false;
  eo.upper_bound = false;
  eo.bound_terms = false;
  auto accepted = [&](auto&& set) {
    TrainingSetup s;
    s.parallel.etp = 1;
    set(s.parallel);
    s.parallel.world_size = std::max<std::int64_t>(cli::layout_gpu_multiple(s.parallel), 1);
    try {
      (void)estimator.run(s, eo);
      return true;
    } catch (const LayoutError&) {
      return false;
    }
  };
  for (const std::int64_t t : divisors(heads, heads))
    if (accepted([t](ParallelLayout& p) { p.tp = t; })) b.tp.push_back(t);
  for (const std::int64_t e : divisors(b.experts, b.experts))
    if (accepted([e](ParallelLayout& p) { p.ep = e; })) b.ep.push_back(e);
  for (const std::int64_t e : divisors(b.expert_width, 64))
    if (accepted([e](ParallelLayout& p) { p.etp = e; })) b.etp.push_back(e);
  if (b.ep.empty()) b.ep = {1};
  return b;
}

LayoutChoices layout_choices(const ModelSpec& model, const BlockLimits& limits, const SetupFlags& form) {
  const TrainingSetup base = form_setup(form);
  const ParallelLayout& p = base.parallel;
  const std::int64_t L = limits.num_layers;
  LayoutChoices out;
  auto keep = [&](const std::vector<std::int64_t>& candidates, auto&& set) {
    std::vector<std::int64_t> ok;
    for (const std::int64_t v : candidates) {
      TrainingSetup s = base;
      set(s, v);
      if (layout_ok(model, s)) ok.push_back(v);
    }
    return ok;
  };
  std::vector<std::int64_t> all_layers(static_cast<std::size_t>(L + 1));
  std::iota(all_layers.begin(), all_layers.end(), 0);

  out.values.emplace_back("tp", limits.tp);
  out.lines.push_back(fmt::format(
      "TP: {} (divides the heads and MLP widths; divides or is a multiple of the query groups)", listed(limits.tp)));
  out.values.emplace_back("ep", limits.ep);
  if (limits.experts > 0)
    out.lines.push_back(fmt::format("EP: {} (divides {} experts)", listed(limits.ep, 12), limits.experts));
  out.values.emplace_back("etp", limits.etp);
  if (limits.experts > 0)
    out.lines.push_back(
        fmt::format("ETP: {} (divides the expert MLP width {}; up to 64)", listed(limits.etp), limits.expert_width));
  // PP with an even split (the stage counts cleared).
  const auto pp = keep(divisors(L, L), [](TrainingSetup& s, std::int64_t v) {
    s.parallel.pp = v;
    s.parallel.vpp = 1;
    s.pipeline.first_stage_layers.reset();
    s.pipeline.last_stage_layers.reset();
  });
  out.values.emplace_back("pp", pp);
  out.lines.push_back(fmt::format("PP: {} (an even split of {} layers; any PP up to {} with first/last-stage counts)",
                                  listed(pp), L, L));
  std::vector<std::int64_t> vpp{1}, first, last;
  if (p.pp > 1) {
    vpp = keep(divisors(L, L), [](TrainingSetup& s, std::int64_t v) { s.parallel.vpp = v; });
    out.lines.push_back(fmt::format("VPP: {}", listed(vpp)));
    first = keep(all_layers, [](TrainingSetup& s, std::int64_t v) { s.pipeline.first_stage_layers = v; });
    last = keep(all_layers, [](TrainingSetup& s, std::int64_t v) { s.pipeline.last_stage_layers = v; });
    out.lines.push_back(fmt::format("first stage: {}; last stage: {} layers", listed(first, 12), listed(last, 12)));
  }
  out.values.emplace_back("vpp", vpp);
  out.values.emplace_back("first", first);
  out.values.emplace_back("last", last);
  const auto cp = keep(divisors(base.seq_length, 1024), [](TrainingSetup& s, std::int64_t v) { s.parallel.cp = v; });
  out.values.emplace_back("cp", cp);
  const bool sp = p.tp > 1 && (!p.sequence_parallel.has_value() || *p.sequence_parallel);
  out.lines.push_back(fmt::format("CP: {} ({} tokens split in 2 x CP chunks{})", listed(cp), base.seq_length,
                                  sp ? ", by TP with sequence parallelism" : ""));
  const std::int64_t dense = p.tp * p.cp * p.pp, expert = effective_etp(p) * p.ep * p.pp;
  const std::int64_t unit = cli::layout_gpu_multiple(p);
  std::vector<std::int64_t> gpus;
  if (unit > 0)
    for (const std::int64_t k : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024})
      gpus.push_back(k * unit);
  out.values.emplace_back("num_gpus", gpus);
  out.lines.push_back(
      fmt::format("GPUs: a multiple of {} (TP x CP x PP = {}, ETP x EP x PP = {})", unit, dense, expert));
  return out;
}

}  // namespace mme::commands
