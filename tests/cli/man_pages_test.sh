#!/bin/bash
# The man pages of mme in the stage tree (cli/CMakeLists.txt writes them with the built
# `mme help --man [COMMAND]`): one per command `mme help` lists and mme.1, each what the
# command prints, and groff formats every one without a warning. Exit 77 (CTest: skipped) when
# groff is not installed, after the checks that need no groff.
# Usage: man_pages_test.sh <stage dir>
set -u
stage=$1
mme="$stage/bin/mme"
man1="$stage/share/man/man1"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

commands=$("$mme" help | sed -n '/^Commands:$/,/^$/p' | sed '1d;$d' | awk '{print $1}')
[[ -n $commands ]] || fail "no commands listed by mme help"
pages=("$man1/mme.1")
for c in $commands; do pages+=("$man1/mme-$c.1"); done
for page in "${pages[@]}"; do
  [[ -f $page ]] || { fail "$page does not exist"; continue; }
  name=$(basename "$page" .1)
  command=${name#mme}
  command=${command#-}
  diff <("$mme" help --man $command) "$page" >/dev/null || fail "$page differs from \`mme help --man $command\`"
  grep -q "^\.TH ${name^^} 1 " "$page" || fail "$page has no .TH ${name^^} 1"
  grep -q "^\.SH NAME$" "$page" || fail "$page has no NAME section"
done
# Every man page the tree has is a listed command's.
for page in "$man1"/*.1; do
  printf '%s\n' "${pages[@]}" | grep -qx "$page" || fail "$page is not a page of a listed command"
done
grep -q '^\\fB\\-\\-recompute\\-granularity\\fR \\fIG\\fR$' "$man1/mme-estimate.1" ||
  fail "mme-estimate.1 does not describe --recompute-granularity G"

if ! command -v groff >/dev/null; then
  echo "SKIP: groff is not installed (apt-get install groff-base to format the pages)"
  ((failures > 0)) && exit 1
  exit 77
fi
for page in "${pages[@]}"; do
  [[ -f $page ]] || continue
  warnings=$(groff -k -man -Tutf8 -ww -z "$page" 2>&1)
  [[ -z $warnings ]] || fail "groff warns on $page: $warnings"
done
text=$(groff -k -man -Tutf8 -P -c -P -b -P -u "$man1/mme-estimate.1" 2>/dev/null)
for want in "MME-ESTIMATE(1)" "NAME" "mme-estimate - per-GPU memory" "SYNOPSIS" "--recompute-granularity G" \
            "EXIT STATUS" "SEE ALSO"; do
  [[ $text == *"$want"* ]] || fail "the formatted mme-estimate.1 lacks '$want'"
done
if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "man pages: ok (${#pages[@]} pages)"
