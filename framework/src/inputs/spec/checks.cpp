// The guide's constraints on the final model and setup of a spec (check_spec_layout).
#include <fmt/core.h>

#include "mme/inputs/spec_file.hpp"
#include "mme/sdk/error.hpp"

#include "spec_internal.hpp"

namespace mme {

using namespace spec_detail;

void check_spec_layout(const SpecFile* spec, const ModelSpec& model, const TrainingSetup& s) {
  // Where a setup value came from: the file (with its line), the command line, or the default.
  auto where = [&](const std::string& key) -> std::string {
    if (!spec) return key;
    const FieldDef& f = def(key);
    const bool same = !has_setup_value(f) || setup_value(f, spec->setup) == setup_value(f, s);
    const int line = spec->line_of(key);
    if (line > 0 && same) return fmt::format("{}:{}: {}", spec->path, line, key);
    if (!same && *f.flag) return fmt::format("{}: {} (--{} on the command line)", spec->path, key, f.flag);
    return fmt::format("{}: {} (the default)", spec->path, key);
  };
  // Where a model value came from: the spec's model section, or the model.
  auto model_value = [&](const std::string& field) -> std::string {
    if (spec && spec->has_model) {
      const int line = spec->line_of("model." + field);
      if (line > 0) return fmt::format("on line {}", line);
    }
    return fmt::format("of {}", model.name);
  };
  auto fail = [](const std::string& msg) { throw LayoutError(msg); };

  const auto& p = s.parallel;
  const std::int64_t etp = effective_etp(p);
  // Sizes that are not positive are resolve_setup's to report (naming the flag).
  if (p.tp <= 0 || p.pp <= 0 || p.cp <= 0 || p.ep <= 0 || etp <= 0 || p.world_size <= 0) return;
  bool any_moe = false;
  for (const auto& l : model.layers) any_moe = any_moe || l.mlp.num_experts > 0;

  // world_size = pp x tp x cp x dp
  using LD = long double;
  const LD attn = static_cast<LD>(p.pp) * static_cast<LD>(p.tp) * static_cast<LD>(p.cp);
  if (attn > static_cast<LD>(p.world_size) || p.world_size % (p.pp * p.tp * p.cp) != 0)
    fail(
        fmt::format("{}: must satisfy the parallelism constraint world_size = pp x tp x cp x dp, and {} is not "
                    "divisible by pp x tp x cp = {} x {} x {} = {}",
                    where("infrastructure.world_size"), p.world_size, p.pp, p.tp, p.cp, static_cast<double>(attn)));
  // world_size = pp x ep x etp x edp
  const LD moe = static_cast<LD>(p.pp) * static_cast<LD>(p.ep) * static_cast<LD>(etp);
  if (moe > static_cast<LD>(p.world_size) || p.world_size % (p.pp * p.ep * etp) != 0)
    fail(
        fmt::format("{}: must satisfy the parallelism constraint world_size = pp x ep x etp x edp, and {} is not "
                    "divisible by pp x ep x etp = {} x {} x {} = {}",
                    where("infrastructure.world_size"), p.world_size, p.pp, p.ep, etp, static_cast<double>(moe)));
  // num_experts must be divisible by expert_model_parallel_size
  if (any_moe) {
    for (const auto& l : model.layers)
      if (l.mlp.num_experts > 0 && l.mlp.num_experts % p.ep != 0)
        fail(fmt::format(
            "{}: num_experts must be divisible by expert_model_parallel_size ({} experts {}, "
            "expert_model_parallel_size {})",
            where("parallelism.expert_model_parallel_size"), l.mlp.num_experts, model_value("num_experts"), p.ep));
  } else if (p.ep > 1) {
    fail(fmt::format("{}: {} needs a mixture-of-experts model, and {} has no experts",
                     where("parallelism.expert_model_parallel_size"), p.ep, model.name));
  }
  // seq_length must be <= max_position_embeddings
  if (model.max_position_embeddings > 0 && s.seq_length > model.max_position_embeddings)
    fail(fmt::format("{}: must be <= max_position_embeddings (seq_length {}, max_position_embeddings {} {})",
                     where("training.seq_length"), s.seq_length, model.max_position_embeddings,
                     model_value("max_position_embeddings")));
  // Heads by TP (Megatron splits whole heads and query groups).
  for (const auto& l : model.layers) {
    const auto& a = l.attention;
    if (a.num_heads % p.tp != 0)
      fail(fmt::format(
          "{}: num_attention_heads must be divisible by tensor_model_parallel_size ({} heads {}, "
          "tensor_model_parallel_size {})",
          where("parallelism.tensor_model_parallel_size"), a.num_heads, model_value("num_attention_heads"), p.tp));
    // Only attention with fewer KV heads than heads (GQA) can fail here: MLA has one per head.
    // transformer_config.py: the groups a multiple or a divisor of TP (attention.py keeps one
    // group's K and V per rank when TP is the larger).
    if (a.num_query_groups != a.num_heads && a.num_query_groups % p.tp != 0 && p.tp % a.num_query_groups != 0)
      fail(fmt::format(
          "{}: num_query_groups must be a multiple or a divisor of tensor_model_parallel_size ({} query groups "
          "{}, tensor_model_parallel_size {})",
          where("parallelism.tensor_model_parallel_size"), a.num_query_groups, model_value("num_query_groups"), p.tp));
  }
  // Uneven pipelines need num_layers_in_first/last_pipeline_stage.
  const auto& pl = s.pipeline;
  if (p.pp > 1 && !pl.first_stage_layers && !pl.last_stage_layers && pl.layout.empty() && !pl.account_for_embedding &&
      !pl.account_for_loss && model.num_layers % p.pp != 0)
    fail(fmt::format(
        "{}: num_layers ({} {}) is not evenly divisible by pipeline_model_parallel_size ({}); set "
        "num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage",
        where("parallelism.pipeline_model_parallel_size"), model.num_layers, model_value("num_layers"), p.pp));
  // Sequence parallelism requires tensor_model_parallel_size > 1.
  if (p.sequence_parallel.value_or(false) && p.tp == 1)
    fail(fmt::format("{}: requires tensor_model_parallel_size > 1 (tensor_model_parallel_size is 1)",
                     where("training.sequence_parallel")));
  // Megatron-LM: MoE with TP needs sequence parallelism.
  if (any_moe && p.tp > 1 && p.sequence_parallel.has_value() && !*p.sequence_parallel)
    fail(
        fmt::format("{}: Megatron-LM requires sequence parallelism when MoE and tensor parallelism are combined "
                    "(tensor_model_parallel_size {}); set sequence_parallel: true",
                    where("training.sequence_parallel"), p.tp));
}

}  // namespace mme
