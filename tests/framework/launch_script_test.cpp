// The static reader of launch scripts (framework/src/inputs/launch_script.cpp): scripts written
// for these tests in each shape real launch scripts take (arrays, variables, defaults,
// arithmetic, conditionals, loops, functions, launchers) and the refusals. Every expected flag
// and count is read off the script text by hand, as bash would run it.
#include "mme/inputs/launch_script.hpp"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mme/inputs/megatron_flags.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"

#include "test_support.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// read + check, as the CLI does.
LaunchScript checked(const std::string& text, const LaunchScriptOptions& o = {}) {
  LaunchScript s = read_launch_script(text, "launch.sh", o);
  check_launch_script(s, "launch.sh", o);
  return s;
}

std::string error_of(const std::string& text, const LaunchScriptOptions& o = {}) {
  try {
    checked(text, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

// "--name v1 v2" for every flag, in order: what the entry script receives.
std::string flags_of(const LaunchScript& s) {
  std::string out;
  for (const auto& f : s.args.flags()) {
    out += (out.empty() ? "--" : " --") + f.name;
    for (const auto& v : f.values) out += " " + v;
  }
  return out;
}

TEST(LaunchScript, ArraysWithCommentsContinuationsAndAppends) {
  const auto s = checked(R"sh(#!/bin/bash
GPT_ARGS=(
    --num-layers 4       # a comment inside the array
    --hidden-size 256 \
    --num-attention-heads 8
)
GPT_ARGS+=(--seq-length 128)
EXTRA=( "--micro-batch-size 2" )   # one element with a space: split when unquoted
torchrun --nproc_per_node 2 pretrain_gpt.py "${GPT_ARGS[@]}" ${EXTRA[@]} --bf16
)sh");
  EXPECT_EQ(flags_of(s),
            "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 --micro-batch-size 2 --bf16");
  EXPECT_EQ(s.entry, "pretrain_gpt.py");
  EXPECT_EQ(s.line, 9u);
  EXPECT_EQ(s.args.world_size, 2);  // torchrun's 2 processes x its default 1 node
}

TEST(LaunchScript, VariablesDefaultsAndPositionalParameters) {
  const std::string script = R"sh(
NUM_LAYERS=${1:-12}
HIDDEN=${HIDDEN_SIZE:-512}
: ${HEADS:=8}
export NVTE_FLASH_ATTN=0
python pretrain_gpt.py --num-layers $NUM_LAYERS --hidden-size "${HIDDEN}" --num-attention-heads=$HEADS
)sh";
  const auto plain = checked(script);
  EXPECT_EQ(flags_of(plain), "--num-layers 12 --hidden-size 512 --num-attention-heads 8");
  ASSERT_EQ(plain.args.env().size(), 1u);
  EXPECT_EQ(plain.args.env()[0], (std::pair<std::string, std::string>("NVTE_FLASH_ATTN", "0")));
  // The defaults taken are an assumption the report states.
  ASSERT_EQ(plain.assumptions.size(), 1u);
  EXPECT_THAT(plain.assumptions[0], HasSubstr("$1=12, HEADS=8, HIDDEN_SIZE=512"));
  // --script-arg gives $1, --set the environment the script starts with.
  LaunchScriptOptions o;
  o.script_args = {"24"};
  o.variables = {{"HIDDEN_SIZE", "1024"}};
  EXPECT_EQ(flags_of(checked(script, o)), "--num-layers 24 --hidden-size 1024 --num-attention-heads 8");
}

TEST(LaunchScript, Arithmetic) {
  const auto s = checked(R"sh(
GPUS_PER_NODE=8
NUM_NODES=2
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
PP=2
NLS=$((3*PP + 2))
(( NLS++ ))
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES --master_addr localhost)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py --num-layers $NLS --pipeline-model-parallel-size $PP \
  --global-batch-size $(( WORLD_SIZE / PP * 4 )) --hidden-size 64 --num-attention-heads 4
)sh");
  // 3*2+2 = 8, then ++ = 9; 16 / 2 * 4 = 32; torchrun: 8 per node x 2 nodes.
  EXPECT_EQ(flags_of(s),
            "--num-layers 9 --pipeline-model-parallel-size 2 --global-batch-size 32 --hidden-size 64 "
            "--num-attention-heads 4");
  EXPECT_EQ(s.args.world_size, 16);
  EXPECT_EQ(s.launcher, "torchrun");
  EXPECT_THAT(s.world_size_from, HasSubstr("--nproc_per_node 8 x --nnodes 2"));
}

TEST(LaunchScript, ConditionalsCaseAndLoops) {
  const auto s = checked(R"sh(
DTYPE="fp8"
SCALE=8B
case "${SCALE}" in
  "800M") HIDDEN=1024 ;;
  8B|9B)  HIDDEN=4096 ;;
  *) echo "unknown"; exit 1 ;;
