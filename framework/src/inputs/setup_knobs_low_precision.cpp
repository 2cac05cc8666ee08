// The knobs of the low-precision recipes (transformer_config.py "fp8 related" / "fp4 related"):
// FP8 format and recipe, the delayed-scaling amax history, the bf16 first/last layers and NVFP4;
// part of the setup schema's table (setup_schema.hpp), in spec-file order after
// --fp8-param-gather. Their memory terms: framework/src/engine/low_precision.cpp.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

// transformer_config.py fp4: the one format TE's NVFP4BlockScaling takes.
constexpr EnumName kFp4FormatArr[] = {{"e2m1", 1}};
const EnumTable kFp4FormatNames = kFp4FormatArr;

bool quantized(const TrainingSetup& s) { return quantized_gemms(s); }
bool bf16_layers(const TrainingSetup& s) { return quantized_gemms(s) && s.low_precision.first_last_layers_bf16; }

// --fp8-format on mme's command line also turns FP8 GEMMs on (as Megatron-LM's does), over bf16
// parameters: a precision that says otherwise (fp32, fp16) contradicts it, and is refused rather
// than replaced (Megatron-LM's own flags: setup_knobs.hpp megatron_precision).
void mme_fp8_format(TrainingSetup& s, const J& v, const MmeFlags& flags) {
  s.low_precision.fp8_format = value_of<Fp8Format>(kFp8FormatNames, v);
  if (!s.low_precision.fp8_format) return;
  std::optional<std::string> other = flags.value("precision");
  if (other && (*other == "bf16" || *other == "fp8")) other.reset();
  if (!other && flags.on("fp16")) other = "fp16";
  if (other)
    throw UsageError(
        fmt::format("--fp8-format {} (FP8 GEMMs over bf16 parameters, --precision fp8) contradicts "
                    "--precision {}: FP8 over {} parameters is not modelled",
                    v.get<std::string>(), *other, *other));
  s.precision = Precision::kFP8;
}

// --fp4-recipe: nvfp4 is Megatron-LM's default and the one modelled; custom needs a quantizer
// factory mme cannot know.
void megatron_fp4(const MegatronArgs& a, TrainingSetup& s) {
  if (auto v = given(a, "fp4-format")) {
    if (lower(*v) != "e2m1") throw UsageError(fmt::format("--fp4-format: unknown value '{}' (e2m1)", *v));
    s.low_precision.fp4 = true;
  }
  if (auto v = given(a, "fp4-recipe"); v && lower(*v) != "nvfp4")
    throw UsageError(fmt::format("--fp4-recipe {}: only nvfp4 (NVFP4BlockScaling) is modelled", *v));
}

}  // namespace

