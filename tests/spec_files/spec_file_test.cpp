// Spec files in process: the reader (YAML and JSON, lines, unknown fields, types), the guide's
// defaults, examples and constraints, Hugging Face bases with overrides, and the writer.
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>

#include "deepseek_adapter.hpp"
#include "generic_hf_adapter.hpp"
#include "gpt_oss_adapter.hpp"
#include "layer_plugins.hpp"
#include "moonlight_kimi_adapter.hpp"
#include "nemotron_h_adapter.hpp"
#include "qwen_adapter.hpp"
#include "spec_file_adapter.hpp"
#include "test_support.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const Registry& registry() {
  static const std::unique_ptr<Registry> r = [] {
    auto reg = std::make_unique<Registry>();
    auto add = [&](const char* name, void (*fn)(Registrar&)) {
      if (!reg->register_plugin(name, "test", "", fn)) throw std::runtime_error(std::string("cannot register ") + name);
    };
    test::register_layer_plugins(*reg);
    add("adapter_spec_file", plugins::register_spec_file_adapter);
    add("adapter_deepseek", plugins::register_deepseek_adapter);
    add("adapter_moonlight_kimi", plugins::register_moonlight_kimi_adapter);
    add("adapter_qwen", plugins::register_qwen_adapter);
    add("adapter_gpt_oss", plugins::register_gpt_oss_adapter);
    add("adapter_nemotron_h", plugins::register_nemotron_h_adapter);
    add("adapter_generic_hf", plugins::register_generic_hf_adapter);
    return reg;
  }();
  return *r;
}

SourceOptions offline() {
  SourceOptions o;
  o.zoo_dirs = {test::source_dir() / "models"};
  o.allow_network = false;
  return o;
}

// A dense model and a layout, every required field given.
const std::string kBase = R"(model:
  num_layers: 32
  hidden_size: 4096
  num_attention_heads: 32
  ffn_hidden_size: 11008
  vocab_size: 32000
  max_position_embeddings: 4096
parallelism:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
training:
  micro_batch_size: 1
  seq_length: 4096
infrastructure:
  world_size: 8
)";

// The 1-based line of the first occurrence of `needle`.
int line_of(const std::string& text, const std::string& needle) {
  const auto pos = text.find(needle);
  if (pos == std::string::npos) throw std::runtime_error("not in the text: " + needle);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

std::string with(std::string text, const std::string& old, const std::string& replacement) {
  const auto pos = text.find(old);
  if (pos == std::string::npos) throw std::runtime_error("not in the text: " + old);
  return text.replace(pos, old.size(), replacement);
}

SpecFile yaml(const std::string& text) { return parse_spec_text(text, "spec.yaml", SpecFormat::kYaml); }
SpecFile json(const std::string& text) { return parse_spec_text(text, "spec.json", SpecFormat::kJson); }
ModelSpec model_of(const SpecFile& s) { return load_spec_model(s, registry(), offline()); }
Estimate estimate(const ModelSpec& m, const TrainingSetup& s) { return Estimator(m, registry()).run(s); }

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return {};
}

// The message reading `text` (YAML) fails with, from the reader or the adapter.
std::string yaml_error(const std::string& text) {
  return error_of<ConfigError>([&] { (void)model_of(yaml(text)); });
}
std::string layout_error(const std::string& text) {
  return error_of<LayoutError>([&] {
    const SpecFile s = yaml(text);
    check_spec_layout(&s, model_of(s), s.setup);
  });
}

TEST(spec_file, GuideDefaultsFillWhatTheFileLeavesOut) {
  const SpecFile s = yaml(kBase);
  EXPECT_TRUE(s.missing.empty());
  EXPECT_TRUE(s.has_model);
  EXPECT_FALSE(s.hf.has_value());
  const auto& p = s.setup.parallel;
  EXPECT_EQ(p.tp, 2);
  EXPECT_EQ(p.pp, 1);
  EXPECT_EQ(p.etp, 1);  // the guide: expert_tensor_parallel_size defaults to 1 (not TP)
  EXPECT_EQ(p.ep, 1);
  EXPECT_EQ(p.cp, 1);
  EXPECT_EQ(p.vpp, 1);
  EXPECT_EQ(p.world_size, 8);
  ASSERT_TRUE(p.sequence_parallel.has_value());
  EXPECT_FALSE(*p.sequence_parallel);  // the guide: sequence_parallel defaults to false
  EXPECT_TRUE(s.setup.optimizer.distributed);
  EXPECT_EQ(s.setup.precision, Precision::kBF16);
  EXPECT_EQ(s.setup.recompute.granularity, RecomputeGranularity::kNone);
  EXPECT_EQ(s.setup.micro_batch_size, 1);
  EXPECT_EQ(s.setup.seq_length, 4096);
  EXPECT_EQ(s.setup.global_batch_size, 0);

  // The model section's defaults are the spec_file adapter's (plugins/adapters/spec_file/tests).
  const ModelSpec m = model_of(s);
  EXPECT_EQ(m.name, "spec");
  EXPECT_EQ(m.adapter, "spec_file");
  EXPECT_EQ(m.source, "spec.yaml");
  EXPECT_EQ(m.layers.size(), 32u);
}

TEST(spec_file, YamlAndJsonDescribeTheSameSpec) {
  const std::string y = kBase + "precision:\n  params_dtype: fp16\n";
  const std::string j = R"({
  "model": {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "ffn_hidden_size": 11008,
            "vocab_size": 32000, "max_position_embeddings": 4096},
  "parallelism": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1},
  "training": {"micro_batch_size": 1, "seq_length": 4096},
  "infrastructure": {"world_size": 8},
  "precision": {"params_dtype": "fp16"}
})";
  const SpecFile a = yaml(y), b = json(j);
  EXPECT_EQ(a.model_document.at("model"), b.model_document.at("model"));
  EXPECT_EQ(b.setup.precision, Precision::kFP16);
  const ModelSpec ma = model_of(a), mb = model_of(b);
  EXPECT_EQ(ma.layers, mb.layers);
  const Estimate ea = estimate(ma, a.setup), eb = estimate(mb, b.setup);
  EXPECT_EQ(ea.peak().total_bytes, eb.peak().total_bytes);
  EXPECT_EQ(write_spec_json(ma, ea.setup, registry()), write_spec_json(mb, eb.setup, registry()));
  EXPECT_EQ(spec_format_for("x.json", ""), SpecFormat::kJson);
  EXPECT_EQ(spec_format_for("x.yml", "{"), SpecFormat::kYaml);
  EXPECT_EQ(spec_format_for("spec", "  {\"model\": {}}"), SpecFormat::kJson);
  EXPECT_EQ(spec_format_for("spec", "model:\n"), SpecFormat::kYaml);
}

