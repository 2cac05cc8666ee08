// The knobs of LoRA as Megatron-Bridge runs it (TrainingSetup::lora): part of the setup schema's
// table (setup_schema.hpp). Megatron-LM has no launch flag for LoRA; spec files take Bridge's own
// LoRA dataclass fields (megatron/bridge/peft/lora.py) in a section `peft`.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

constexpr const char* kNoMegatron =
    "Megatron-LM: LoRA is Megatron-Bridge's (peft/lora.py), configured in Python; Megatron-LM has no flag for it";

bool lora_on(const TrainingSetup& s) { return s.lora.on(); }

J targets_list(std::uint32_t targets) { return J(split(lora_targets_to_string(targets), ',')); }
std::uint32_t targets_of(const J& v) {
  if (v.is_string()) return parse_lora_targets(v.get<std::string>());
  std::string text;
  for (const auto& m : v) text += m.get<std::string>() + ",";
  return parse_lora_targets(text);
}

// A LoRA detail on the mme command line needs LoRA: --lora-rank, or a spec file's peft.dim.
template <void (*Set)(TrainingSetup&, const J&)>
void needs_rank(TrainingSetup& s, const J& v, const MmeFlags& flags) {
  if (!s.lora.on() && !flags.value("lora-rank"))
    throw UsageError("the --lora-* settings need --lora-rank (LoRA's rank, Megatron-Bridge's LoRA.dim)");
  Set(s, v);
}

void set_alpha(TrainingSetup& s, const J& v) { s.lora.alpha = v.get<double>(); }
void set_targets(TrainingSetup& s, const J& v) { s.lora.targets = v.is_null() ? kLoraDefaultTargets : targets_of(v); }
void set_dropout(TrainingSetup& s, const J& v) { s.lora.dropout = v.get<double>(); }
void set_position(TrainingSetup& s, const J& v) {
  s.lora.dropout_position = must<LoraDropoutPosition>(kLoraDropoutPositionNames, v);
}
void set_dtype(TrainingSetup& s, const J& v) { s.lora.dtype = value_of<DType>(kDTypeNames, v); }
void set_a_init(TrainingSetup& s, const J& v) { s.lora.a_init = v.get<std::string>(); }
void set_b_init(TrainingSetup& s, const J& v) { s.lora.b_init = v.get<std::string>(); }
void set_a2a(TrainingSetup& s, const J& v) { s.lora.a2a_experimental = v.get<bool>(); }

// ParallelLinearAdapter's init methods (_get_init_fn): xavier, normal, kaiming, zero.
void check_init(const std::string& text, std::string_view flag) {
  for (const char* name : {"xavier", "normal", "kaiming", "zero"})
    if (text == name) return;
  throw UsageError(fmt::format("{}: unknown init method '{}' (xavier, normal, kaiming, zero)", flag, text));
}

}  // namespace

