#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a test command with kiln's CPU kernels held to one instruction-set level, so that a machine
# with a higher one also tests the paths a lower machine takes (docs/kernels.md):
#
#   tests/run_at_isa.sh LEVEL COMMAND [ARGS...]
#
#   avx512  oneDNN at AVX512_CORE (AVX-512 without VNNI or BF16, Skylake-SP's set: INT8 without
#           VNNI, FP32 brgemm) and kiln's own kernels at avx512
#   avx2    oneDNN at AVX2 (jit kernels, INT8 without VNNI) and kiln's own kernels at avx2
#   scalar  oneDNN at SSE41 (its lowest) and kiln's own kernels at scalar
#
# through ONEDNN_MAX_CPU_ISA and KILN_CPU_ISA. A level the CPU lacks, or one that is what the
# CPU runs anyway (the plain test run covers it), exits 77, which CTest reports as skipped
# (SKIP_RETURN_CODE), with the reason on stdout.
set -euo pipefail

level="${1:?usage: run_at_isa.sh avx512|avx2|scalar COMMAND [ARGS...]}"
shift

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
avx512=0
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then avx512=1; fi
avx2=0
if has avx2 && has fma; then avx2=1; fi
# Whether oneDNN would run above AVX512_CORE here (VNNI, BF16, AMX) or above AVX2 (AVX-VNNI,
# AVX-512): only then is the level not what this CPU runs anyway.
above_avx512=0
if [[ $avx512 -eq 1 ]] && { has avx512_vnni || has avx512_bf16 || has amx_int8; }; then above_avx512=1; fi
above_avx2=0
if [[ $avx512 -eq 1 ]] || has avx_vnni; then above_avx2=1; fi

skip() {
  echo "run_at_isa: skipped at level $level: $1"
  exit 77
}

case "$level" in
  avx512)
    [[ $avx512 -eq 1 ]] || skip "this CPU has no AVX-512"
    [[ $above_avx512 -eq 1 ]] || skip "AVX-512 without VNNI is what this CPU runs already"
    export ONEDNN_MAX_CPU_ISA=AVX512_CORE KILN_CPU_ISA=avx512
    ;;
  avx2)
    [[ $avx2 -eq 1 ]] || skip "this CPU has no AVX2"
    [[ $above_avx2 -eq 1 ]] || skip "AVX2 is what this CPU runs already"
    export ONEDNN_MAX_CPU_ISA=AVX2 KILN_CPU_ISA=avx2
    ;;
  scalar)
    [[ $avx2 -eq 1 ]] || skip "the scalar level is what this CPU runs already"
    export ONEDNN_MAX_CPU_ISA=SSE41 KILN_CPU_ISA=scalar
    ;;
  *)
    echo "run_at_isa: unknown level '$level' (expected avx512, avx2 or scalar)" >&2
    exit 2
    ;;
esac
echo "run_at_isa: ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA KILN_CPU_ISA=$KILN_CPU_ISA $*"
exec "$@"
