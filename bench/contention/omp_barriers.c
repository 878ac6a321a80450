// SPDX-License-Identifier: Apache-2.0
// A competing load for bench/contention/run.py: OpenMP threads that synchronize constantly, the
// way an inference process with many small operations does (one parallel region and barrier per
// operation, a few microseconds of work each). Runs until killed.
#include <omp.h>
#include <stdio.h>

int main(void) {
  enum { kN = 4096 };
  static float a[kN], b[kN];
  for (int i = 0; i < kN; ++i) a[i] = (float)i * 1e-3f;
  for (unsigned long step = 0;; ++step) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < kN; ++i) b[i] = a[i] * 0.999f + 0.001f;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < kN; ++i) a[i] = b[i] * 1.001f - 0.001f;
    if (step == ~0ul) printf("%f\n", a[0]);  // keeps the loops from being optimized away
  }
  return 0;
}