void add_lora_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "lora-rank",
       .kind = K::kInt,
       .flag = "lora-rank",
       .help = "LoRA as Megatron-Bridge runs it: the adapters' rank; the base weights are frozen",
       .doc_value = "R",
       .doc = "LoRA as Megatron-Bridge runs it (`LoRA.dim`): adapters of rank R beside the target linears, the base "
              "weights frozen (no gradients, no optimizer states; docs/memory-model.md, \"LoRA\")",
       .doc_default = "none",
       .min = 1,
       .max = kMaxParallelSize,
       .spec_section = "peft",
       .spec_name = "dim",
       .spec_default = "null (no LoRA)",
       .spec_summary = "LoRA's rank (Megatron-Bridge LoRA.dim); given, it turns LoRA on",
       .spec_get = [](const S& s) { return s.lora.on() ? J(s.lora.rank) : J(); },
       .json_key = "lora_rank",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.rank); },
       .set = [](S& s, const J& v) { s.lora.rank = v.is_null() ? 0 : as_int(v); },
       .why_not = kNoMegatron});
  add({.id = "lora-alpha",
       .kind = K::kNumber,
       .flag = "lora-alpha",
       .help = "LoRA's alpha: the adapter output's scale alpha / rank (no memory effect; default 32)",
       .doc_value = "A",
       .doc = "LoRA's alpha (`LoRA.alpha`): the adapter output is scaled by alpha / rank; no memory effect",
       .doc_default = "32",
       .lo = kLoraAlphaRange.lo,
       .hi = kLoraAlphaRange.hi,
       .lo_open = kLoraAlphaRange.lo_open,
       .spec_section = "peft",
       .spec_name = "alpha",
       .spec_default = "32",
       .spec_summary = "LoRA's scale alpha / dim (no memory effect)",
       .json_key = "lora_alpha",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.alpha); },
       .set = set_alpha,
       .mme_set = needs_rank<set_alpha>,
       .why_not = kNoMegatron});
  add({.id = "lora-target-modules",
       .kind = K::kModules,
       .flag = "lora-target-modules",
       .help = "linears LoRA wraps, comma separated: linear_qkv, linear_proj, linear_fc1, linear_fc2 (default all)",
       .doc_value = "LIST",
       .doc = "the linears LoRA wraps (`LoRA.target_modules`), comma separated: `linear_qkv`, `linear_proj`, "
              "`linear_fc1`, `linear_fc2` (on MoE layers the shared and every routed expert's); each must occur "
              "in the model",
       .doc_default = "all four",
       .parse_modules = parse_lora_targets,
       .modules_text = lora_targets_to_string,
       .spec_section = "peft",
       .spec_name = "target_modules",
       .spec_default = "[linear_qkv, linear_proj, linear_fc1, linear_fc2]",
       .spec_summary = "the linears LoRA wraps",
       .spec_get = [](const S& s) { return targets_list(s.lora.targets); },
       .json_key = "lora_target_modules",
       .json_when = lora_on,
       .get = [](const S& s) { return J(lora_targets_to_string(s.lora.targets)); },
       .set = set_targets,
       .mme_set = needs_rank<set_targets>,
       .why_not = kNoMegatron});
  add({.id = "lora-dropout",
       .kind = K::kNumber,
       .flag = "lora-dropout",
       .help = "LoRA adapter dropout rate (default 0): its output and 1-byte mask are kept",
       .doc_value = "F",
       .doc = "the adapters' dropout rate (`LoRA.dropout`, at least 0, below 1): the dropout's output and 1-byte "
              "mask are kept for backward",
       .doc_default = "0",
       .lo = kDropoutRange.lo,
       .hi = kDropoutRange.hi,
       .hi_open = kDropoutRange.hi_open,
       .spec_section = "peft",
       .spec_name = "dropout",
       .spec_default = "0.0",
       .spec_summary = "the adapters' dropout rate",
       .json_key = "lora_dropout",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.dropout); },
       .set = set_dropout,
       .mme_set = needs_rank<set_dropout>,
       .why_not = kNoMegatron});
  add({.id = "lora-dropout-position",
       .kind = K::kEnum,
       .flag = "lora-dropout-position",
       .help = "where the adapter dropout runs: pre (on its input, default) | post (on its output)",
       .doc_value = "P",
       .doc = "where the adapter dropout runs (`LoRA.dropout_position`): `pre` (its input) or `post` (its output)",
       .doc_default = "pre",
       .table = kLoraDropoutPositionNames,
       .values = {"pre", "post"},
       .spec_section = "peft",
       .spec_name = "dropout_position",
       .spec_default = "pre",
       .spec_summary = "the adapter dropout on its input (pre) or output (post)",
       .json_key = "lora_dropout_position",
       .json_when = lora_on,
       .get = [](const S& s) { return name(kLoraDropoutPositionNames, s.lora.dropout_position); },
       .set = set_position,
       .mme_set = needs_rank<set_position>,
       .why_not = kNoMegatron});
  add({.id = "lora-dtype",
       .kind = K::kEnum,
       .flag = "lora-dtype",
       .help = "the adapters' parameter dtype: bf16 | fp16 | fp32 (default: the parameters')",
       .doc_value = "T",
       .doc = "the adapters' parameter dtype (`LoRA.lora_dtype`): `bf16`, `fp16`, `fp32`",
       .doc_default = "the parameters'",
       .table = kDTypeNames,
       .values = {"bf16", "fp16", "fp32"},
       .null_name = "auto",
       .spec_section = "peft",
       .spec_name = "lora_dtype",
       .spec_default = "null (params_dtype)",
       .spec_summary = "the adapters' parameter dtype",
       .json_key = "lora_dtype",
       .json_when = lora_on,
       .get = [](const S& s) { return opt_dtype(s.lora.dtype); },
       .set = set_dtype,
       .mme_set = needs_rank<set_dtype>,
       .why_not = kNoMegatron});
  add({.id = "lora-a-init-method",
       .kind = K::kString,
       .flag = "lora-a-init-method",
       .help = "linear_in's init method: xavier (default) | normal | kaiming | zero (no memory effect)",
       .doc_value = "M",
       .doc = "linear_in's init method (`LoRA.lora_A_init_method`): `xavier`, `normal`, `kaiming`, `zero`; no "
              "memory effect",
       .doc_default = "xavier",
       .check = check_init,
       .spec_section = "peft",
       .spec_name = "lora_A_init_method",
       .spec_default = "xavier",
       .spec_summary = "linear_in's init method (no memory effect)",
       .json_key = "lora_a_init_method",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.a_init); },
       .set = set_a_init,
       .mme_set = needs_rank<set_a_init>,
       .why_not = kNoMegatron});
  add({.id = "lora-b-init-method",
       .kind = K::kString,
       .flag = "lora-b-init-method",
       .help = "linear_out's init method: zero (default) | xavier | normal | kaiming (no memory effect)",
       .doc_value = "M",
       .doc = "linear_out's init method (`LoRA.lora_B_init_method`): `zero`, `xavier`, `normal`, `kaiming`; no "
              "memory effect",
       .doc_default = "zero",
       .check = check_init,
       .spec_section = "peft",
       .spec_name = "lora_B_init_method",
       .spec_default = "zero",
       .spec_summary = "linear_out's init method (no memory effect)",
       .json_key = "lora_b_init_method",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.b_init); },
       .set = set_b_init,
       .mme_set = needs_rank<set_b_init>,
       .why_not = kNoMegatron});
  add({.id = "lora-a2a-experimental",
       .kind = K::kBool,
       .flag = "lora-a2a-experimental",
       .help = "LoRA.a2a_experimental (accepted; not modelled: the estimate follows the default path)",
       .doc = "`LoRA.a2a_experimental`: accepted, not modelled (the estimate follows the default path and says so)",
       .spec_section = "peft",
       .spec_name = "a2a_experimental",
       .spec_default = "false",
       .spec_summary = "the adapters' all-to-all path (accepted, not modelled)",
       .json_key = "lora_a2a_experimental",
       .json_when = lora_on,
       .get = [](const S& s) { return J(s.lora.a2a_experimental); },
       .set = set_a2a,
       .mme_set = needs_rank<set_a2a>,
       .why_not = kNoMegatron});
}

}  // namespace mme::setup_knobs_detail
