// The knobs of CUDA graphs (--cuda-graph-impl, --cuda-graph-modules, --cuda-graph-warmup-steps;
// framework/src/engine/cuda_graphs.cpp models them); part of the setup schema's table
// (setup_schema.hpp), in spec-file order after the communication knobs.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

bool graphs_on(const TrainingSetup& s) { return s.cuda_graph.on(); }

J graph_modules_list(std::uint32_t modules) { return J(split(cuda_graph_modules_to_string(modules), ',')); }
std::uint32_t graph_modules_of(const J& v) {
  if (v.is_string()) return parse_cuda_graph_modules(v.get<std::string>());
  std::string text;
  for (const auto& m : v) text += m.get<std::string>() + ",";
  return parse_cuda_graph_modules(text);
}

// arguments.py validate_args: --enable-cuda-graph and --external-cuda-graph are the deprecated
// spellings of --cuda-graph-impl local and transformer_engine, refused next to it and together;
// --cuda-graph-scope is the deprecated spelling of --cuda-graph-modules.
void megatron_cuda_graph_impl(const MegatronArgs& a, TrainingSetup& s) {
  const SetupKnob& k = *find_knob("cuda-graph-impl");
  if (auto v = given(a, "cuda-graph-impl"))
    s.cuda_graph.impl = must<CudaGraphImpl>(kCudaGraphImplNames, parse_knob_text(k, "--cuda-graph-impl", *v, true));
  const bool enable = a.enabled("enable-cuda-graph"), external = a.enabled("external-cuda-graph");
  if (!enable && !external) return;
  if (s.cuda_graph.impl != CudaGraphImpl::kNone)
    throw UsageError("Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl. (Megatron-LM)");
  if (enable && external)
    throw UsageError("--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same time. (Megatron-LM)");
  s.cuda_graph.impl = enable ? CudaGraphImpl::kLocal : CudaGraphImpl::kTransformerEngine;
}
void megatron_cuda_graph_modules(const MegatronArgs& a, TrainingSetup& s) {
  const auto modules = given(a, "cuda-graph-modules");
  const auto scope = given(a, "cuda-graph-scope");
  if (modules && scope)
    throw UsageError("--cuda-graph-scope and --cuda-graph-modules cannot be used together. (Megatron-LM)");
  if (modules) s.cuda_graph.modules = parse_cuda_graph_modules(*modules);
  if (scope) s.cuda_graph.modules = parse_cuda_graph_modules(*scope);
}

}  // namespace

void add_graph_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "cuda-graph-impl",
       .kind = K::kEnum,
       .flag = "cuda-graph-impl",
       .help = "per-layer CUDA graphs: none (default) | transformer_engine | local",
       .doc_value = "I",
       .doc = "per-layer CUDA graphs: `none`, `transformer_engine` (TE `make_graphed_callables`, captured after "
              "`--cuda-graph-warmup-steps`) or `local` (Megatron's CudaGraphManager); `full_iteration` is refused "
              "(not modelled)",
       .doc_default = "none",
       .table = kCudaGraphImplNames,
       .values = {"none", "transformer_engine", "local"},
       .refused = {{"full_iteration",
                    "{}: full_iteration (one CUDA graph for the whole forward and backward) is not modelled; "
                    "per-layer graphs (transformer_engine, local) are"}},
       .megatron = {"cuda-graph-impl"},
       .megatron_read = megatron_cuda_graph_impl,
       .megatron_extra = {"enable-cuda-graph", "external-cuda-graph"},
       .spec_section = "training",
       .spec_name = "cuda_graph_impl",
       .spec_default = "none",
       .spec_summary = "per-layer CUDA graphs: none, transformer_engine or local",
       .json_key = "cuda_graph_impl",
       .json_when = graphs_on,
       .args_when = graphs_on,
       .get = [](const S& s) { return name(kCudaGraphImplNames, s.cuda_graph.impl); },
       .set = [](S& s, const J& v) { s.cuda_graph.impl = must<CudaGraphImpl>(kCudaGraphImplNames, v); }});
  add({.id = "cuda-graph-modules",
       .kind = K::kModules,
       .flag = "cuda-graph-modules",
       .help = "what the CUDA graphs capture, comma separated: attn, mlp, moe, moe_router, moe_preprocess "
               "(default full: the whole layer)",
       .doc_value = "LIST",
       .doc = "what the per-layer CUDA graphs capture, comma separated: `attn`, `mlp` (dense layers), `moe` "
              "(drop-and-pad MoE), `moe_router`, `moe_preprocess` (with `moe_router`); `full` (the default) is the "
              "whole layer",
       .doc_default = "full",
       .parse_modules = parse_cuda_graph_modules,
       .modules_text = cuda_graph_modules_to_string,
       .modules_may_be_empty = true,
       .megatron = {"cuda-graph-modules"},
       .megatron_read = megatron_cuda_graph_modules,
       .megatron_extra = {"cuda-graph-scope"},
       .spec_section = "training",
       .spec_name = "cuda_graph_modules",
       .spec_default = "[] (the whole layer)",
       .spec_summary = "what the CUDA graphs capture: attn, mlp, moe, moe_router, moe_preprocess",
       .spec_get = [](const S& s) { return s.cuda_graph.on() ? graph_modules_list(s.cuda_graph.modules) : J(); },
       .json_key = "cuda_graph_modules",
       .json_when = graphs_on,
       .args_when = [](const S& s) { return s.cuda_graph.on() && s.cuda_graph.modules != 0; },
       .get = [](const S& s) { return J(cuda_graph_modules_to_string(s.cuda_graph.modules)); },
       .set = [](S& s, const J& v) { s.cuda_graph.modules = v.is_null() ? 0 : graph_modules_of(v); }});
  add({.id = "cuda-graph-warmup-steps",
       .kind = K::kInt,
       .flag = "cuda-graph-warmup-steps",
       .help = "training steps run eagerly before the CUDA graphs are captured (default 3)",
       .doc_value = "N",
       .doc = "training steps run eagerly before the graphs are captured (their peak counts: 0 makes the capture the "
              "first thing the run allocates activations for)",
       .doc_default = "3",
       .min = 0,
       .max = kMaxWorldSize,
       .megatron = {"cuda-graph-warmup-steps"},
       .spec_section = "training",
       .spec_name = "cuda_graph_warmup_steps",
       .spec_default = "3",
       .spec_summary = "steps run eagerly before the CUDA graphs are captured",
       .json_key = "cuda_graph_warmup_steps",
       .json_when = graphs_on,
       .args_when = [](const S& s) { return s.cuda_graph.on() && s.cuda_graph.warmup_steps != 3; },
       .get = [](const S& s) { return J(s.cuda_graph.warmup_steps); },
       .set = [](S& s, const J& v) { s.cuda_graph.warmup_steps = as_int(v); }});
}

}  // namespace mme::setup_knobs_detail
