// The training-setup schema: every knob of a TrainingSetup defined once, in one table
// (framework/src/inputs/setup_schema.cpp), with
//   - its `mme estimate` flag(s) and their aliases (help text, docs/cli.md row),
//   - its Megatron-LM flag spelling(s) and Megatron-LM's default,
//   - its spec-file field (docs/spec-files.md row),
//   - its key in the JSON `setup` block,
//   - its kind, range and allowed values,
//   - how it reads and writes a TrainingSetup.
// The mme flags (cli/estimate_options.cpp), --megatron-args (megatron_args.cpp), spec files
// (src/inputs/spec/), the planner's printed command lines (setup_to_args), --dump-config, the JSON
// `setup` block and the flag tables of docs/cli.md are all derived from the table. The few
// rules between knobs (FSDP settings, recompute modules, FP8 over bf16, ...) are hooks of the
// knob they belong to, in the same table.
//
// Values travel as JSON: null = not set (an optional knob, or its "auto"/"none"), integers,
// numbers, booleans, strings (the canonical spelling of an enum value; recompute modules as
// "core_attn,mlp"), and for --env a list of "NAME=VALUE" strings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/sdk/enum_names.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

class MegatronArgs;

enum class KnobKind {
  kInt,      // an integer in [min, max]
  kNumber,   // a number in lo..hi (open or closed ends)
  kBool,     // a switch
  kEnum,     // one of `values`
  kString,   // free text (checked by `check`)
  kModules,  // recompute modules, "core_attn,mlp"
  kEnv,      // NAME=VALUE, repeatable
};

// What an mme command line gave, by flag name (without "--"), for setup_from_mme_flags. The
// CLI fills it from boost::program_options; tests fill it by hand.
class MmeFlags {
 public:
  virtual ~MmeFlags() = default;
  virtual std::optional<std::string> value(std::string_view name) const = 0;  // a value flag, as given
  virtual bool on(std::string_view name) const = 0;                           // a switch
  virtual std::vector<std::string> values(std::string_view name) const = 0;   // a repeatable flag
};

struct SetupKnob {
  using J = nlohmann::json;

  const char* id;  // the knob's name in messages and tests (its mme flag, or the spec field)
  KnobKind kind;

  // --- `mme estimate` flags ---------------------------------------------------------------
  const char* flag = nullptr;             // the value flag, or the switch that sets a bool knob true
  std::vector<const char*> aliases = {};  // more spellings of the value flag (Megatron-LM's names), hidden in --help
  const char* help = "";                  // --help text of `flag`
  const char* off_flag = nullptr;         // bool: the switch that sets it false
  const char* off_help = "";
  // Switches that set an enum knob to one value ({"bf16", "bf16", help}).
  struct ValueSwitch {
    const char* flag;
    const char* value;
    const char* help;
  };
  std::vector<ValueSwitch> switches = {};
  // docs/cli.md: the value placeholder ("N"), the meaning and the default columns (the docs
  // say more than --help).
  const char* doc_value = "";
  const char* doc = "";
  const char* doc_default = "";
  const char* off_doc = "";  // the off switch's meaning; for `switches`, their row's meaning

  // --- kind details -------------------------------------------------------------------------
  std::int64_t min = 1, max = 0;  // kInt
  double lo = 0, hi = 0;          // kNumber
  bool lo_open = false, hi_open = false;
  std::optional<EnumTable> table = {};   // kEnum: the enum's names
  std::vector<const char*> values = {};  // kEnum: the values this knob takes, in the order listed
  // kEnum: the spelling of "not set" (auto, none); listed when it is among `values`, else
  // only accepted.
  const char* null_name = nullptr;
  // kEnum: spellings refused with a reason ("allgather": TE's spelling is all_gather); {} = the flag.
  std::vector<std::pair<const char*, const char*>> refused = {};
  void (*check)(const std::string& text, std::string_view flag) = nullptr;  // kString: throws UsageError
  // kModules: the module names the knob takes (default: --recompute-modules'); the reader throws
  // UsageError for an unknown name.
  std::uint32_t (*parse_modules)(const std::string& text) = nullptr;
  std::string (*modules_text)(std::uint32_t modules) = nullptr;
  bool modules_may_be_empty = false;  // kModules: an empty list means something (CUDA graphs: the whole layer)