esac
ARGS=(--hidden-size $HIDDEN --num-layers 2 --num-attention-heads 32)
if [[ "$DTYPE" == "fp8" ]]; then
  ARGS+=("--fp8-format hybrid" --bf16)
elif [ "$DTYPE" = bf16 ]; then
  ARGS+=(--bf16)
else
  ARGS+=(--fp16)
fi
if [ 4 -gt 2 ] && [[ -z "$UNSET_BUT_DEFAULTED" || 1 -eq 1 ]]; then ARGS+=(--sequence-parallel); fi
for m in core_attn mlp; do MODULES="$MODULES $m"; done
i=0
while [ $i -lt 2 ]; do i=$((i + 1)); done
ARGS+=(--recompute-modules $MODULES --micro-batch-size $i)
python3 -u pretrain_gpt.py ${ARGS[@]}
)sh");
  EXPECT_EQ(flags_of(s),
            "--hidden-size 4096 --num-layers 2 --num-attention-heads 32 --fp8-format hybrid --bf16 "
            "--sequence-parallel --recompute-modules core_attn mlp --micro-batch-size 2");
}

TEST(LaunchScript, UnknownConditionsGuardingNothingAreSkipped) {
  // File tests and commands mme does not run: harmless where their branches change nothing.
  const auto s = checked(R"sh(
CKPT=$1
if [ ! -d "$CKPT" ]; then
  echo "Error: no $CKPT"
  exit 1
fi
mkdir -p "$(dirname "$CKPT")" || { echo "cannot create"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi
python pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --save $CKPT --load "$CKPT/x"
)sh");
  // $1 is not given: --save and --load keep their text (mme reads neither).
  EXPECT_EQ(flags_of(s), "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --save $1 --load $1/x");
}

TEST(LaunchScript, UnknownConditionsThatChangeTheLaunchAreErrors) {
  EXPECT_EQ(error_of("if [ -f /etc/big ]; then\n  L=8\nfi\npython pretrain_gpt.py --num-layers ${L:-4}\n"),
            "launch.sh:1: `if [ -f /etc/big ]; then`: line 1: `-f /etc/big` tests the file system, which mme does "
            "not look at, and a branch of this if changes the launch");
  EXPECT_THAT(error_of("case $(hostname) in\n  big) TP=8 ;;\nesac\npython pretrain_gpt.py --num-layers 2\n"),
              HasSubstr("launch.sh:1: `case $(hostname) in`: line 1: $(hostname) is a command substitution, which mme "
                        "never runs, and an item of this case changes the launch"));
}

TEST(LaunchScript, ConditionsReadAVariableTheScriptNeverSetsAsUnset) {
  // As in a clean environment: the script's default path, stated in the assumptions.
  const std::string script =
      "ARGS=(--num-layers 2)\n"
      "if [ -n \"${WANDB_API_KEY}\" ]; then ARGS+=(--wandb-project p); fi\n"
      "case \"$SCALE\" in big) ARGS+=(--hidden-size 4096) ;; *) ARGS+=(--hidden-size 64) ;; esac\n"
      "python pretrain_gpt.py ${ARGS[@]}\n";
  const auto clean = checked(script);
  EXPECT_EQ(flags_of(clean), "--num-layers 2 --hidden-size 64");
  ASSERT_EQ(clean.assumptions.size(), 1u);
  EXPECT_THAT(clean.assumptions[0], HasSubstr("SCALE unset, WANDB_API_KEY unset"));
  LaunchScriptOptions o;
  o.variables = {{"WANDB_API_KEY", "k"}, {"SCALE", "big"}};
  EXPECT_EQ(flags_of(checked(script, o)), "--num-layers 2 --wandb-project p --hidden-size 4096");
}

TEST(LaunchScript, FunctionsEvalAndShift) {
  const auto s = checked(R"sh(
add() { ARGS+=("$@"); }
set -- --num-layers 6 --hidden-size 128
add "$1" "$2"
shift 2
add "$@"
CMD="python pretrain_gpt.py ${ARGS[*]} --num-attention-heads 2"
eval "$CMD"
)sh");
  EXPECT_EQ(flags_of(s), "--num-layers 6 --hidden-size 128 --num-attention-heads 2");
}

TEST(LaunchScript, Launchers) {
  // python -m torch.distributed.run after a wrapper; the count from its flags.
  auto s = checked(
      "VENV=\"uv run\"\nPROFILE=()\n$VENV \"${PROFILE[@]}\" python -m torch.distributed.run --nproc-per-node=4 "
      "--nnodes 3 pretrain_gpt.py --num-layers 2\n");
  EXPECT_EQ(s.args.world_size, 12);
  EXPECT_EQ(flags_of(s), "--num-layers 2");
  // srun's tasks; mpirun's -np; deepspeed's GPUs x nodes; an exported WORLD_SIZE.
  EXPECT_EQ(checked("srun -N 2 --ntasks-per-node=8 -l python pretrain_gpt.py --num-layers 2\n").args.world_size, 16);
  EXPECT_EQ(checked("srun --ntasks 6 python pretrain_gpt.py --num-layers 2\n").args.world_size, 6);
  EXPECT_EQ(checked("mpirun -np 4 -x NCCL_DEBUG=INFO python pretrain_gpt.py --num-layers 2\n").args.world_size, 4);
  EXPECT_EQ(checked("deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py --num-layers 2\n").args.world_size, 16);
  EXPECT_EQ(checked("export WORLD_SIZE=32\npython pretrain_gpt.py --num-layers 2\n").args.world_size, 32);
  // No count at all: the GPU count is left to --num-gpus (or mme's default).
  const auto none = checked("python pretrain_gpt.py --num-layers 2\n");
  EXPECT_FALSE(none.args.world_size);
  EXPECT_EQ(none.world_size_unknown, "");
  // A count the script does not give is not guessed.
  EXPECT_THAT(checked("torchrun --nproc_per_node $GPUS pretrain_gpt.py --num-layers 2\n").world_size_unknown,
              HasSubstr("--nproc_per_node $GPUS: line 1: GPUS is not set in the script"));
}

TEST(LaunchScript, BashDashCAndSbatchHereDocuments) {
  // The command string of bash -c, inside an sbatch here-document that the outer shell expands
  // (\$ stays for the job's shell).
  const auto s = checked(R"sh(
TP=${TP:-2}
ARGS=(--tensor-model-parallel-size ${TP} --num-layers 4)
CMD="cd /work; python /opt/megatron/pretrain_gpt.py ${ARGS[@]}"
sbatch <<EOF
#!/bin/bash
#SBATCH --nodes=2
srun --mpi=pmix bash -x -c "${CMD}" 2>&1 | tee \${SLURM_JOB_ID}.log
EOF
)sh");
  EXPECT_EQ(flags_of(s), "--tensor-model-parallel-size 2 --num-layers 4");
  EXPECT_EQ(s.entry, "/opt/megatron/pretrain_gpt.py");
  EXPECT_FALSE(s.args.world_size);  // srun without a task count
}

TEST(LaunchScript, BareArgumentFilesAndPrefixEnvironment) {
  // An argument file: flag lines joined by continuations, or one per line.
  const auto s = checked("export NVTE_FUSED_ATTN=0\n--num-layers 2 \\\n  --hidden-size 64\n--swiglu\n");
  EXPECT_EQ(flags_of(s), "--num-layers 2 --hidden-size 64 --swiglu");
  EXPECT_EQ(s.entry, "");
  ASSERT_EQ(s.args.env().size(), 1u);
  // A command's own assignments are its environment.
  const auto p = checked("NVTE_FLASH_ATTN=0 torchrun pretrain_gpt.py --num-layers 2\n");
  ASSERT_EQ(p.args.env().size(), 1u);
  EXPECT_EQ(p.args.env()[0].first, "NVTE_FLASH_ATTN");
}

TEST(LaunchScript, FlagValuesByMegatronLmArity) {
  // --recompute-modules takes any number of values, --swiglu none, --seq-length one; a word no
  // flag takes is what Megatron-LM's parser would stop on.
  EXPECT_EQ(flags_of(checked("python pretrain_gpt.py --recompute-modules core_attn mlp --swiglu --seq-length 8\n")),
            "--recompute-modules core_attn mlp --swiglu --seq-length 8");
  EXPECT_EQ(error_of("python pretrain_gpt.py --swiglu extra\n"),
            "launch.sh:1: 'extra' is not a flag, and --swiglu takes no more values: pretrain_gpt.py would stop with "
            "'unrecognized arguments'");
  // A quoted value with blanks inside an array, expanded unquoted (Megatron-LM's
  // gpt3/train_gpt3_175b_distributed.sh does this with --step-batch-size-schedule): bash splits
  // it, the parser stops, and the message says where the stray word came from.
  EXPECT_EQ(error_of("A=(\n  --step-batch-size-schedule \"0:16 2.4B:320\"\n)\npython pretrain_gpt.py ${A[@]}\n"),
            "launch.sh:4: '2.4B:320' is not a flag, and --step-batch-size-schedule takes no more values: "
            "pretrain_gpt.py would stop with 'unrecognized arguments' ('2.4B:320' is a part of the value "
            "'0:16 2.4B:320', which an unquoted expansion split at its blanks, as bash does: quote the "
            "expansion, \"${X[@]}\", to pass the value as one word)");
  // Quoted, the value stays one word.
  const auto quoted = checked("A=(--step-batch-size-schedule \"0:16 2.4B:320\")\npython pretrain_gpt.py \"${A[@]}\"\n");
  ASSERT_EQ(quoted.args.flags().size(), 1u);
  EXPECT_EQ(quoted.args.flags()[0].values, std::vector<std::string>{"0:16 2.4B:320"});
  // A stray word that no expansion split says nothing more, nor one from a value of flags,
  // which was meant to be split.
  EXPECT_THAT(error_of("python pretrain_gpt.py --swiglu extra\n"), Not(HasSubstr("split")));
  EXPECT_EQ(error_of("EXTRA=\"--swiglu extra\"\npython pretrain_gpt.py $EXTRA\n"),
            "launch.sh:2: 'extra' is not a flag, and --swiglu takes no more values: pretrain_gpt.py would stop with "
            "'unrecognized arguments'");
  EXPECT_THAT(error_of("python pretrain_gpt.py --seq-length --swiglu\n"), HasSubstr("--seq-length expects one value"));
  EXPECT_THAT(error_of("python pretrain_gpt.py --swiglu=1\n"), HasSubstr("--swiglu is a switch and takes no value"));
}

TEST(LaunchScript, EntryScriptsDecideTheFamily) {
  EXPECT_EQ(error_of("torchrun --nproc_per_node 8 pretrain_bert.py --num-layers 24\n"),
            "launch.sh:1: pretrain_bert.py trains BERT models, which mme does not model: mme estimates the models of "
            "Megatron-LM's pretrain_gpt.py (dense, MoE, MLA, MTP) and pretrain_hybrid.py (Mamba hybrids)");
  // A hybrid model is its layer pattern: without one the entry script's model is not known.
  EXPECT_THAT(error_of("torchrun ../../pretrain_hybrid.py --num-layers 2\n"),
              HasSubstr("../../pretrain_hybrid.py without --hybrid-layer-pattern"));
  EXPECT_EQ(checked("torchrun pretrain_mamba.py --hybrid-override-pattern M*M-\n").warnings.size(), 0u);
  EXPECT_THAT(error_of("python my_train.py --num-layers 2\n"),
              HasSubstr("my_train.py is not a Megatron-LM entry script mme knows"));
  LaunchScriptOptions o;
  o.assume_gpt_entry = true;
  const auto s = checked("python my_train.py --num-layers 2\n", o);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_THAT(s.warnings[0], HasSubstr("my_train.py is taken to build its model as pretrain_gpt.py does"));
}

TEST(LaunchScript, FlagsMegatronLmLacksAreErrors) {
  EXPECT_EQ(error_of("python pretrain_gpt.py --num-layers 2 --num-layer 3\n"),
            "launch.sh:1: a flag Megatron-LM's parser lacks (megatron/training/arguments.py, commit " +
                megatron_lm_commit() +
                "), which would stop with 'unrecognized arguments': --num-layer (did you mean --num-layers?). A flag "
                "the entry script adds itself is accepted with --extra-megatron-flag NAME");
  EXPECT_THAT(error_of("python pretrain_gpt.py --world-size 16\n"), HasSubstr("torchrun sets the world size"));
  EXPECT_THAT(error_of("python pretrain_gpt.py --cpu-offloading\n"),
              HasSubstr("Megatron-LM's activation offloading is --cpu-offloading-num-layers N"));
  EXPECT_THAT(error_of("python pretrain_gpt.py --virtual-pipeline-model-parallel-size 2\n"),
              HasSubstr("--num-virtual-stages-per-pipeline-rank"));
  EXPECT_THAT(error_of("--nnodes 2 --num-layers 2\n"), HasSubstr("--nnodes (it is torchrun's"));
  // The entry script's own flag, named: accepted with a warning.
  LaunchScriptOptions o;
  o.extra_flags = {"enable-gpt-oss"};
  const auto s = checked("python pretrain_gpt.py --enable-gpt-oss --num-layers 2\n", o);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_THAT(s.warnings[0], HasSubstr("--enable-gpt-oss: not a flag of Megatron-LM's parser"));
}

TEST(LaunchScript, ValuesMmeReadsMustBeKnown) {
  // NUM_LAYERS is never set: --num-layers would be a guess.
  EXPECT_EQ(error_of("python pretrain_gpt.py --num-layers $NUM_LAYERS\n"),
            "launch.sh: --num-layers $NUM_LAYERS: line 1: NUM_LAYERS is not set in the script (--set "
            "NUM_LAYERS=VALUE gives it)");
  EXPECT_THAT(error_of("TP=$(nproc)\npython pretrain_gpt.py --tensor-model-parallel-size $TP\n"),
              HasSubstr("$(nproc) is a command substitution, which mme never runs"));
  // A word of unknown value where a flag would stand may be flags: refused, not dropped.
  EXPECT_EQ(error_of("python pretrain_gpt.py --tensor-model-parallel-size 2 ${EXTRA_ARGS}\n"),
            "launch.sh:1: $EXTRA_ARGS stands where a flag of pretrain_gpt.py would: line 1: EXTRA_ARGS is not set in "
            "the script (--set EXTRA_ARGS=VALUE gives it); its words may be flags, so mme does not guess them (give "
            "its value, or an empty one)");
  LaunchScriptOptions o;
  o.variables = {{"EXTRA_ARGS", ""}};
  EXPECT_EQ(flags_of(checked("python pretrain_gpt.py --tensor-model-parallel-size 2 ${EXTRA_ARGS}\n", o)),
            "--tensor-model-parallel-size 2");
  // --tokenizer-model is read only for HuggingFaceTokenizer without --vocab-size.
  EXPECT_NO_THROW(checked("python pretrain_gpt.py --tokenizer-type Llama2Tokenizer --tokenizer-model $2\n"));
  EXPECT_THAT(error_of("python pretrain_gpt.py --tokenizer-type HuggingFaceTokenizer --tokenizer-model $2\n"),
              HasSubstr("$2, the script's second argument, is not given"));
  // A modelled environment variable of unknown value.
  EXPECT_THAT(error_of("export NVTE_FLASH_ATTN=$FLASH\npython pretrain_gpt.py --num-layers 2\n"),
              HasSubstr("the environment variable NVTE_FLASH_ATTN: line 1: FLASH is not set"));
}

TEST(LaunchScript, OtherFilesAreReadOnlyWhenNamed) {
  EXPECT_THAT(error_of("source ./config.sh\npython pretrain_gpt.py --num-layers $L\n"),
              HasSubstr("launch.sh:1: `source ./config.sh` reads another file, which mme does not without being "
                        "told: name it with --script-source ./config.sh"));
  const test::TempDir dir;
  const auto config = dir.path() / "config.sh";
  test::write_file(config, "L=7\n");
  LaunchScriptOptions o;
  o.sources = {config};
  // `. $(pwd)/config.sh`: the directory is not known, the file name is, and it was named.
  EXPECT_EQ(flags_of(checked(". `pwd`/config.sh\npython pretrain_gpt.py --num-layers $L\n", o)), "--num-layers 7");
}

TEST(LaunchScript, LaunchesAreFoundOnce) {
  EXPECT_THAT(error_of("echo hello\nmkdir -p x\n"),
              HasSubstr("launch.sh: no command launches a Megatron-LM entry script"));
  EXPECT_THAT(error_of("bash other.sh\n"), HasSubstr("`bash other.sh` runs another script, which mme does not read"));
  EXPECT_THAT(error_of("python pretrain_gpt.py --num-layers 2\npython pretrain_gpt.py --num-layers 4\n"),
              HasSubstr("2 commands launch an entry script (launch.sh:1, launch.sh:2)"));
  EXPECT_THAT(error_of("exit 0\npython pretrain_gpt.py --num-layers 2\n"), HasSubstr("no command launches"));
  EXPECT_THAT(error_of("while true; do X=1; done\n"), HasSubstr("more than 100000 commands"));
}

TEST(LaunchScript, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of("A=(1 2\n"), "launch.sh:2: the array A=( has no closing ')'");
  EXPECT_EQ(error_of("X=\"abc\npython pretrain_gpt.py\n"),
            "launch.sh:1: unterminated \" quote (it opens on this line)");
  // A quoted array element "--flag value" is one argument: no flag to argparse.
  EXPECT_THAT(error_of("A=(\"--seq-length 8\")\npython pretrain_gpt.py \"${A[@]}\"\n"),
              HasSubstr("--seq-length 8 (one argument that holds a blank"));
  EXPECT_EQ(error_of("if true; then\n  X=1\n"), "launch.sh:3: expected 'fi' in an if");
  EXPECT_THAT(error_of("python pretrain_gpt.py --num-layers $((2/0))\n"), HasSubstr("division by 0"));
  EXPECT_THAT(error_of("declare -A M=([a]=1)\npython pretrain_gpt.py\n"),
              HasSubstr("associative arrays are not evaluated"));
  // An operator in a for loop's word list is bash's syntax error (the fuzzer's input once looped
  // on the empty word it read there, until memory ran out).
  EXPECT_EQ(error_of("for x in 1 2 (( i < 3 )); do echo; done\n"),
            "launch.sh:1: unexpected '(' in the word list of 'for'");
  EXPECT_EQ(error_of("for x in a | b; do echo; done\n"), "launch.sh:1: unexpected '|' in the word list of 'for'");
}

