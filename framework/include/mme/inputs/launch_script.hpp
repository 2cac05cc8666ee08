// A launch script read without running it: the static reader of the shell that Megatron-LM
// launch scripts use (docs/cli.md, "Launch scripts"). It evaluates assignments, `export`,
// ${X}, ${X:-default} and the other parameter expansions, positional parameters, $((...)),
// arrays with comments and continuations, `X+=( ... )`, "${X[@]}", quoting, if / elif / else,
// case, loops and functions on values it knows, finds the command that launches the entry
// script (torchrun, python -m torch.distributed.run, srun, mpirun, deepspeed, bash -c, an
// sbatch here-document, a bare argument list) and splits it into the launcher, the entry script
// and the entry script's flags, by the number of values each Megatron-LM flag takes.
//
// It never runs anything: a command substitution is a value it does not know, another file is
// read only when the user names it (--script-source), and what it cannot evaluate is an error
// naming the line and the construct, never a silently dropped flag. A value it does not know
// is allowed only where mme does not read it (`--save $1`); check_launch_script refuses the
// others, the entry scripts mme does not model and the flags Megatron-LM's parser lacks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mme/inputs/megatron_args.hpp"

namespace mme {

struct LaunchScriptOptions {
  // --set NAME=VALUE: the environment the script starts with (`NAME=VALUE bash launch.sh`);
  // an assignment in the script replaces it, as in bash.
  std::vector<std::pair<std::string, std::string>> variables;
  std::vector<std::string> script_args;        // --script-arg VALUE: $1, $2, ...
  std::vector<std::filesystem::path> sources;  // --script-source FILE: what `source` / `.` may read
  std::vector<std::string> extra_flags;        // --extra-megatron-flag NAME: the entry script's own flags
  bool assume_gpt_entry = false;               // --assume-gpt-entry: an unknown entry script builds a GPT model
};

struct LaunchScript {
  // The entry script's flags (unknown values marked: MegatronArgs::Flag::unknown), the run's
  // environment (what the script exports) and the GPU count when the launcher says it.
  MegatronArgs args;
  std::string entry;               // the entry script as launched ("../pretrain_hybrid.py"); "" for a bare list
  std::string entry_name;          // its file name ("pretrain_hybrid.py")
  std::size_t line = 0;            // the line of the launch command
  std::string where;               // "launch.sh:40", "launch.sh:95 (bash -c):3" for messages
  std::string launcher;            // "torchrun", "python", "srun", ...; "" for a bare argument list
  std::string world_size_from;     // how the GPU count was found ("torchrun --nproc_per_node 8 x --nnodes 2")
  std::string world_size_unknown;  // why the launcher's GPU count is not known ("" if it is, or is not given)
  // Flags of the argument list that Megatron-LM's parser lacks, as written ("--world-size"), with
  // the line; the entry script's own (--extra-megatron-flag) are not among them.
  std::vector<std::string> not_megatron;
  std::map<std::string, std::string> unknown_env;  // exported variables of unknown value: why
  std::vector<std::string> warnings;               // what the reader assumed that may change the estimate
  std::vector<std::string> assumptions;            // what it took as given (defaults of unset variables)
};

// Reads a launch script, a pasted launch line or an argument file. UsageError "<source>:<line>:
// ..." for a syntax error, a construct it cannot evaluate where it decides the launch, no launch
// or more than one, and a word of unknown value standing where a flag would be.
LaunchScript read_launch_script(std::string_view text, const std::string& source,
                                const LaunchScriptOptions& options = {});

// What mme estimates from a launch: the entry script is pretrain_gpt.py (or --assume-gpt-entry),
// every flag is Megatron-LM's (UsageError with a did-you-mean) or named by
// --extra-megatron-flag (a warning), and no value mme reads is unknown. Then the flags that
// are not the setup's or the model's: without a memory effect (silent), with one mme does not
// model (assumptions) or unclassified (one warning), review_megatron_flags.
void check_launch_script(LaunchScript& script, const std::string& source, const LaunchScriptOptions& options = {});

// Megatron-LM's entry scripts by file name: "" for the one mme models (pretrain_gpt.py), else
// what it trains ("BERT models" for pretrain_bert.py), or nullopt for a script mme does not know.
std::optional<std::string> entry_script_family(std::string_view file_name);

}  // namespace mme
