// The static reader of launch scripts (launch_script.hpp): runs the evaluator (launch_shell.hpp)
// on the tree of shell_syntax.cpp, takes the one launch it finds, splits the entry script's words
// into flags by Megatron-LM's arity, and checks the launch (entry script, flags, values mme reads).
#include "mme/inputs/launch_script.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include <fmt/core.h>

#include "mme/inputs/megatron_flags.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/training_setup.hpp"

#include "launch_shell.hpp"
#include "shell_syntax.hpp"

namespace mme {

using launch::Found;
using launch::is_name;
using launch::Shared;
using launch::Shell;
using launch::Str;
using launch::Var;

namespace {

struct Entry {
  const char* file;
  const char* family;  // "" modelled
};
// Megatron-LM's entry scripts (its top folder and examples/): what each trains.
constexpr Entry kEntries[] = {
    {"pretrain_gpt.py", ""},
    {"pretrain_bert.py", "BERT models"},
    {"pretrain_t5.py", "T5 encoder-decoder models"},
    {"pretrain_hybrid.py", ""},  // hybrid models, from their --hybrid-layer-pattern
    {"pretrain_mamba.py", ""},   // its earlier name
    {"pretrain_retro.py", "RETRO models"},
    {"pretrain_ict.py", "ICT retrievers (BERT models)"},
    {"pretrain_vlm.py", "vision-language models"},
    {"train_rl.py", "RL loops (a generation engine next to training)"},
    {"run_simple_mcore_train_loop.py", "the example loop's own model"},
};

bool looks_like_flag(const Str& s) {
  if (!s.known() || s.text.size() < 2 || s.text[0] != '-') return false;
  // A negative number is a value (argparse: the parser has no option that looks like one).
  return !(std::isdigit(static_cast<unsigned char>(s.text[1])) || s.text[1] == '.');
}

// The flags of an argument list, each with the number of values Megatron-LM's parser gives it
// (the entry script's own named flags, and flags it lacks: the words up to the next flag).
void read_flags(const Found& f, const LaunchScriptOptions& options, const std::string& entry, LaunchScript& out) {
  const std::string who = entry.empty() ? "Megatron-LM" : entry;
  const auto& words = f.args;
  std::vector<MegatronArgs::Flag> flags;
  std::size_t k = 0;
  while (k < words.size()) {
    const Str& w = words[k];
    if (!w.known())
      throw UsageError(
          fmt::format("{}: {} stands where a flag of {} would: {}; its words may be flags, so mme does "
                      "not guess them (give its value, or an empty one)",
                      f.where, w.text, who, w.unknown));
    if (!looks_like_flag(w) || w.text.rfind("--", 0) != 0) {
      // A word cut out of an unquoted value with blanks (`${ARGS[@]}` over `--x "a b"`): bash
      // hands the parser its parts, so the script itself fails; say where the word came from.
      // Not for a value that starts with a flag (EXTRA="--swiglu extra", $EXTRA): that one was
      // meant to be split, and quoting it is not the fix.
      std::string split;
      if (!w.split_from.empty() && w.split_from[0] != '-')
        split = fmt::format(
            " ('{}' is a part of the value '{}', which an unquoted expansion split at its blanks, as bash "
            "does: quote the expansion, \"${{X[@]}}\", to pass the value as one word)",
            w.text, excerpt(w.split_from, 120));
      throw UsageError(
          fmt::format("{}: '{}' is not a flag, and {} takes no more values: {} would stop with "
                      "'unrecognized arguments'{}",
                      f.where, w.text, flags.empty() ? "no flag before it" : "--" + flags.back().name, who, split));
    }
    std::string name = w.text.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const MegatronLmFlag* lm = find_megatron_lm_flag(name);
    const bool extra =
        std::find(options.extra_flags.begin(), options.extra_flags.end(), name) != options.extra_flags.end();
    if (!lm && !extra) out.not_megatron.push_back("--" + name);
    MegatronArgs::Flag flag{name, {}};
    ++k;
    if (inline_value) {
      if (lm && lm->max_values == 0)
        throw UsageError(
            fmt::format("{}: --{}={}: --{} is a switch and takes no value", f.where, name, *inline_value, name));
      flag.values.push_back(*inline_value);
    } else {
      const int lo = lm ? lm->min_values : 0, hi = lm ? lm->max_values : -1;
      while (k < words.size() && (hi < 0 || static_cast<int>(flag.values.size()) < hi) && !looks_like_flag(words[k])) {
        const Str& v = words[k];
        // Beyond the values a flag needs, a word mme does not know may hold flags.
        if (!v.known() && static_cast<int>(flag.values.size()) >= std::max(lo, 1)) break;
        if (!v.known() && flag.unknown.empty()) flag.unknown = v.unknown;
        flag.values.push_back(v.text);
        ++k;
      }
      if (static_cast<int>(flag.values.size()) < lo)
        throw UsageError(fmt::format("{}: --{} expects {} value{}{}: {} would stop with an error", f.where, name,
                                     lo == 1 ? "one" : std::to_string(lo), lo == 1 ? "" : "s",
                                     k < words.size() ? fmt::format(", not '{}'", words[k].text) : std::string(), who));
    }
    std::replace(flag.name.begin(), flag.name.end(), '_', '-');
    flags.push_back(std::move(flag));
  }
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& [name, v] : f.env) {
    env.emplace_back(name, v.text);
    if (!v.known()) out.unknown_env[name] = v.unknown;
  }
  out.args = MegatronArgs::from_flags(std::move(flags), std::move(env));
}

}  // namespace