TEST(spec_file, JsonErrorsNameTheLine) {
  const std::string j = "{\n  \"model\": {\n    \"num_layers\": 32,\n    \"hiden_size\": 4096\n  }\n}\n";
  EXPECT_EQ(error_of<ConfigError>([&] { (void)json(j); }),
            "spec.json:4: model.hiden_size: unknown field (did you mean 'hidden_size'?)");
  const std::string k =
      "{\n  \"model\": {\n    \"num_layers\": 32.5\n  },\n  \"training\": {\"seq_length\": \"4k\"}\n}\n";
  EXPECT_EQ(error_of<ConfigError>([&] { (void)json(k); }),
            "spec.json:3: model.num_layers: expected a positive integer, got 32.5");
  const std::string l = "{\n  \"training\": {\n    \"micro_batch_size\": 1,\n    \"seq_length\": \"4k\"}\n}\n";
  EXPECT_EQ(error_of<ConfigError>([&] { (void)json(l); }),
            "spec.json:4: training.seq_length: expected a positive integer, got \"4k\"");
  const std::string dup = "{\"model\": {\"num_layers\": 2,\n \"num_layers\": 3}}";
  EXPECT_EQ(error_of<ConfigError>([&] { (void)json(dup); }),
            "spec.json:2: model.num_layers: given twice (first on line 1)");
  EXPECT_THAT(error_of<ConfigError>([&] { (void)json("{\n  \"model\": {\n    \"num_layers\": x\n  }\n}"); }),
              StartsWith("spec.json:3: not valid JSON: syntax error"));
}

TEST(spec_file, UnknownFieldsSuggestTheClosestName) {
  auto err = [](const std::string& text) { return error_of<ConfigError>([&] { (void)yaml(text); }); };
  EXPECT_EQ(err(with(kBase, "  num_layers: 32", "  num_layer: 32")),
            "spec.yaml:2: model.num_layer: unknown field (did you mean 'num_layers'?)");
  // Hugging Face and command-line names point to the spec's.
  EXPECT_EQ(err(with(kBase, "  num_layers: 32", "  num_hidden_layers: 32")),
            "spec.yaml:2: model.num_hidden_layers: unknown field (did you mean 'num_layers'?)");
  EXPECT_EQ(err(with(kBase, "  tensor_model_parallel_size: 2", "  tp: 2")),
            "spec.yaml:9: parallelism.tp: unknown field (did you mean 'tensor_model_parallel_size'?)");
  // A field of another section.
  const std::string misplaced = with(kBase, "  pipeline_model_parallel_size: 1\n",
                                     "  pipeline_model_parallel_size: 1\n  sequence_parallel: true\n");
  EXPECT_EQ(err(misplaced), fmt::format("spec.yaml:{}: parallelism.sequence_parallel: unknown field in the "
                                        "parallelism section; sequence_parallel belongs in the training section",
                                        line_of(misplaced, "  sequence_parallel")));
  const std::string typo = with(kBase, "  seq_length: 4096\n", "  seq_length: 4096\n  sequence_paralell: true\n");
  EXPECT_EQ(err(typo), fmt::format("spec.yaml:{}: training.sequence_paralell: unknown field (did you mean "
                                   "'sequence_parallel'?)",
                                   line_of(typo, "  sequence_paralell")));
  const std::string elsewhere =
      with(kBase, "  pipeline_model_parallel_size: 1\n", "  pipeline_model_parallel_size: 1\n  world_sizes: 8\n");
  EXPECT_EQ(err(elsewhere), fmt::format("spec.yaml:{}: parallelism.world_sizes: unknown field (did you mean "
                                        "'world_size' in the infrastructure section?)",
                                        line_of(elsewhere, "  world_sizes")));
  EXPECT_EQ(err(with(kBase, "  vocab_size: 32000", "  colour: blue")),
            "spec.yaml:6: model.colour: unknown field (docs/spec-files.md lists the fields of the model section)");
  EXPECT_EQ(err(with(kBase, "model:", "modle:")), "spec.yaml:1: modle: unknown section (did you mean 'model'?)");
  EXPECT_EQ(err(kBase + "num_layers: 4\n"),
            "spec.yaml:16: num_layers: unknown section; num_layers is a field of the model section");
  EXPECT_EQ(err(with(kBase, "  num_layers: 32\n", "  num_layers: 32\n  num_layers: 32\n")),
            "spec.yaml:3: model.num_layers: given twice (first on line 2)");
  EXPECT_EQ(err(kBase + "model:\n  num_layers: 2\n"),
            "spec.yaml:16: model: the section is given twice (first on line 1)");
}