TEST(LaunchScript, ParseMegatronArgsIsTheReaderWithoutChecks) {
  // The flags pass whatever their names (check_launch_script refuses them); the world size comes
  // with them.
  const MegatronArgs a = parse_megatron_args("torchrun --nproc_per_node 4 --nnodes 2 x.py --anything 1", "t");
  EXPECT_EQ(a.world_size, 8);
  EXPECT_EQ(a.value("anything"), "1");
}

// ---- Megatron-LM's flag list ------------------------------------------------------------------

TEST(MegatronLmFlags, TheListAndItsProvenance) {
  // Spot checks against megatron/training/arguments.py: an add_argument flag with one value, a
  // store_true switch, a nargs='+' flag, one ArgumentGroupFactory generates from TransformerConfig
  // (a bool field of default True: --no-/--disable- switches), one its exclude list removes.
  ASSERT_NE(find_megatron_lm_flag("num-layers"), nullptr);
  EXPECT_EQ(find_megatron_lm_flag("num-layers")->max_values, 1);
  EXPECT_EQ(find_megatron_lm_flag("swiglu")->max_values, 0);
  EXPECT_EQ(find_megatron_lm_flag("recompute-modules")->max_values, -1);
  EXPECT_EQ(find_megatron_lm_flag("rampup-batch-size")->min_values, 3);  // argparse_meta nargs 3
  EXPECT_NE(find_megatron_lm_flag("no-persist-layer-norm"), nullptr);
  EXPECT_EQ(find_megatron_lm_flag("cpu-offloading"), nullptr);  // "no CLI argument exists"
  EXPECT_EQ(find_megatron_lm_flag("virtual-pipeline-model-parallel-size"), nullptr);
  EXPECT_EQ(find_megatron_lm_flag("world-size"), nullptr);
  EXPECT_EQ(find_megatron_lm_flag("num_layers"), nullptr);  // argparse takes no '_' for '-'
  EXPECT_EQ(megatron_lm_commit().substr(0, 10), "d98e8a64dd");
  EXPECT_EQ(closest_megatron_lm_flag("tensor-model-paralel-size"), "tensor-model-parallel-size");
  EXPECT_EQ(closest_megatron_lm_flag("num_layers"), "num-layers");
  EXPECT_EQ(closest_megatron_lm_flag("completely-unrelated-words-here"), "");
}

TEST(MegatronLmFlags, EveryFlagMmeNamesIsMegatronLms) {
  // The model table, the setup schema's Megatron-LM spellings and the review's lists hold only
  // flags Megatron-LM's parser has.
  for (const auto& m : model_flags()) EXPECT_NE(find_megatron_lm_flag(m.name), nullptr) << m.name;
  for (const auto& k : setup_knobs())
    for (const auto* list : {&k.megatron, &k.megatron_off, &k.megatron_extra})
      for (const char* f : *list) EXPECT_NE(find_megatron_lm_flag(f), nullptr) << k.id << ": --" << f;
  for (const auto f : megatron_not_modelled_flags()) EXPECT_NE(find_megatron_lm_flag(f), nullptr) << f;
  for (const auto f : megatron_no_effect_flags()) EXPECT_NE(find_megatron_lm_flag(f), nullptr) << f;
}

}  // namespace
}  // namespace mme