  // --- Megatron-LM --------------------------------------------------------------------------
  // Value flags: the spellings, the first one printed; bool knobs: the store_true switches.
  std::vector<const char*> megatron = {};
  std::vector<const char*> megatron_off = {};  // bool: the store_false switches (--no-...)
  std::optional<J> megatron_default = {};      // Megatron-LM's default where it differs from mme's
  // Replaces the generic reading for knobs Megatron-LM spells in several flags.
  void (*megatron_read)(const MegatronArgs&, TrainingSetup&) = nullptr;
  // Megatron-LM flags this knob's megatron_read also reads (for the unknown-flag check).
  std::vector<const char*> megatron_extra = {};

  // --- spec file ----------------------------------------------------------------------------
  const char* spec_section = nullptr;  // parallelism | training | infrastructure | precision | peft; null = no field
  const char* spec_name = nullptr;
  bool spec_required = false;
  std::optional<std::int64_t> spec_min = {};  // kInt: the spec file's lower bound, where it differs
  std::vector<const char*> spec_values = {};  // kEnum: the spec file's values, where they differ
  const char* spec_default = "";              // docs/spec-files.md's default column
  const char* spec_summary = "";
  J (*spec_get)(const TrainingSetup&) = nullptr;         // default: get
  void (*spec_set)(TrainingSetup&, const J&) = nullptr;  // default: set; the reader checked the value

  // --- JSON `setup` block -------------------------------------------------------------------
  const char* json_key = nullptr;
  J (*json_get)(const TrainingSetup&) = nullptr;      // default: get
  bool (*json_when)(const TrainingSetup&) = nullptr;  // written only when this holds (default: always)

  // --- printed command lines (setup_to_args) ------------------------------------------------
  bool args_always = false;                           // printed even at its default (the layout)
  bool (*args_when)(const TrainingSetup&) = nullptr;  // printed only when this holds
  J (*args_get)(const TrainingSetup&) = nullptr;      // default: get

  // --- the TrainingSetup ----------------------------------------------------------------------
  J (*get)(const TrainingSetup&) = nullptr;
  void (*set)(TrainingSetup&, const J&) = nullptr;
  // mme flags: replaces set (rules of the command line, e.g. --recompute-modules implies selective).
  void (*mme_set)(TrainingSetup&, const J&, const MmeFlags&) = nullptr;

  const char* why_not = "";  // for tests and readers: why a path the knob lacks is absent
};

// A kModules knob's names: its modules from text ("core_attn,mlp", spaces and brackets allowed;
// UsageError for an unknown name), and back as comma-separated text.
inline std::uint32_t knob_modules(const SetupKnob& k, const std::string& text) {
  return k.parse_modules ? k.parse_modules(text) : parse_recompute_modules(text);
}
inline std::string knob_modules_text(const SetupKnob& k, std::uint32_t modules) {
  return k.modules_text ? k.modules_text(modules) : recompute_modules_to_string(modules);
}

// Every knob, in spec-file order (sections parallelism, training, infrastructure, precision;
// knobs without a spec field next to their kin).
const std::vector<SetupKnob>& setup_knobs();
// The knobs in command-line order: `--help`, docs/cli.md and printed command lines.
const std::vector<const SetupKnob*>& setup_knobs_in_flag_order();
// The knob of an id, an mme flag or alias, or a Megatron-LM spelling (nullptr if none).
const SetupKnob* find_knob(std::string_view name);