std::optional<std::string> entry_script_family(std::string_view file_name) {
  for (const auto& e : kEntries)
    if (file_name == e.file) return std::string(e.family);
  if (file_name.rfind("pretrain_vision_", 0) == 0) return std::string("vision models");
  return std::nullopt;
}

LaunchScript read_launch_script(std::string_view text, const std::string& source, const LaunchScriptOptions& options) {
  Shared shared{options, {}, {}, {}, 0};
  Shell sh(shared, source, 0);
  sh.zero = source;
  for (const auto& [name, value] : options.variables) {
    if (!is_name(name)) throw UsageError(fmt::format("--set {}=...: '{}' is not a variable name", name, name));
    Var& v = sh.vars[name];
    v.items = {Str::of(value)};
    v.exported = true;
    v.given = true;
  }
  for (const auto& a : options.script_args) sh.positional.push_back(Str::of(a));
  const auto tree = shell::parse_script(text, source, 1);
  sh.run_script(*tree);

  auto& found = shared.found;
  if (found.empty()) {
    std::string notes;
    for (const auto& n : shared.notes) notes += "; " + n;
    throw UsageError(
        fmt::format("{}: no command launches a Megatron-LM entry script (torchrun ... pretrain_gpt.py "
                    "..., python pretrain_gpt.py ..., or a list of flags){}",
                    source, notes));
  }
  if (found.size() > 1) {
    std::string lines;
    for (const auto& f : found) lines += (lines.empty() ? "" : ", ") + f.where;
    throw UsageError(
        fmt::format("{}: {} commands launch an entry script ({}): mme reads one run; keep one, or give "
                    "the run as a list of flags",
                    source, found.size(), lines));
  }
  const Found& f = found.front();
  LaunchScript out;
  out.line = f.line;
  out.where = f.where;
  out.launcher = f.launcher;
  out.world_size_from = f.world_from;
  out.world_size_unknown = f.world_unknown;
  if (!f.bare) {
    out.entry = f.entry.text;
    out.entry_name = f.entry.file_name();
    if (out.entry_name.empty())
      throw UsageError(fmt::format("{}: the entry script {} is not known: {}", f.where, f.entry.text, f.entry.unknown));
  }
  try {
    read_flags(f, options, out.entry_name, out);
  } catch (const UsageError&) {
    // An entry script mme refuses by name: that is the error to give (check_launch_script).
    const auto family = entry_script_family(out.entry_name);
    if (!family || family->empty()) throw;
  }
  out.args.world_size = f.world_size;
  if (!shared.defaults_used.empty()) {
    std::string list;
    for (const auto& d : shared.defaults_used) list += (list.empty() ? "" : ", ") + d;
    out.assumptions.push_back(printable(fmt::format(
        "{}: variables the script does not set take the script's defaults: {} (--set NAME=VALUE, --script-arg give "
        "them)",
        source, list.size() > 400 ? list.substr(0, 397) + "..." : list)));
  }
  return out;
}

namespace {

// Whether mme reads a flag's value: the setup's flags and the model's (those with a condition
// when it holds).
bool value_read(const std::string& name, const MegatronArgs& args) {
  for (const auto& m : model_flags())
    if (name == m.name) return !m.value_read || m.value_read(args);
  const SetupKnob* k = find_knob(name);
  if (!k) return false;
  auto in = [&](const std::vector<const char*>& list) {
    return std::any_of(list.begin(), list.end(), [&](const char* f) { return name == f; });
  };
  return in(k->megatron) || in(k->megatron_off) || in(k->megatron_extra);
}

// What a flag that Megatron-LM lacks is, where mme knows: a launcher's, or a name Megatron-LM
// has only in its config.
std::string not_megatron_hint(const std::string& flag) {
  static const std::set<std::string> launcher = {
      "nnodes",      "nproc-per-node", "nproc_per_node", "node-rank",    "node_rank", "master-addr", "master_addr",
      "master-port", "master_port",    "rdzv-endpoint",  "rdzv-backend", "rdzv-id",   "standalone"};
  const std::string name = flag.substr(2);
  if (name.find_first_of(" \t") != std::string::npos)
    return "one argument that holds a blank, as a quoted \"${X[@]}\" hands over an array element \"--flag value\": "
           "argparse reads it as no flag";
  if (launcher.count(name))
    return fmt::format("it is torchrun's: write it before the entry script (torchrun {} ... pretrain_gpt.py ...)",
                       flag);
  if (name == "world-size")
    return "torchrun sets the world size: give the GPU count as torchrun --nproc_per_node N --nnodes M, or with "
           "mme's --num-gpus";
  if (name == "virtual-pipeline-model-parallel-size")
    return "Megatron-LM sets it from --num-virtual-stages-per-pipeline-rank or --num-layers-per-virtual-pipeline-stage";
  if (name.rfind("cpu-offloading", 0) == 0 || name.rfind("no-cpu-offloading", 0) == 0)
    return "Megatron-LM's activation offloading is --cpu-offloading-num-layers N (it turns cpu_offloading on)";
  const std::string near = closest_megatron_lm_flag(name);
  return near.empty() ? "" : fmt::format("did you mean --{}?", near);
}

}  // namespace

