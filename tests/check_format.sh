#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails, naming them, when the project's C++ files (*.cc, *.h) are not formatted as its
# .clang-format says (part of make test). Fix with: git ls-files '*.cc' '*.h' | xargs clang-format -i
#
#   tests/check_format.sh [CLANG_FORMAT]
set -euo pipefail
cd "$(dirname "$0")/.."
tool="${1:-clang-format}"
if ! command -v "$tool" >/dev/null; then
  echo "check_format: $tool not found (scripts/install-deps installs clang-format)" >&2
  exit 1
fi
# The tracked files in a checkout; every C++ file of the source folders otherwise.
list() {
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files '*.cc' '*.h'
  else
    find src tools tests bench -name '*.cc' -o -name '*.h'
  fi
}
bad=()
while IFS= read -r f; do
  [[ -f "$f" ]] || continue
  if ! "$tool" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(list)
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check_format: ${#bad[@]} file(s) not formatted by .clang-format ($("$tool" --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
echo "check_format: $(list | wc -l) files formatted"