void add_low_precision_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "fp8-format",
       .kind = K::kEnum,
       .flag = "fp8-format",
       .help = "FP8 GEMMs in e4m3 | hybrid (sets --precision fp8; the same bytes)",
       .doc_value = "F",
       .doc = "FP8 GEMMs: `e4m3` or `hybrid` (e5m2 gradients); sets `--precision fp8` (over bf16: with `--precision "
              "fp32` or `fp16` it is refused), the bytes are the same",
       .doc_default = "unset",
       .table = kFp8FormatNames,
       .values = {"e4m3", "hybrid"},
       .megatron = {"fp8-format"},
       .spec_section = "precision",
       .spec_name = "fp8_format",
       .spec_default = "null",
       .spec_summary = "the FP8 format (e4m3 or hybrid); sets fp8",
       .json_key = "fp8_format",
       .json_when = quantized,
       .args_when = [](const S& s) { return s.low_precision.fp8_format.has_value(); },
       .get =
           [](const S& s) {
             return s.low_precision.fp8_format ? name(kFp8FormatNames, *s.low_precision.fp8_format) : J();
           },
       .set = [](S& s, const J& v) { s.low_precision.fp8_format = value_of<Fp8Format>(kFp8FormatNames, v); },
       .mme_set = mme_fp8_format});
  add({.id = "fp8-recipe",
       .kind = K::kEnum,
       .flag = "fp8-recipe",
       .help = "FP8 scaling: delayed (default) | tensorwise | blockwise | mxfp8",
       .doc_value = "R",
       .doc = "FP8 scaling recipe: `delayed`, `tensorwise` (current scaling), `blockwise` (1x128 / 128x128 "
              "blocks), `mxfp8` (1x32 blocks, Blackwell); no effect without FP8",
       .doc_default = "delayed",
       .table = kFp8RecipeNames,
       .values = {"delayed", "tensorwise", "blockwise", "mxfp8"},
       .refused = {{"custom", "{}: custom (a quantizer factory of your own) is not modelled"}},
       .megatron = {"fp8-recipe"},
       .spec_section = "precision",
       .spec_name = "fp8_recipe",
       .spec_default = "delayed",
       .spec_summary = "the FP8 scaling recipe: delayed, tensorwise, blockwise or mxfp8",
       .json_key = "fp8_recipe",
       .json_when = quantized,
       .get = [](const S& s) { return name(kFp8RecipeNames, s.low_precision.fp8_recipe); },
       .set = [](S& s, const J& v) { s.low_precision.fp8_recipe = must<Fp8Recipe>(kFp8RecipeNames, v); }});
  add({.id = "fp8-amax-history-len",
       .kind = K::kInt,
       .flag = "fp8-amax-history-len",
       .help = "delayed scaling: amax history entries per FP8 tensor (default 1)",
       .doc_value = "N",
       .doc = "delayed scaling: amax history entries kept per FP8 tensor (fp32, 5 tensors per GEMM)",
       .doc_default = "1",
       .min = 1,
       .max = kMaxSequenceSize,
       .megatron = {"fp8-amax-history-len"},
       .spec_section = "precision",
       .spec_name = "fp8_amax_history_len",
       .spec_default = "1",
       .spec_summary = "delayed scaling: amax history entries per FP8 tensor",
       .json_key = "fp8_amax_history_len",
       .json_when = quantized,
       .get = [](const S& s) { return J(s.low_precision.amax_history_len); },
       .set = [](S& s, const J& v) { s.low_precision.amax_history_len = as_int(v); }});
  add({.id = "first-last-layers-bf16",
       .kind = K::kBool,
       .flag = "first-last-layers-bf16",
       .help = "keep the first and last decoder layers in bf16 under FP8/FP4 (not with delayed scaling)",
       .doc = "keep the model's first `--num-layers-at-start-in-bf16` and last `--num-layers-at-end-in-bf16` "
              "decoder layers in bf16 under FP8/FP4 (refused with delayed scaling)",
       .megatron = {"first-last-layers-bf16"},
       .megatron_default = J(false),
       .spec_section = "precision",
       .spec_name = "first_last_layers_bf16",
       .spec_default = "false",
       .spec_summary = "keep the first and last decoder layers in bf16",
       .json_key = "first_last_layers_bf16",
       .json_when = quantized,
       .get = [](const S& s) { return J(s.low_precision.first_last_layers_bf16); },
       .set = [](S& s, const J& v) { s.low_precision.first_last_layers_bf16 = v.get<bool>(); }});
  add({.id = "num-layers-at-start-in-bf16",
       .kind = K::kInt,
       .flag = "num-layers-at-start-in-bf16",
       .help = "with --first-last-layers-bf16: bf16 layers at the start (default 1)",
       .doc_value = "N",
       .doc = "with `--first-last-layers-bf16`: decoder layers at the start kept in bf16 (at most layers / PP)",
       .doc_default = "1",
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"num-layers-at-start-in-bf16"},
       .spec_section = "precision",
       .spec_name = "num_layers_at_start_in_bf16",
       .spec_default = "1",
       .spec_summary = "with first_last_layers_bf16: bf16 layers at the start",
       .json_key = "num_layers_at_start_in_bf16",
       .json_when = bf16_layers,
       .args_when = bf16_layers,
       .get = [](const S& s) { return J(s.low_precision.layers_at_start_in_bf16); },
       .set = [](S& s, const J& v) { s.low_precision.layers_at_start_in_bf16 = as_int(v); }});
  add({.id = "num-layers-at-end-in-bf16",
       .kind = K::kInt,
       .flag = "num-layers-at-end-in-bf16",
       .help = "with --first-last-layers-bf16: bf16 layers at the end (default 1)",
       .doc_value = "N",
       .doc = "with `--first-last-layers-bf16`: decoder layers at the end kept in bf16 (at most layers / PP)",
       .doc_default = "1",
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"num-layers-at-end-in-bf16"},
       .spec_section = "precision",
       .spec_name = "num_layers_at_end_in_bf16",
       .spec_default = "1",
       .spec_summary = "with first_last_layers_bf16: bf16 layers at the end",
       .json_key = "num_layers_at_end_in_bf16",
       .json_when = bf16_layers,
       .args_when = bf16_layers,
       .get = [](const S& s) { return J(s.low_precision.layers_at_end_in_bf16); },
       .set = [](S& s, const J& v) { s.low_precision.layers_at_end_in_bf16 = as_int(v); }});
  add({.id = "fp4-format",
       .kind = K::kEnum,
       .flag = "fp4-format",
       .help = "NVFP4 GEMMs: e2m1 (--fp4-recipe nvfp4; Blackwell; not with FP8)",
       .doc_value = "F",
       .doc = "NVFP4 GEMMs (`e2m1`, Transformer Engine's NVFP4BlockScaling; Blackwell) over bf16 parameters; "
              "Megatron-LM's `--fp4-recipe nvfp4` is accepted, `custom` refused",
       .doc_default = "unset",
       .table = kFp4FormatNames,
       .values = {"e2m1"},
       .megatron = {"fp4-format"},
       .megatron_read = megatron_fp4,
       .megatron_extra = {"fp4-recipe"},
       .spec_section = "precision",
       .spec_name = "fp4_format",
       .spec_default = "null",
       .spec_summary = "NVFP4 GEMMs: e2m1 (null: none)",
       .json_key = "fp4_format",
       .json_when = quantized,
       .get = [](const S& s) { return s.low_precision.fp4 ? J("e2m1") : J(); },
       .set = [](S& s, const J& v) { s.low_precision.fp4 = !v.is_null(); }});
  add({.id = "fp4-param-gather",
       .kind = K::kBool,
       .flag = "fp4-param-gather",
       .help = "keep NVFP4 GEMM weights as packed 4-bit parameters (needs --fp4-format)",
       .doc = "keep NVFP4 GEMM weights as packed 4-bit parameters, all-gathered in NVFP4 (needs `--fp4-format`)",
       .megatron = {"fp4-param-gather"},
       .megatron_default = J(false),
       .spec_section = "precision",
       .spec_name = "fp4_param_gather",
       .spec_default = "false",
       .spec_summary = "keep NVFP4 GEMM weights as packed 4-bit parameters",
       .json_key = "fp4_param_gather",
       .json_when = quantized,
       .get = [](const S& s) { return J(s.low_precision.fp4_param_gather); },
       .set = [](S& s, const J& v) { s.low_precision.fp4_param_gather = v.get<bool>(); }});
}

}  // namespace mme::setup_knobs_detail
