// Unknown names: the did-you-mean of field and section names (edit distance, and the names
// people bring from Hugging Face configs, Megatron flags or the mme command line).
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include <fmt/core.h>

#include "mme/inputs/spec_file.hpp"

#include "spec_internal.hpp"

namespace mme {
namespace spec_detail {

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Names people bring from Hugging Face configs, Megatron flags or the mme command line.
const std::map<std::string, std::string>& known_aliases() {
  static const std::map<std::string, std::string> m = {
      {"num_hidden_layers", "model.num_layers"},
      {"intermediate_size", "model.ffn_hidden_size"},
      {"num_key_value_heads", "model.num_query_groups"},
      {"head_dim", "model.kv_channels"},
      {"tie_word_embeddings", "model.share_embeddings_and_output_weights"},
      {"untie_embeddings_and_output_weights", "model.share_embeddings_and_output_weights"},
      {"num_moe_experts", "model.num_experts"},
      {"n_routed_experts", "model.num_experts"},
      {"num_experts_per_tok", "model.moe_router_topk"},
      {"moe_intermediate_size", "model.moe_ffn_hidden_size"},
      {"rms_norm_eps", "model.layernorm_epsilon"},
      {"hidden_act", "model.activation_func"},
      {"swiglu", "model.activation_func"},
      {"qk_nope_head_dim", "model.qk_head_dim"},
      {"qk_rope_head_dim", "model.qk_pos_emb_head_dim"},
      {"num_nextn_predict_layers", "model.mtp_num_layers"},
      {"tp", "parallelism.tensor_model_parallel_size"},
      {"pp", "parallelism.pipeline_model_parallel_size"},
      {"ep", "parallelism.expert_model_parallel_size"},
      {"etp", "parallelism.expert_tensor_parallel_size"},
      {"cp", "parallelism.context_parallel_size"},
      {"vpp", "parallelism.virtual_pipeline_model_parallel_size"},
      {"decoder_first_pipeline_num_layers", "parallelism.num_layers_in_first_pipeline_stage"},
      {"decoder_last_pipeline_num_layers", "parallelism.num_layers_in_last_pipeline_stage"},
      {"pipeline_layout", "parallelism.pipeline_model_parallel_layout"},
      {"num_gpus", "infrastructure.world_size"},
      {"gpus", "infrastructure.world_size"},
      {"precision", "precision.params_dtype"},
      {"bf16", "precision.params_dtype"},
      {"fp16", "precision.params_dtype"},
      {"distributed_optimizer", "training.use_distributed_optimizer"},
      {"moe_token_dispatcher", "training.moe_token_dispatcher_type"},
      {"moe_capacity_factor", "training.moe_expert_capacity_factor"},
      {"lora_rank", "peft.dim"},
      {"rank", "peft.dim"},
      {"lora_alpha", "peft.alpha"},
      {"lora_target_modules", "peft.target_modules"},
      {"lora_dropout", "peft.dropout"},
  };
  return m;
}

}  // namespace

std::string section_of_field(std::string_view name) {
  for (const auto& f : field_defs())
    if (name == f.name) return f.section;
  return "";
}

// "unknown field (did you mean 'num_layers'?)" and its variants.
std::string unknown_field_message(const std::string& section, const std::string& key) {
  const std::string home = section_of_field(key);
  if (!home.empty())
    return fmt::format("unknown field in the {} section; {} belongs in the {} section", section, key, home);
  std::string suggestion;
  if (auto it = known_aliases().find(lower(key)); it != known_aliases().end()) suggestion = it->second;
  if (suggestion.empty()) {
    std::vector<std::string> same, all;
    for (const auto& f : field_defs()) {
      all.push_back(std::string(f.section) + "." + f.name);
      if (section == f.section) same.push_back(std::string(f.section) + "." + f.name);
    }
    std::vector<std::string> same_names, all_names;
    for (const auto& s : same) same_names.push_back(s.substr(s.find('.') + 1));
    for (const auto& s : all) all_names.push_back(s.substr(s.find('.') + 1));
    if (auto c = closest_name(key, same_names); !c.empty())
      suggestion = section + "." + c;
    else if (auto c2 = closest_name(key, all_names); !c2.empty())
      suggestion = section_of_field(c2) + "." + c2;
  }
  if (suggestion.empty())
    return fmt::format("unknown field (docs/spec-files.md lists the fields of the {} section)", section);
  const auto dot = suggestion.find('.');
  const std::string s_section = suggestion.substr(0, dot), s_name = suggestion.substr(dot + 1);
  if (s_section == section) return fmt::format("unknown field (did you mean '{}'?)", s_name);
  return fmt::format("unknown field (did you mean '{}' in the {} section?)", s_name, s_section);
}

}  // namespace spec_detail

using spec_detail::edit_distance;

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  for (const auto& c : candidates) {
    // The distance is at least the difference of the lengths: a candidate that far off cannot be
    // suggested, and skipping it keeps a long unknown name (a fuzzer's 47 KB key) from costing
    // its length times every field's.
    const std::size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap > limit) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best_d <= limit ? best : std::string();
}

}  // namespace mme
