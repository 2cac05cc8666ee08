// The knobs of offloading to the host: HybridDeviceOptimizer's stream overlap, TE's layer
// offload (--cpu-offloading) and fine-grained activation offloading; part of the setup schema's
// table (setup_schema.hpp), in spec-file order after the optimizer and recompute knobs.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

// The offload settings appear in the JSON `setup` block once one of them is given.
bool offload_given(const TrainingSetup& s) {
  const ActivationOffloadSettings d;
  const auto& o = s.activation_offload;
  return o.cpu_offloading || o.cpu_offloading_num_layers != d.cpu_offloading_num_layers ||
         o.cpu_offloading_activations != d.cpu_offloading_activations ||
         o.cpu_offloading_weights != d.cpu_offloading_weights || o.fine_grained || o.modules != 0 ||
         o.min_tensor_size != d.min_tensor_size || o.fraction != d.fraction ||
         o.delta_bytes_across_pp_ranks != d.delta_bytes_across_pp_ranks;
}

J offload_modules_list(std::uint32_t modules) { return J(split(offload_modules_to_string(modules), ',')); }
std::uint32_t offload_modules_of(const J& v) {
  if (v.is_string()) return parse_offload_modules(v.get<std::string>());
  std::string text;
  for (const auto& m : v) text += m.get<std::string>() + ",";
  return parse_offload_modules(text);
}

// mme flags: --offload-modules turns fine-grained offloading on, as --recompute-modules turns
// selective recompute on.
void mme_offload_modules(TrainingSetup& s, const J& v, const MmeFlags&) {
  s.activation_offload.modules = offload_modules_of(v);
  s.activation_offload.fine_grained = true;
}

}  // namespace