TEST(spec_file, WrongTypesSayWhatWasExpected) {
  auto err = [](const std::string& text) { return error_of<ConfigError>([&] { (void)yaml(text); }); };
  EXPECT_EQ(err(with(kBase, "hidden_size: 4096", "hidden_size: big")),
            "spec.yaml:3: model.hidden_size: expected a positive integer, got \"big\"");
  EXPECT_EQ(err(with(kBase, "hidden_size: 4096", "hidden_size: \"4096\"")),
            "spec.yaml:3: model.hidden_size: expected a positive integer, got \"4096\"");
  EXPECT_EQ(err(with(kBase, "num_layers: 32", "num_layers: [1, 2]")),
            "spec.yaml:2: model.num_layers: expected a positive integer, got a list");
  EXPECT_EQ(err(with(kBase, "num_layers: 32", "num_layers: 2000000")),
            "spec.yaml:2: model.num_layers: 2000000 layers is more than mme accepts (at most 512; the deepest real "
            "models have about 130, and the planner's cost grows with the square of the layer count)");
  EXPECT_EQ(err(with(kBase, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 0")),
            "spec.yaml:9: parallelism.tensor_model_parallel_size: expected a positive integer, got 0");
  EXPECT_EQ(err(with(kBase, "world_size: 8", "world_size: {gpus: 8}")),
            "spec.yaml:15: infrastructure.world_size: expected a positive integer, got a mapping");
  EXPECT_EQ(err(kBase + "  gpu: 80\n"), "spec.yaml:16: infrastructure.gpu: expected a string, got 80");
  EXPECT_EQ(err(with(kBase, "  seq_length: 4096", "  seq_length: 4096\n  use_distributed_optimizer: yes")),
            "spec.yaml:14: training.use_distributed_optimizer: expected true or false, got \"yes\"");
  EXPECT_EQ(err(with(kBase, "  vocab_size: 32000", "  position_embedding_type: rotary")),
            "spec.yaml:6: model.position_embedding_type: expected rope, learned_absolute or none, got \"rotary\"");
  EXPECT_EQ(err(with(kBase, "  vocab_size: 32000", "  hidden_dropout: 1.5")),
            "spec.yaml:6: model.hidden_dropout: expected a number in [0.0, 1.0), got 1.5");
  EXPECT_EQ(err(with(kBase, "  seq_length: 4096",
                     "  seq_length: 4096\n  recompute_granularity: selective\n  recompute_modules: [core_attn, attn]")),
            "spec.yaml:15: training.recompute_modules: unknown recompute module 'attn' (known: core_attn, mlp, moe, "
            "moe_act, layernorm, mla_up_proj, shared_experts)");
  EXPECT_EQ(err("model: Qwen/Qwen3-8B\n"),
            "spec.yaml:1: model: expected a mapping of fields, got \"Qwen/Qwen3-8B\" (write `model: {hf: "
            "Qwen/Qwen3-8B}` to use a Hugging Face model)");
  EXPECT_EQ(
      err("- model\n"),
      "spec.yaml:1: expected the sections model, parallelism, training, infrastructure and precision, got a list");
  EXPECT_EQ(err("# nothing\n"),
            "spec.yaml: the file is empty (expected the sections model, parallelism, training, infrastructure and "
            "precision)");
  EXPECT_THAT(err("model:\n  num_layers: [1, 2\n"), StartsWith("spec.yaml:"));
  EXPECT_THAT(err("model:\n  num_layers: [1, 2\n"), HasSubstr(": not valid YAML: "));
  EXPECT_EQ(err("model: {num_layers: 2}\n---\nmodel: {num_layers: 3}\n"),
            "spec.yaml: holds 2 YAML documents; a spec file is one document");
}

TEST(spec_file, RequiredFields) {
  EXPECT_EQ(yaml_error(with(kBase, "  ffn_hidden_size: 11008\n", "")),
            "spec.yaml:1: model.ffn_hidden_size: required field is missing");
  const SpecFile s = yaml(with(kBase, "  tensor_model_parallel_size: 2\n", ""));
  ASSERT_EQ(s.missing.size(), 1u);
  EXPECT_EQ(s.missing[0].field, "parallelism.tensor_model_parallel_size");
  EXPECT_EQ(s.missing[0].flag, "tp");
  EXPECT_EQ(s.missing[0].message,
            "spec.yaml:8: parallelism.tensor_model_parallel_size: required field is missing (give it in the file or "
            "--tp on the command line)");
  const SpecFile t = yaml(with(kBase, "infrastructure:\n  world_size: 8\n", ""));
  ASSERT_EQ(t.missing.size(), 1u);
  EXPECT_EQ(t.missing[0].message,
            "spec.yaml: infrastructure.world_size: required field is missing (the file has no infrastructure section; "
            "give it in the file or --num-gpus on the command line)");
  const SpecFile setup_only = yaml(with(kBase, kBase.substr(0, kBase.find("parallelism:")), ""));
  EXPECT_FALSE(setup_only.has_model);
  EXPECT_EQ(error_of<ConfigError>([&] { (void)model_of(setup_only); }),
            "spec.yaml: the file has no model section (give one, or MODEL on the command line)");
}

TEST(spec_file, ModelConstraintsUseTheGuidesWording) {
  EXPECT_EQ(yaml_error(with(kBase, "num_attention_heads: 32", "num_attention_heads: 30")),
            "spec.yaml:3: model.hidden_size: must be divisible by num_attention_heads (hidden_size 4096, "
            "num_attention_heads 30); or give kv_channels");
  const std::string groups = with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  num_query_groups: 5\n");
  EXPECT_EQ(yaml_error(groups),
            "spec.yaml:7: model.num_query_groups: must divide num_attention_heads "
            "(num_query_groups 5, num_attention_heads 32)");
  const std::string plain = with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  gated_linear_unit: false\n");
  EXPECT_EQ(yaml_error(plain),
            "spec.yaml:7: model.gated_linear_unit: SwiGLU requires gated_linear_unit: true (activation_func is swiglu "
            "by default; set activation_func: gelu for a plain GELU MLP)");
  const std::string explicit_swiglu = with(
      kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  activation_func: swiglu\n  gated_linear_unit: false\n");
  EXPECT_EQ(yaml_error(explicit_swiglu),
            "spec.yaml:8: model.gated_linear_unit: SwiGLU requires gated_linear_unit: true");
  const std::string dense_topk = with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  moe_router_topk: 2\n");
  EXPECT_EQ(yaml_error(dense_topk), "spec.yaml:7: model.moe_router_topk: only applies to MoE models (set num_experts)");
  const std::string gqa_rank = with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  kv_lora_rank: 512\n");
  EXPECT_EQ(yaml_error(gqa_rank), "spec.yaml:7: model.kv_lora_rank: only applies with multi_latent_attention: true");
  const std::string topk = with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  num_experts: 1\n");
  EXPECT_EQ(yaml_error(topk),
            "spec.yaml:7: model.num_experts: moe_router_topk must not exceed num_experts "
            "(moe_router_topk 2 by default, num_experts 1)");
}

// A MoE variant of kBase: 8 experts, top 2.
std::string moe_base() {
  return with(kBase, "  vocab_size: 32000\n", "  vocab_size: 32000\n  num_experts: 8\n  moe_ffn_hidden_size: 1408\n");
}

TEST(spec_file, LayoutConstraintsUseTheGuidesWording) {
  // world_size = pp x tp x cp x dp
  std::string t = with(kBase, "world_size: 8", "world_size: 64");
  t = with(t, "pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 2\n  context_parallel_size: 3");
  t = with(t, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 4");
  EXPECT_EQ(layout_error(t), fmt::format("spec.yaml:{}: infrastructure.world_size: must satisfy the parallelism "
                                         "constraint world_size = pp x tp x cp x dp, and 64 is not divisible by pp x "
                                         "tp x cp = 2 x 4 x 3 = 24",
                                         line_of(t, "  world_size")));
  // world_size = pp x ep x etp x edp
  std::string m = with(moe_base(), "world_size: 8", "world_size: 64");
  m = with(m, "pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 2\n  expert_model_parallel_size: 3");
  m = with(m, "seq_length: 4096", "seq_length: 4096\n  sequence_parallel: true");
  EXPECT_EQ(layout_error(m), fmt::format("spec.yaml:{}: infrastructure.world_size: must satisfy the parallelism "
                                         "constraint world_size = pp x ep x etp x edp, and 64 is not divisible by pp "
                                         "x ep x etp = 2 x 3 x 1 = 6",
                                         line_of(m, "  world_size")));
  // num_experts must be divisible by expert_model_parallel_size
  std::string e = with(moe_base(), "world_size: 8", "world_size: 24");
  e = with(e, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 1\n  expert_model_parallel_size: 3");
  EXPECT_EQ(layout_error(e), fmt::format("spec.yaml:{}: parallelism.expert_model_parallel_size: num_experts must be "
                                         "divisible by expert_model_parallel_size (8 experts on line 7, "
                                         "expert_model_parallel_size 3)",
                                         line_of(e, "  expert_model_parallel_size")));
  // seq_length must be <= max_position_embeddings
  EXPECT_EQ(layout_error(with(kBase, "seq_length: 4096", "seq_length: 8192")),
            "spec.yaml:13: training.seq_length: must be <= max_position_embeddings (seq_length 8192, "
            "max_position_embeddings 4096 on line 7)");
  // sequence_parallel requires tensor_model_parallel_size > 1
  std::string sp = with(kBase, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 1");
  sp = with(sp, "seq_length: 4096", "seq_length: 4096\n  sequence_parallel: true");
  EXPECT_EQ(layout_error(sp),
            "spec.yaml:14: training.sequence_parallel: requires tensor_model_parallel_size > 1 "
            "(tensor_model_parallel_size is 1)");
  // MoE with TP needs sequence parallelism (Megatron-LM), which the guide leaves off by default.
  EXPECT_EQ(layout_error(moe_base()),
            "spec.yaml: training.sequence_parallel (the default): Megatron-LM requires sequence parallelism when MoE "
            "and tensor parallelism are combined (tensor_model_parallel_size 2); set sequence_parallel: true");
  // Heads by TP.
  EXPECT_EQ(layout_error(with(with(kBase, "world_size: 8", "world_size: 24"), "tensor_model_parallel_size: 2",
                              "tensor_model_parallel_size: 3")),
            "spec.yaml:9: parallelism.tensor_model_parallel_size: num_attention_heads must be divisible by "
            "tensor_model_parallel_size (32 heads on line 4, tensor_model_parallel_size 3)");
}

TEST(spec_file, CommandLineValuesAreNamedAsSuch) {
  const SpecFile s = yaml(kBase);
  const ModelSpec m = model_of(s);
  TrainingSetup final_setup = s.setup;  // as if `--tp 3 --num-gpus 24` were given
  final_setup.parallel.tp = 3;
  final_setup.parallel.world_size = 24;
  EXPECT_EQ(error_of<LayoutError>([&] { check_spec_layout(&s, m, final_setup); }),
            "spec.yaml: parallelism.tensor_model_parallel_size (--tp on the command line): num_attention_heads must be "
            "divisible by tensor_model_parallel_size (32 heads on line 4, tensor_model_parallel_size 3)");
  final_setup.parallel.tp = 2;
  final_setup.seq_length = 8192;
  EXPECT_EQ(error_of<LayoutError>([&] { check_spec_layout(&s, m, final_setup); }),
            "spec.yaml: training.seq_length (--seq-length on the command line): must be <= max_position_embeddings "
            "(seq_length 8192, max_position_embeddings 4096 on line 7)");
  // Without a file (a spec about to be written), only the fields are named.
  EXPECT_EQ(error_of<LayoutError>([&] { check_spec_layout(nullptr, m, final_setup); }),
            "training.seq_length: must be <= max_position_embeddings (seq_length 8192, max_position_embeddings 4096 "
            "of spec)");
}

TEST(spec_file, GuideWorldSizeExamples) {
  // Attention: world_size 64, pp 2, tp 4, cp 1 -> dp 8.
  std::string t = with(kBase, "world_size: 8", "world_size: 64");
  t = with(t, "pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 2");
  t = with(t, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 4\n  context_parallel_size: 1");
  const SpecFile a = yaml(t);
  check_spec_layout(&a, model_of(a), a.setup);
  EXPECT_EQ(resolve_setup(a.setup).parallel.dp, 8);
  // MoE: world_size 64, pp 2, ep 4, etp 1 -> edp 8.
  std::string m = with(moe_base(), "world_size: 8", "world_size: 64");
  m = with(m, "pipeline_model_parallel_size: 1",
           "pipeline_model_parallel_size: 2\n  expert_model_parallel_size: 4\n  expert_tensor_parallel_size: 1");
  m = with(m, "seq_length: 4096", "seq_length: 4096\n  sequence_parallel: true");
  m = with(m, "tensor_model_parallel_size: 2", "tensor_model_parallel_size: 4");
  const SpecFile b = yaml(m);
  const ModelSpec mb = model_of(b);
  check_spec_layout(&b, mb, b.setup);
  const Estimate est = estimate(mb, b.setup);
  EXPECT_EQ(est.setup.parallel.expert_dp, 8);
  EXPECT_EQ(est.setup.parallel.dp, 8);
}

// The guide's "61 layers with PP=4": first stage 16 (option A) or last stage 16 (option B).
TEST(spec_file, GuideUnevenPipelineExample) {
  const std::string base = R"(model:
  num_layers: 61
  hidden_size: 1024
  num_attention_heads: 8
  ffn_hidden_size: 4096
  vocab_size: 32000
  max_position_embeddings: 4096
parallelism:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 4
training:
  micro_batch_size: 1
  seq_length: 4096
infrastructure:
  world_size: 4
)";
  auto stage_layers = [&](const std::string& text) {
    const SpecFile s = yaml(text);
    const ModelSpec m = model_of(s);
    check_spec_layout(&s, m, s.setup);
    std::vector<std::int64_t> layers;
    for (const auto& st : estimate(m, s.setup).stages) layers.push_back(st.layers);
    return layers;
  };
  const std::string option_a = base + "  num_layers_in_first_pipeline_stage: 16\n";
  const std::string option_b = with(base, "  pipeline_model_parallel_size: 4\n",
                                    "  pipeline_model_parallel_size: 4\n  num_layers_in_last_pipeline_stage: 16\n");
  EXPECT_EQ(error_of<ConfigError>([&] { (void)yaml(option_a); }),
            "spec.yaml:16: infrastructure.num_layers_in_first_pipeline_stage: unknown field in the infrastructure "
            "section; num_layers_in_first_pipeline_stage belongs in the parallelism section");
  const std::string option_a_fixed =
      with(base, "  pipeline_model_parallel_size: 4\n",
           "  pipeline_model_parallel_size: 4\n  num_layers_in_first_pipeline_stage: 16\n");
  EXPECT_EQ(stage_layers(option_a_fixed), (std::vector<std::int64_t>{16, 15, 15, 15}));
  EXPECT_EQ(stage_layers(option_b), (std::vector<std::int64_t>{15, 15, 15, 16}));
  EXPECT_EQ(layout_error(base),
            "spec.yaml:10: parallelism.pipeline_model_parallel_size: num_layers (61 on line 2) is "
            "not evenly divisible by pipeline_model_parallel_size (4); set "
            "num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage");
}

TEST(spec_file, RecomputeRules) {
  auto training = [](const std::string& extra) {
    return with(kBase, "  seq_length: 4096\n", "  seq_length: 4096\n" + extra);
  };
  EXPECT_EQ(error_of<ConfigError>([&] { (void)yaml(training("  recompute_method: block\n")); }),
            "spec.yaml:14: training.recompute_method: only used with recompute_granularity: full (it is null)");
  EXPECT_EQ(error_of<ConfigError>(
                [&] { (void)yaml(training("  recompute_granularity: full\n  recompute_modules: [mlp]\n")); }),
            "spec.yaml:15: training.recompute_modules: only used with recompute_granularity: selective (it is full)");
  EXPECT_EQ(error_of<ConfigError>(
                [&] { (void)yaml(training("  recompute_granularity: full\n  recompute_num_layers: 0\n")); }),
            "spec.yaml:15: training.recompute_num_layers: 0 with recompute_granularity: full needs "
            "recompute_method: block (no layer recomputed); Megatron-LM's uniform recompute never advances with 0");
  // The guide lists recompute_num_layers: 0 as the default: harmless without full recompute.
  EXPECT_EQ(yaml(training("  recompute_num_layers: 0\n")).setup.recompute.num_layers, 1);
  const SpecFile full =
      yaml(training("  recompute_granularity: full\n  recompute_method: block\n  recompute_num_layers: 2\n"));
  EXPECT_EQ(full.setup.recompute.granularity, RecomputeGranularity::kFull);
  EXPECT_EQ(full.setup.recompute.method, RecomputeMethod::kBlock);
  EXPECT_EQ(full.setup.recompute.num_layers, 2);
  const SpecFile uniform = yaml(training("  recompute_granularity: full\n"));
  EXPECT_EQ(uniform.setup.recompute.method, RecomputeMethod::kUniform);
  EXPECT_EQ(uniform.setup.recompute.num_layers, 1);
  const SpecFile selective =
      yaml(training("  recompute_granularity: selective\n  recompute_modules: core_attn, mlp\n"));
  EXPECT_EQ(selective.setup.recompute.modules, kRecomputeCoreAttn | kRecomputeMlp);
  EXPECT_EQ(yaml(training("  recompute_granularity: selective\n")).setup.recompute.modules, kRecomputeCoreAttn);
}

TEST(spec_file, PrecisionSection) {
  auto precision = [](const std::string& body) { return yaml(kBase + "precision:\n" + body); };
  EXPECT_EQ(precision("  params_dtype: fp16\n").setup.precision, Precision::kFP16);
  EXPECT_EQ(precision("  params_dtype: fp32\n").setup.precision, Precision::kFP32);
  EXPECT_EQ(precision("  fp8: true\n").setup.precision, Precision::kFP8);
  EXPECT_EQ(precision("  fp8: hybrid\n").setup.precision, Precision::kFP8);
  EXPECT_EQ(precision("  fp8: false\n").setup.precision, Precision::kBF16);
  EXPECT_EQ(error_of<ConfigError>([&] { (void)precision("  params_dtype: fp16\n  fp8: e4m3\n"); }),
            "spec.yaml:18: precision.fp8: FP8 training is estimated with bf16 parameters; params_dtype is fp16");
  EXPECT_EQ(error_of<ConfigError>([&] { (void)precision("  fp8_param_gather: true\n"); }),
            "spec.yaml:17: precision.fp8_param_gather: needs fp8: true");
  EXPECT_EQ(error_of<ConfigError>([&] { (void)precision("  exp_avg_dtype: bf16\n"); }),
            "spec.yaml:17: precision.exp_avg_dtype: needs training.use_precision_aware_optimizer: true");
  const SpecFile aware =
      yaml(with(kBase, "  seq_length: 4096\n", "  seq_length: 4096\n  use_precision_aware_optimizer: true\n") +
           "precision:\n  exp_avg_dtype: bf16\n  main_grads_dtype: bf16\n");
  EXPECT_EQ(aware.setup.optimizer.exp_avg, DType::kBF16);
  EXPECT_EQ(aware.setup.optimizer.main_grads, DType::kBF16);
}

TEST(spec_file, MoeLayerFreqForms) {
  const std::string moe8 = with(with(moe_base(), "num_layers: 32", "num_layers: 8"), "  moe_ffn_hidden_size: 1408\n",
                                "  moe_ffn_hidden_size: 1408\n  moe_layer_freq: FREQ\n");
  auto kinds = [&](const std::string& freq) {
    std::string out;
    for (const auto& l : model_of(yaml(with(moe8, "FREQ", freq))).layers) out += l.mlp.kind == "moe" ? "M" : "d";
    return out;
  };
  EXPECT_EQ(kinds("1"), "MMMMMMMM");
  EXPECT_EQ(kinds("2"), "MdMdMdMd");
  EXPECT_EQ(kinds("[0, 0, 1, 1, 1, 1, 1, 1]"), "ddMMMMMM");
  EXPECT_EQ(kinds("\"([0]*2+[1]*6)\""), "ddMMMMMM");
  EXPECT_EQ(yaml_error(with(moe8, "FREQ", "[0, 1, 1]")),
            "spec.yaml:9: model.moe_layer_freq: gives 3 entries for 8 layers");
  EXPECT_EQ(yaml_error(with(moe8, "FREQ", "\"([0]*2+[1]*5)\"")),
            "spec.yaml:9: model.moe_layer_freq: gives 7 entries for 8 layers");
  EXPECT_EQ(error_of<ConfigError>([&] { (void)yaml(with(moe8, "FREQ", "[0, 2]")); }),
            "spec.yaml:9: model.moe_layer_freq: list items must be 0 or 1, got 2");
  const ModelSpec m = model_of(yaml(with(moe8, "FREQ", "2")));
  EXPECT_EQ(m.layers[0].mlp.num_experts, 8);
  EXPECT_EQ(m.layers[0].mlp.top_k, 2);
  EXPECT_EQ(m.layers[0].mlp.expert_ffn_hidden_size, 1408);
  EXPECT_EQ(m.layers[0].mlp.shared_expert_ffn_hidden_size, 0);
  EXPECT_EQ(m.layers[1].mlp.ffn_hidden_size, 11008);
}

TEST(spec_file, HfBaseWithOverrides) {
  const ModelSpec base = load_model("Qwen/Qwen3-8B", registry(), offline());
  const std::string text =
      "model:\n  hf: Qwen/Qwen3-8B\n  num_layers: 4\n  vocab_size: 100000\n" + kBase.substr(kBase.find("parallelism:"));
  const SpecFile s = yaml(text);
  ASSERT_TRUE(s.hf.has_value());
  const ModelSpec m = model_of(s);
  EXPECT_EQ(m.name, "Qwen/Qwen3-8B");
  EXPECT_EQ(m.adapter, base.adapter);
  EXPECT_EQ(m.num_layers, 4);
  ASSERT_EQ(m.layers.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(m.layers[i], base.layers[i]);
  EXPECT_EQ(m.vocab_size, 100000);
  EXPECT_EQ(m.hidden_size, base.hidden_size);
  EXPECT_EQ(m.tie_embeddings, base.tie_embeddings);
  EXPECT_THAT(m.source, StartsWith("spec.yaml (hf: "));

  // More layers than the base: the last layer repeats.
  const ModelSpec longer = model_of(yaml("model:\n  hf: Qwen/Qwen3-8B\n  num_layers: 40\n"));
  ASSERT_EQ(longer.layers.size(), 40u);
  EXPECT_EQ(longer.layers[39], base.layers.back());

  // MoE fields reach the MoE layers only (DeepSeek-V3's first 3 layers are dense).
  const ModelSpec v3 = load_model("deepseek-ai/DeepSeek-V3", registry(), offline());
  const ModelSpec moe =
      model_of(yaml("model:\n  hf: deepseek-ai/DeepSeek-V3\n  num_experts: 64\n  moe_router_topk: 4\n"
                    "  kv_lora_rank: 256\n"));
  EXPECT_EQ(moe.layers[0].mlp, v3.layers[0].mlp);
  EXPECT_EQ(moe.layers[3].mlp.num_experts, 64);
  EXPECT_EQ(moe.layers[3].mlp.top_k, 4);
  EXPECT_EQ(moe.layers[3].mlp.expert_ffn_hidden_size, v3.layers[3].mlp.expert_ffn_hidden_size);
  EXPECT_EQ(moe.layers[0].attention.kv_lora_rank, 256);
  EXPECT_EQ(moe.mtp_num_layers, v3.mtp_num_layers);

  EXPECT_EQ(yaml_error("model:\n  hf: Qwen/Qwen3-8B\n  num_experts: 8\n"),
            "spec.yaml:3: model.num_experts: Qwen/Qwen3-8B has no MoE layers to override");
  EXPECT_EQ(yaml_error("model:\n  hf: Qwen/Qwen3-8B\n  multi_latent_attention: true\n"),
            "spec.yaml:3: model.multi_latent_attention: cannot be overridden on a Hugging Face base (hf: "
            "Qwen/Qwen3-8B); write the model out in full (`mme init Qwen/Qwen3-8B` prints every field)");
  EXPECT_EQ(yaml_error("model:\n  hf: deepseek-ai/DeepSeek-V3\n  kv_channels: 64\n"),
            "spec.yaml:3: model.kv_channels: deepseek-ai/DeepSeek-V3 has no GQA attention layers to override");
  EXPECT_EQ(yaml_error("model:\n  hf: Qwen/Qwen3-8B\n  num_query_groups: 5\n"),
            "spec.yaml:3: model.num_query_groups: num_query_groups must divide num_attention_heads (num_query_groups "
            "5, num_attention_heads 32)");
  EXPECT_THAT(error_of<NotFoundError>([&] { (void)model_of(yaml("model:\n  hf: nobody/NoSuchModel-7B\n")); }),
              StartsWith("spec.yaml:2: model.hf: "));
}

// The model mapping is the spec_file adapter's (SpecModelMapping): without it the host loads no
// hf: spec and writes every model as `hf:`.
TEST(spec_file, WithoutTheSpecFileAdapterTheHostHasNoModelMapping) {
  const Registry none;
  EXPECT_EQ(spec_model_mapping(none), nullptr);
  EXPECT_NE(spec_model_mapping(registry()), nullptr);
  EXPECT_EQ(
      error_of<PluginError>([&] { (void)load_spec_model(yaml("model:\n  hf: Qwen/Qwen3-8B\n"), none, offline()); }),
      "spec.yaml: no loaded config adapter maps the model fields of spec files onto a Hugging Face base (the "
      "spec_file plugin; see `mme plugins`)");
  const ModelSpec m = load_model("Qwen/Qwen3-8B", registry(), offline());
  EXPECT_EQ(spec_model_inexpressible(m, registry()), "");
  EXPECT_EQ(spec_model_inexpressible(m, none),
            "no loaded config adapter writes spec files (the spec_file plugin; see `mme plugins`)");
  EXPECT_EQ(nlohmann::json::parse(write_spec_json(m, TrainingSetup{}, none))["model"],
            nlohmann::json({{"hf", "Qwen/Qwen3-8B"}}));
}

// GPT-OSS's settings have no spec fields: its bundled config is written as its `hf:` base, and a
// launch line's model, which has none, is refused rather than written without them.
TEST(spec_file, ModelsWithSettingsNoFieldSaysNeedTheirHfBase) {
  const ModelSpec oss = load_model("openai/gpt-oss-120b", registry(), offline());
  EXPECT_EQ(spec_model_inexpressible(oss, registry()), "its layers differ in their attention (layer 0 and layer 1)");
  EXPECT_EQ(nlohmann::json::parse(write_spec_json(oss, TrainingSetup{}, registry()))["model"],
            nlohmann::json({{"hf", "openai/gpt-oss-120b"}}));
  ModelSpec launched = oss;
  launched.model_type = "megatron-args";
  launched.activation = "silu";
  for (auto& l : launched.layers) l.attention.window = 127;
  EXPECT_EQ(spec_model_inexpressible(launched, registry()), "its attention has a sliding window");
  for (auto& l : launched.layers) l.attention.window = 0;
  EXPECT_EQ(spec_model_inexpressible(launched, registry()), "its attention has a softmax other than vanilla");
  EXPECT_THAT(error_of<UsageError>([&] { (void)write_spec_yaml(launched, TrainingSetup{}, registry()); }),
              HasSubstr("cannot be written as a spec file: its attention has a softmax other than vanilla"));
  for (auto& l : launched.layers) l.attention.softmax_type = SoftmaxType::kVanilla;
  EXPECT_EQ(spec_model_inexpressible(launched, registry()), "its gated unit is clamped or offset");
}

// A hybrid model (Nemotron 3 Nano) is written field by field: hybrid_layer_pattern names its layers,
// the mamba_* fields its mixers (the round trip of every bundled model above estimates it the same).
// On its `hf:` base the fields reach the layers of their kind; the layer count and the pattern,
// which fix each other, are refused.
TEST(spec_file, HybridModelsHaveAPatternField) {
  const std::string nano = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16";
  const ModelSpec base = load_model(nano, registry(), offline());
  EXPECT_EQ(spec_model_inexpressible(base, registry()), "");
  const auto model = nlohmann::json::parse(write_spec_json(base, TrainingSetup{}, registry()))["model"];
  EXPECT_EQ(model["hybrid_layer_pattern"], "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME");
  EXPECT_EQ(model["mamba_num_heads"], 64);
  EXPECT_EQ(model["mamba_num_groups"], 8);
  EXPECT_EQ(model["num_query_groups"], 2);  // the attention layers' heads
  const ModelSpec more = model_of(yaml("model:\n  hf: " + nano + "\n  num_experts: 64\n"));
  EXPECT_EQ(more.layers[1].mlp.num_experts, 64);
  EXPECT_EQ(more.layers[0].attention.kind, "mamba");
  EXPECT_THAT(yaml_error("model:\n  hf: " + nano + "\n  num_layers: 10\n"),
              HasSubstr("model.num_layers: " + nano + " is a hybrid model whose layers its pattern names one by one"));
  EXPECT_THAT(yaml_error("model:\n  hf: " + nano + "\n  mamba_state_dim: 64\n"),
              HasSubstr("model.mamba_state_dim: cannot be overridden on a Hugging Face base"));
  EXPECT_EQ(yaml_error("model:\n  hf: " + nano + "\n  ffn_hidden_size: 1024\n"),
            "spec.yaml:3: model.ffn_hidden_size: " + nano + " has no dense MLP layers to override");
  // Written out in full: what Megatron-LM's pattern allows and refuses.
  std::string full = write_spec_yaml(base, TrainingSetup{}, registry());
  const ModelSpec back = model_of(yaml(full));
  ASSERT_EQ(back.layers.size(), base.layers.size());
  for (std::size_t i = 0; i < back.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].attention, base.layers[i].attention) << i;
    EXPECT_EQ(back.layers[i].mlp.kind, base.layers[i].mlp.kind) << i;  // (a MoE's nominal width is the spec's)
  }
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = full;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_THAT(yaml_error(with("MEMEM*E", "MEMEM|E")), HasSubstr("the pipeline's split is the parallelism section's"));
  EXPECT_THAT(yaml_error(with("MEMEM*E", "MEMEMGE")), HasSubstr("'G' is not a layer symbol"));
  EXPECT_THAT(yaml_error(with("MEMEM*E", "MEMEM*")), HasSubstr("has 51 layers, num_layers says 52"));
}

TEST(spec_file, HfBaseRelativePathIsLookedUpNextToTheSpec) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "cfg");
  std::filesystem::copy_file(test::source_dir() / "models" / "Qwen--Qwen3-0.6B" / "config.json",
                             dir.path() / "cfg" / "config.json");
  const auto spec_path = dir.path() / "spec.yaml";
  test::write_file(spec_path, "model:\n  hf: cfg\n  name: tiny\n");
  const SpecFile s = read_spec_file(spec_path);
  const ModelSpec m = model_of(s);
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.layers, load_model("Qwen/Qwen3-0.6B", registry(), offline()).layers);
  EXPECT_EQ(error_of<NotFoundError>([&] { (void)read_spec_file(dir.path() / "missing.yaml"); }),
            (dir.path() / "missing.yaml").string() + ": no such file");
}

// Every bundled model, written as a spec (YAML and JSON) and read back, gives the same estimate.
TEST(spec_file, WriterRoundTripsEveryBundledModel) {
  const auto models = list_bundled_models({test::source_dir() / "models"});
  ASSERT_GE(models.size(), 10u);
  for (const auto& bm : models) {
    SCOPED_TRACE(bm.name);
    const ModelSpec m = load_model(bm.name, registry(), offline());
    const Estimate original = estimate(m, TrainingSetup{});
    for (SpecFormat format : {SpecFormat::kYaml, SpecFormat::kJson}) {
      const std::string text = format == SpecFormat::kYaml ? write_spec_yaml(m, original.setup, registry())
                                                           : write_spec_json(m, original.setup, registry());
      const SpecFile s = parse_spec_text(text, "written", format);
      EXPECT_TRUE(s.missing.empty());
      const ModelSpec back = load_spec_model(s, registry(), offline());
      check_spec_layout(&s, back, s.setup);
      const Estimate again = estimate(back, s.setup);
      EXPECT_EQ(again.model.total_params, original.model.total_params);
      EXPECT_EQ(again.model.active_params, original.model.active_params);
      EXPECT_EQ(again.model.mtp_params, original.model.mtp_params);
      ASSERT_EQ(again.stages.size(), original.stages.size());
      for (std::size_t i = 0; i < again.stages.size(); ++i) {
        const auto& a = again.stages[i];
        const auto& b = original.stages[i];
        EXPECT_EQ(a.total_bytes, b.total_bytes);
        EXPECT_EQ(a.static_bytes, b.static_bytes);
        EXPECT_EQ(a.activation_bytes, b.activation_bytes);
        ASSERT_EQ(a.components.size(), b.components.size());
        for (std::size_t c = 0; c < a.components.size(); ++c) {
          EXPECT_EQ(a.components[c].name, b.components[c].name);
          EXPECT_EQ(a.components[c].bytes, b.components[c].bytes) << a.components[c].name;
        }
      }
      EXPECT_EQ(again.assumptions, original.assumptions);
      if (bm.name == "google/gemma-2-9b-it") {
        EXPECT_EQ(spec_model_inexpressible(m, registry()), "its layers have post-attention / post-MLP norms");
        EXPECT_EQ(s.hf, std::optional<std::string>("google/gemma-2-9b-it"));
      } else if (bm.name == "openai/gpt-oss-120b") {
        EXPECT_EQ(spec_model_inexpressible(m, registry()),
                  "its layers differ in their attention (layer 0 and layer 1)");
        EXPECT_EQ(s.hf, std::optional<std::string>("openai/gpt-oss-120b"));
      } else {
        EXPECT_EQ(spec_model_inexpressible(m, registry()), "");
        EXPECT_FALSE(s.hf.has_value());
        EXPECT_EQ(back.adapter, "spec_file");
      }
    }
  }
}

TEST(spec_file, WriterUsesMegatronNamesAndForms) {
  const ModelSpec v3 = load_model("deepseek-ai/DeepSeek-V3", registry(), offline());
  TrainingSetup s;
  s.parallel.tp = 4;
  s.parallel.pp = 4;
  s.parallel.ep = 4;
  s.parallel.world_size = 128;
  s.pipeline.last_stage_layers = 16;
  const Estimate est = estimate(v3, s);
  const std::string y =
      write_spec_yaml(v3, est.setup, registry(), {{"a header"}, std::string("H100-SXM-80GB"), nullptr});
  EXPECT_THAT(y, StartsWith("# a header\n\nmodel:\n  name: deepseek-ai/DeepSeek-V3"));
  EXPECT_THAT(y, HasSubstr("\n  moe_layer_freq: \"([0]*3+[1]*58)\""));
  EXPECT_THAT(y, HasSubstr("\n  multi_latent_attention: true"));
  EXPECT_THAT(y, HasSubstr("\n  # num_query_groups: null"));
  EXPECT_THAT(y, HasSubstr("\n  mtp_num_layers: 1"));
  EXPECT_THAT(y, HasSubstr("\n  expert_tensor_parallel_size: 4"));  // the command line's ETP = TP, written out
  EXPECT_THAT(y, HasSubstr("\n  sequence_parallel: true"));
  EXPECT_THAT(y, HasSubstr("\n  num_layers_in_last_pipeline_stage: 16"));
  EXPECT_THAT(y, HasSubstr("\n  gpu: H100-SXM-80GB"));
  EXPECT_THAT(y, HasSubstr("\n  tensor_model_parallel_size: 4"));
  const auto j = nlohmann::json::parse(write_spec_json(v3, est.setup, registry()));
  EXPECT_EQ(j["model"]["moe_layer_freq"], "([0]*3+[1]*58)");
  EXPECT_EQ(j["parallelism"]["num_layers_in_last_pipeline_stage"], 16);
  EXPECT_FALSE(j["model"].contains("num_query_groups"));  // commented out in YAML, absent in JSON
}

// docs/spec-files.md documents every field with its default.
TEST(spec_file, DocsListEveryFieldWithItsDefault) {
  const std::string doc = test::read_file(test::source_dir() / "docs" / "spec-files.md");
  for (const auto& f : spec_fields()) {
    SCOPED_TRACE(f.section + "." + f.name);
    const std::string row_start = "| `" + f.name + "` |";
    const auto pos = doc.find(row_start);
    ASSERT_NE(pos, std::string::npos) << "no table row for the field";
    const std::string row = doc.substr(pos, doc.find('\n', pos) - pos);
    EXPECT_THAT(row, HasSubstr(f.default_text));
  }
  for (const auto& s : spec_sections()) EXPECT_THAT(doc, HasSubstr("## `" + s + "`"));
}

TEST(spec_file, ClosestName) {
  EXPECT_EQ(closest_name("num_layer", {"num_layers", "hidden_size"}), "num_layers");
  EXPECT_EQ(closest_name("HIDDEN_SIZE", {"num_layers", "hidden_size"}), "hidden_size");
  EXPECT_EQ(closest_name("colour", {"num_layers", "hidden_size"}), "");
}

}  // namespace
}  // namespace mme
