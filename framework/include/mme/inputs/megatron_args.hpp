// Megatron-LM launch flags as input: a shell-like tokenizer for a pasted launch line or an
// argument file (quotes, comments, line continuations, bash arrays), the flags as a config
// document for the megatron_args adapter, and the training setup they describe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/sdk/training_setup.hpp"

namespace mme {

class MegatronArgs;
enum class ModelFlag : std::uint8_t;  // mme/inputs/megatron_flags.hpp

class MegatronArgs {
 public:
  // A flag and the values that followed it ("--recompute-modules core_attn mlp" has two).
  struct Flag {
    std::string name;  // without the leading "--", '_' normalised to '-'
    std::vector<std::string> values;
    // Why a value is not known, "" when it is: a launch script's `--save $1` without the
    // argument. mme must not read such a value (check_launch_flags).
    std::string unknown = {};
  };

  // Later flags override earlier ones. One call is linear in the flags already set; the
  // parser and from_config() build the list in linear time instead (100 000 flags: docs/reliability.md).
  void set(std::string name, std::vector<std::string> values);
  bool has(std::string_view name) const;
  // The value joined by spaces; nullopt if the flag is absent; "" for a bare switch.
  std::optional<std::string> value(std::string_view name) const;
  // A switch: present without a value, or with a true-ish value ("True", "1").
  bool enabled(std::string_view name) const;
  // The same for a flag of the model (its spelling in megatron_flags.hpp's table).
  bool has(ModelFlag f) const;
  std::optional<std::string> value(ModelFlag f) const;
  bool enabled(ModelFlag f) const;
  const std::vector<Flag>& flags() const { return flags_; }
  // The flags in order, a later one replacing an earlier one of the same name (in linear time,
  // where set() is linear per call), and the run's environment likewise.
  static MegatronArgs from_flags(std::vector<Flag> flags, std::vector<std::pair<std::string, std::string>> env);

  // The GPU count of the run where its launcher says it (torchrun's --nproc_per_node x
  // --nnodes, srun's tasks, an exported WORLD_SIZE): launch_script.hpp. Megatron-LM itself has
  // no flag for it.
  std::optional<std::int64_t> world_size;

  // Environment variables of the run (a launch script's `export NAME=VALUE` lines, --env):
  // later ones override earlier ones.
  void set_env(const std::string& name, const std::string& value);
  const std::vector<std::pair<std::string, std::string>>& env() const { return env_; }

  // {"mme_source": "megatron-args", "args": {"num-layers": "32", "swiglu": true, ...}}
  nlohmann::json to_config() const;
  static MegatronArgs from_config(const nlohmann::json& config);

 private:
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> env_;
};

// The flags a launch line, argument file or launch script hands its entry script, with the run's
// environment and GPU count: read_launch_script (launch_script.hpp) without its checks, so any
// flag name is kept (check_launch_script refuses the ones Megatron-LM lacks). `source` names the
// text in errors (UsageError).
MegatronArgs parse_megatron_args(std::string_view text, const std::string& source);

// True if the config document came from Megatron flags.
bool is_megatron_args_config(const nlohmann::json& config);

// The training setup the flags describe, on top of `base`, with Megatron-LM's own defaults
// where a flag is absent (no sequence parallelism, no distributed optimizer, fp32 unless
// --bf16/--fp16, allgather dispatcher, ...). World size from args.world_size (the launcher's)
// when present. The environment variables (args.env()) are applied after the flags;
// --deterministic-mode sets Megatron-LM's determinism defaults
// (NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, CUBLAS_WORKSPACE_CONFIG=:4096:8) unless env sets them.
TrainingSetup setup_from_megatron_args(const MegatronArgs& args, TrainingSetup base);

// Parses Megatron's --moe-layer-freq: an integer N (every N-th layer, i % N == 0) or a Python
// list expression such as "([0]*3+[1]*5)". Returns one 0/1 per layer. Throws ConfigError.
std::vector<int> parse_moe_layer_freq(const std::string& text, std::int64_t num_layers);

struct ModelSpec;
class Registry;
// The model as the Megatron-LM flags that describe it to the megatron_args adapter (the
// architecture, the vocabulary as NullTokenizer's --vocab-size, dropout, MoE, MLA, MTP):
// setup_to_megatron_args gives the rest of a launch line. Each block's flags follow the
// Megatron-LM module class its layer-memory model in `registry` names (megatron_block()).
// Throws UsageError for what no flag expresses (layers with different attention or MLP widths,
// post-norms, blocks of no Megatron-LM module class).
std::vector<std::string> model_to_megatron_args(const ModelSpec& model, const Registry& registry);
// A whole launch line: the environment as `export` words, the launcher with the GPU count
// (torchrun --nproc_per_node P --nnodes N pretrain_gpt.py), the model's flags, then the setup's at
// their resolved values (setup_to_megatron_args(setup, true)). Only flags Megatron-LM's parser
// has; a setup no flag expresses (a knob without a Megatron-LM flag away from its default,
// LoRA) is a UsageError naming it.
std::vector<std::string> megatron_launch_args(const ModelSpec& model, const TrainingSetup& setup,
                                              const Registry& registry);
// A launch line as a script read_launch_script reads back: `export NAME=VALUE` lines first, the
// launcher up to the entry script on one line, then one flag with its values per line, joined by
// backslash-newline; values single-quoted where a shell would split or expand them.
std::string megatron_args_file_text(const std::vector<std::string>& args);

}  // namespace mme