void check_launch_script(LaunchScript& s, const std::string& source, const LaunchScriptOptions& options) {
  if (!s.entry.empty()) {
    const auto family = entry_script_family(s.entry_name);
    if (family && !family->empty())
      throw UsageError(
          fmt::format("{}: {} trains {}, which mme does not model: mme estimates the models of "
                      "Megatron-LM's pretrain_gpt.py (dense, MoE, MLA, MTP) and pretrain_hybrid.py (Mamba hybrids)",
                      s.where, s.entry, *family));
    // A hybrid model is described by its layer pattern (training/utils is_hybrid_model); the ratio
    // flags that once drew one are not modelled.
    if (family && (s.entry_name == "pretrain_hybrid.py" || s.entry_name == "pretrain_mamba.py") &&
        !s.args.has(ModelFlag::kHybridLayerPattern) && !s.args.has(ModelFlag::kHybridOverridePattern))
      throw UsageError(fmt::format("{}: {} without --{}: mme models a hybrid model from its layer pattern", s.where,
                                   s.entry, flag_name(ModelFlag::kHybridLayerPattern)));
    if (!family) {
      if (!options.assume_gpt_entry)
        throw UsageError(
            fmt::format("{}: {} is not a Megatron-LM entry script mme knows: mme models "
                        "pretrain_gpt.py; if {} builds its model as pretrain_gpt.py does, say so with "
                        "--assume-gpt-entry",
                        s.where, s.entry, s.entry_name));
      s.warnings.push_back(printable(fmt::format(
          "{}: {} is taken to build its model as pretrain_gpt.py does (--assume-gpt-entry)", s.where, s.entry)));
    }
  }
  if (!s.not_megatron.empty()) {
    std::string list;
    for (const auto& f : s.not_megatron) {
      const std::string hint = not_megatron_hint(f);
      list += (list.empty() ? "" : "; ") + f + (hint.empty() ? "" : " (" + hint + ")");
    }
    throw UsageError(printable(fmt::format(
        "{}: {} Megatron-LM's parser lacks (megatron/training/arguments.py, commit {}), which would stop with "
        "'unrecognized arguments': {}. A flag the entry script adds itself is accepted with --extra-megatron-flag "
        "NAME",
        s.where, s.not_megatron.size() == 1 ? "a flag" : fmt::format("{} flags", s.not_megatron.size()),
        megatron_lm_commit(), list)));
  }
  for (const auto& f : s.args.flags())
    if (!f.unknown.empty() && value_read(f.name, s.args)) {
      std::string shown;
      for (const auto& v : f.values) shown += " " + v;
      throw UsageError(printable(fmt::format("{}: --{}{}: {}", source, f.name, shown, f.unknown)));
    }
  for (const auto& [name, why] : s.unknown_env)
    if (is_modelled_environment(name))
      throw UsageError(printable(fmt::format("{}: the environment variable {}: {}", source, name, why)));
  for (const auto& name : options.extra_flags)
    if (s.args.has(name) && !find_megatron_lm_flag(name))
      s.warnings.push_back(
          printable(fmt::format("--{}: not a flag of Megatron-LM's parser, taken as the entry script's own "
                                "(--extra-megatron-flag); its memory effect is not modelled",
                                name)));
  MegatronFlagReview review = review_megatron_flags(s.args);
  s.assumptions.insert(s.assumptions.end(), review.not_modelled.begin(), review.not_modelled.end());
  // The entry script's own flags have their warning above.
  std::erase_if(review.unknown, [&](const std::string& f) {
    return std::find(options.extra_flags.begin(), options.extra_flags.end(), f.substr(2)) != options.extra_flags.end();
  });
  if (!review.unknown.empty()) {
    std::string names;
    for (const auto& n : review.unknown) names += (names.empty() ? "" : ", ") + n;
    s.warnings.push_back(
        printable(fmt::format("{}: {} Megatron-LM flag{} whose memory effect mme does not know, "
                              "taken to have none: {}",
                              source, review.unknown.size(), review.unknown.size() == 1 ? "" : "s", names)));
  }
}

}  // namespace mme
