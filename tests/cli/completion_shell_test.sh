#!/bin/bash
# The zsh and fish completion scripts of mme parse in their shell. Exit 77 (CTest: skipped)
# when the shell is not installed: the test never passes without having run.
# Usage: completion_shell_test.sh zsh|fish <stage dir>
set -u
shell=$1
stage=$2
case $shell in
  zsh) script="$stage/share/zsh/vendor-completions/_mme" ;;
  fish) script="$stage/share/fish/vendor_completions.d/mme.fish" ;;
  *) echo "unknown shell $shell"; exit 1 ;;
esac
[[ -f $script ]] || { echo "FAIL: $script does not exist"; exit 1; }
diff <("$stage/bin/mme" completion "$shell") "$script" >/dev/null || {
  echo "FAIL: $script differs from \`mme completion $shell\`"
  exit 1
}
if ! command -v "$shell" >/dev/null; then
  echo "SKIP: $shell is not installed (apt-get install $shell to run this test)"
  exit 77
fi
case $shell in
  zsh) zsh -n "$script" || { echo "FAIL: zsh -n $script"; exit 1; } ;;
  fish)
    fish --no-execute "$script" || { echo "FAIL: fish --no-execute $script"; exit 1; }
    # Loaded, fish completes the flag.
    got=$(fish -c "source '$script'; complete -C 'mme estimate --recompute-gran'")
    [[ $got == --recompute-granularity* ]] || { echo "FAIL: fish completes '$got'"; exit 1; }
    ;;
esac
echo "$shell completion: ok"