// The JSON value of a flag's text: the knob's kind, range and values. UsageError naming `flag`
// ("--tp: expected a positive integer, got 0", "--precision: unknown value 'x' (bf16, ...)");
// `megatron` text beyond the range is a LayoutError ("--micro-batch-size N is larger than ...,
// which no real run uses"), as Megatron-LM flags always were.
nlohmann::json parse_knob_text(const SetupKnob& knob, std::string_view flag, const std::string& text,
                               bool megatron = false);
// An integer flag's value in [min, max]: UsageError naming `flag` ("--tp: expected a positive
// integer, got 0", "... is too large (at most N)"). `megatron`: beyond `max` is the LayoutError
// Megatron-LM flags always gave ("--seq-length N is larger than M, which no real run uses").
std::int64_t parse_int(std::string_view flag, const std::string& text, std::int64_t min, std::int64_t max,
                       bool megatron = false);
// The text of a value on a command line ("4", "0.3", "core_attn,mlp", "a2a+p2p").
std::string knob_text(const SetupKnob& knob, const nlohmann::json& value);
// "bf16, fp16, fp8, fp32": what an enum knob accepts, for messages.
std::string knob_values_text(const SetupKnob& knob);
// The knob's value in `setup` as its spec field shows it (`get` elsewhere, or the path's own getter).
nlohmann::json knob_spec_value(const SetupKnob& knob, const TrainingSetup& setup);

// mme flags -> setup, on top of `base` (defaults, a spec, or Megatron-LM flags). Throws UsageError.
TrainingSetup setup_from_mme_flags(const MmeFlags& flags, TrainingSetup base);
// An mme command line of setup flags ("--tp", "4", "--sequence-parallel", ...) as MmeFlags: a
// flag the schema does not know, or a value flag without its value, is a UsageError.
std::unique_ptr<MmeFlags> mme_flags_from_args(const std::vector<std::string>& args);
// setup -> the `mme estimate` flags that give it: the layout, and every knob that differs
// from TrainingSetup's defaults (what Planner prints).
std::vector<std::string> setup_to_mme_args(const TrainingSetup& setup);
// setup -> the JSON `setup` block (estimate --json, plan --json).
nlohmann::json setup_to_json_block(const TrainingSetup& setup);
// The JSON `setup` block -> setup, on top of `base` (derived entries such as dp are skipped).
TrainingSetup setup_from_json_block(const nlohmann::json& block, TrainingSetup base);
// setup -> Megatron-LM flags (["--tensor-model-parallel-size", "4", "--bf16", ...]): every knob
// Megatron-LM has a flag for, at its value; `resolved` also gives the knobs left unset the value
// mme resolves them to (a launch line that means what mme estimated).
std::vector<std::string> setup_to_megatron_args(const TrainingSetup& setup, bool resolved = false);

// How mme treats the flags of a Megatron-LM launch line that are not settings of the setup or
// the model: without a memory effect (silent), with one mme does not model (the report's
// assumptions say so), or unknown (one warning lists them).
struct MegatronFlagReview {
  std::vector<std::string> not_modelled;  // "--tp-comm-overlap: ...", one line each
  std::vector<std::string> unknown;       // "--some-flag", in the order given
};
MegatronFlagReview review_megatron_flags(const MegatronArgs& args);
// The Megatron-LM flags the megatron_args adapter reads to describe the model (megatron_flags.hpp's table).
const std::vector<std::string_view>& megatron_model_flags();
// The Megatron-LM flags without an effect on the memory of a training step (silent in the review;
// flags of the prefixes log-, wandb-, ckpt-, lr-, eval-, data- ... as well).
const std::vector<std::string_view>& megatron_no_effect_flags();
// The Megatron-LM flags with a memory effect mme does not model (review_megatron_flags names
// them in the assumptions; flags of the prefixes rl-, grpo-, inference-, export- as well).
const std::vector<std::string_view>& megatron_not_modelled_flags();

// docs/cli.md's "Layout and training flags" and "Switches" tables, as Markdown.
std::string setup_flags_markdown();
std::string setup_switches_markdown();

}  // namespace mme