void add_offload_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "overlap-cpu-optimizer-d2h-h2d",
       .kind = K::kBool,
       .flag = "overlap-cpu-optimizer-d2h-h2d",
       .help = "with optimizer CPU offload: gradient and parameter copies on their own streams (no GPU memory)",
       .doc = "with optimizer CPU offload: HybridDeviceOptimizer's gradient and parameter copies on their own "
              "streams, one host optimizer per parameter (no GPU memory of its own)",
       .megatron = {"overlap-cpu-optimizer-d2h-h2d"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "overlap_cpu_optimizer_d2h_h2d",
       .spec_default = "false",
       .spec_summary = "optimizer CPU offload: copies on their own streams (no GPU memory)",
       .json_key = "overlap_cpu_optimizer_d2h_h2d",
       .json_when = [](const S& s) { return s.optimizer.overlap_cpu_d2h_h2d || s.optimizer.cpu_offload_fraction > 0; },
       .get = [](const S& s) { return J(s.optimizer.overlap_cpu_d2h_h2d); },
       .set = [](S& s, const J& v) { s.optimizer.overlap_cpu_d2h_h2d = v.get<bool>(); }});
  add({.id = "cpu-offloading",
       .kind = K::kBool,
       .flag = "cpu-offloading",
       .help = "TE's activation offloading of the first --cpu-offloading-num-layers decoder layers",
       .doc = "Transformer Engine's activation offloading of the first `--cpu-offloading-num-layers` decoder layers "
              "(on when that count is positive; needs `--pp 1`, no recompute)",
       // arguments.py validate_args: `if args.cpu_offloading_num_layers > 0: args.cpu_offloading = True`;
       // Megatron-LM has no flag of its own for it.
       .megatron_read =
           [](const MegatronArgs& a, S& s) {
             const auto v = a.value("cpu-offloading-num-layers");
             s.activation_offload.cpu_offloading = v && v->find_first_not_of("0") != std::string::npos;
           },
       .megatron_extra = {"cpu-offloading-num-layers"},
       .spec_section = "training",
       .spec_name = "cpu_offloading",
       .spec_default = "false",
       .spec_summary = "TE's activation offloading of the first cpu_offloading_num_layers decoder layers",
       .json_key = "cpu_offloading",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.cpu_offloading); },
       .set = [](S& s, const J& v) { s.activation_offload.cpu_offloading = v.get<bool>(); },
       .why_not = "Megatron-LM has no flag: --cpu-offloading-num-layers > 0 turns it on (arguments.py)"});
  add({.id = "cpu-offloading-num-layers",
       .kind = K::kInt,
       .flag = "cpu-offloading-num-layers",
       .help = "decoder layers whose saved tensors TE offloads to the host (> 0 turns --cpu-offloading on)",
       .doc_value = "N",
       .doc = "decoder layers, from the first, whose saved tensors Transformer Engine offloads to the host (> 0 "
              "turns `--cpu-offloading` on; fewer than the model's layers)",
       .doc_default = "0",
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"cpu-offloading-num-layers"},
       .spec_section = "training",
       .spec_name = "cpu_offloading_num_layers",
       .spec_default = "0",
       .spec_summary = "decoder layers, from the first, TE offloads to the host (> 0 turns cpu_offloading on)",
       .json_key = "cpu_offloading_num_layers",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.cpu_offloading_num_layers); },
       .set = [](S& s, const J& v) { s.activation_offload.cpu_offloading_num_layers = as_int(v); }});
  add({.id = "cpu-offloading-activations",
       .kind = K::kBool,
       .off_flag = "no-cpu-offloading-activations",
       .off_help = "--cpu-offloading moves no activations (TransformerConfig.cpu_offloading_activations false)",
       .off_doc = "`--cpu-offloading` moves no activations (`cpu_offloading_activations` false; weight offloading "
                  "has no effect in TE)",
       .spec_section = "training",
       .spec_name = "cpu_offloading_activations",
       .spec_default = "true",
       .spec_summary = "cpu_offloading moves the activations (false: nothing moves)",
       .json_key = "cpu_offloading_activations",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.cpu_offloading_activations); },
       .set = [](S& s, const J& v) { s.activation_offload.cpu_offloading_activations = v.get<bool>(); },
       .why_not = "no Megatron-LM flag (arguments.py lists cpu_offloading_activations among the fields without one)"});
  add({.id = "cpu-offloading-weights",
       .kind = K::kBool,
       .flag = "cpu-offloading-weights",
       .help = "TransformerConfig.cpu_offloading_weights (deprecated in TE: no effect)",
       .doc = "`cpu_offloading_weights` (deprecated in Transformer Engine: no effect on memory)",
       .spec_section = "training",
       .spec_name = "cpu_offloading_weights",
       .spec_default = "false",
       .spec_summary = "cpu_offloading_weights (deprecated in TE: no effect)",
       .json_key = "cpu_offloading_weights",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.cpu_offloading_weights); },
       .set = [](S& s, const J& v) { s.activation_offload.cpu_offloading_weights = v.get<bool>(); },
       .why_not = "no Megatron-LM flag (arguments.py lists cpu_offloading_weights among the fields without one)"});
  add({.id = "fine-grained-activation-offloading",
       .kind = K::kBool,
       .flag = "fine-grained-activation-offloading",
       .help = "offload the saved tensors of the --offload-modules groups of every layer to the host",
       .doc = "offload the tensors the `--offload-modules` groups of every layer save to the host (needs the "
              "Transformer Engine implementation)",
       .megatron = {"fine-grained-activation-offloading"},
       .spec_section = "training",
       .spec_name = "fine_grained_activation_offloading",
       .spec_default = "false",
       .spec_summary = "offload the tensors the offload_modules groups save to the host",
       .json_key = "fine_grained_activation_offloading",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.fine_grained); },
       .set = [](S& s, const J& v) { s.activation_offload.fine_grained = v.get<bool>(); }});
  add({.id = "offload-modules",
       .kind = K::kModules,
       .flag = "offload-modules",
       .help = "fine-grained offload groups, comma separated: attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, "
               "expert_fc1, moe_act (implies --fine-grained-activation-offloading)",
       .doc_value = "LIST",
       .doc = "fine-grained offload groups, comma separated: `attn_norm`, `qkv_linear`, `core_attn`, `attn_proj` "
              "(with `core_attn`), `mlp_norm`, `expert_fc1`, `moe_act`; `gdp_qkv` has no layer here and "
              "`fused_group_mlp` is refused (implies `--fine-grained-activation-offloading`)",
       .doc_default = "none",
       .parse_modules = parse_offload_modules,
       .modules_text = offload_modules_to_string,
       .megatron = {"offload-modules"},
       .spec_section = "training",
       .spec_name = "offload_modules",
       .spec_default = "null",
       .spec_summary = "fine-grained offload groups: attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, "
                       "expert_fc1, moe_act",
       .spec_get =
           [](const S& s) {
             return s.activation_offload.modules ? offload_modules_list(s.activation_offload.modules) : J();
           },
       .json_key = "offload_modules",
       .json_when = offload_given,
       .get = [](const S& s) { return J(offload_modules_to_string(s.activation_offload.modules)); },
       .set = [](S& s, const J& v) { s.activation_offload.modules = v.is_null() ? 0 : offload_modules_of(v); },
       .mme_set = mme_offload_modules});
  add({.id = "min-offloaded-tensor-size",
       .kind = K::kInt,
       .flag = "min-offloaded-tensor-size",
       .help = "fine-grained offloading moves tensors of at least this many elements (default 1048576)",
       .doc_value = "N",
       .doc = "fine-grained offloading moves only tensors of at least N elements",
       .doc_default = "1048576",
       .min = 0,
       .max = kMaxWorldSize,
       .megatron = {"min-offloaded-tensor-size"},
       .spec_section = "training",
       .spec_name = "min_offloaded_tensor_size",
       .spec_default = "1048576",
       .spec_summary = "fine-grained offloading moves only tensors of at least this many elements",
       .json_key = "min_offloaded_tensor_size",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.min_tensor_size); },
       .set = [](S& s, const J& v) { s.activation_offload.min_tensor_size = as_int(v); }});
  add({.id = "activation-offload-fraction",
       .kind = K::kNumber,
       .flag = "activation-offload-fraction",
       .help = "share of each chunk's offload groups that go to the host, the earliest first (default 1)",
       .doc_value = "F",
       .doc = "share of each model chunk's offload groups that go to the host, the earliest in the forward first, "
              "0 to 1",
       .doc_default = "1",
       .lo = kActivationOffloadFractionRange.lo,
       .hi = kActivationOffloadFractionRange.hi,
       .megatron = {"activation-offload-fraction"},
       .spec_section = "training",
       .spec_name = "activation_offload_fraction",
       .spec_default = "1.0",
       .spec_summary = "share of each chunk's offload groups that go to the host",
       .json_key = "activation_offload_fraction",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.fraction); },
       .set = [](S& s, const J& v) { s.activation_offload.fraction = v.get<double>(); }});
  add({.id = "delta-offload-bytes-across-pp-ranks",
       .kind = K::kInt,
       .flag = "delta-offload-bytes-across-pp-ranks",
       .help = "pipeline rank r keeps r x this many bytes of offload groups on the GPU (default 0)",
       .doc_value = "B",
       .doc = "pipeline rank r keeps r x B bytes of its offload groups on the GPU",
       .doc_default = "0",
       .min = 0,
       .max = kMaxWorldSize,
       .megatron = {"delta-offload-bytes-across-pp-ranks"},
       .spec_section = "training",
       .spec_name = "delta_offload_bytes_across_pp_ranks",
       .spec_default = "0",
       .spec_summary = "pipeline rank r keeps r x this many bytes of offload groups on the GPU",
       .json_key = "delta_offload_bytes_across_pp_ranks",
       .json_when = offload_given,
       .get = [](const S& s) { return J(s.activation_offload.delta_bytes_across_pp_ranks); },
       .set = [](S& s, const J& v) { s.activation_offload.delta_bytes_across_pp_ranks = as_int(v); }});
}

}  // namespace mme::setup_knobs_detail
