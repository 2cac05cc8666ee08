#!/bin/bash
# bash completion of mme, as installed in the stage tree (cli/CMakeLists.txt writes it with the
# built `mme completion bash`): the script parses, registers _mme for mme, and completing
# commands, flags and flag values gives the words the option tables define.
# Usage: completion_bash_test.sh <stage dir>
set -u
stage=$1
script="$stage/share/bash-completion/completions/mme"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

[[ -f $script ]] || { echo "FAIL: $script does not exist"; exit 1; }
bash -n "$script" || fail "bash -n $script"
# The file is what the command prints.
diff <("$stage/bin/mme" completion bash) "$script" >/dev/null || fail "$script differs from \`mme completion bash\`"

# shellcheck source=/dev/null
source "$script"
registered=$(complete -p mme 2>&1)
[[ $registered == "complete -F _mme mme" ]] || fail "complete -p mme: '$registered'"

# complete WORD...: the completions of the last word, as bash would ask for them (the cursor at
# the end of the line), sorted, one line.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _mme mme "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() {
  local want=$1
  shift
  local got
  got=$(complete_words "$@")
  [[ $got == "$want" ]] || fail "completing '$*': expected '$want', got '$got'"
}

expect "estimate" mme est
expect "compare completion" mme comp
expect "params plan plugins" mme p
expect "--recompute-granularity" mme estimate --recompute-gran
expect "--recompute-granularity --recompute-method --recompute-modules --recompute-num-layers" mme estimate --recompute-
# The values of an enum knob of the setup schema, and of --fit-on, also after '=' (bash splits there).
expect "full selective" mme estimate Qwen/Qwen3-8B --recompute-granularity ""
expect "selective" mme estimate --recompute-granularity s
expect "bound estimate" mme estimate --fit-on ""
expect "bound estimate" mme estimate --fit-on = ""
expect "estimate" mme estimate --fit-on = e
expect "allgather alltoall flex" mme compare --moe-token-dispatcher ""
expect "bubble" mme plan --sort b
expect "bash fish zsh" mme completion ""
expect "--json" mme hardware --js
expect "-q" mme models -q
# A flag that takes free text offers nothing; a switch does not take the next word.
expect "" mme estimate --tp ""
# --gpu offers the built-in GPU profiles.
gpus=$(complete_words mme plan Qwen/Qwen3-8B --gpu H)
[[ " $gpus " == *" H100-SXM-80GB "* && " $gpus " == *" H200-SXM-141GB "* ]] || fail "--gpu H: '$gpus'"
[[ " $gpus " != *" A100-SXM-80GB "* ]] || fail "--gpu H offers an A100: '$gpus'"
# Files where a flag takes one.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
touch "$dir/spec.yaml" "$dir/other.json"
expect "$dir/spec.yaml" mme estimate --config "$dir/sp"
mkdir "$dir/plugins"
expect "$dir/plugins" mme plugins --plugin-dir "$dir/pl"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "bash completion: ok"
