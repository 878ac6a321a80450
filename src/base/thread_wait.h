// SPDX-License-Identifier: Apache-2.0
#pragma once
// How kiln's idle intra-op threads wait (docs/kernels.md, "Threads on a shared machine").
//
// kiln's kernels and oneDNN run their parallel loops on OpenMP (libgomp). Between two parallel
// regions, and at each region's closing barrier, libgomp's threads spin before they sleep: by
// default 300000 iterations of a pause loop (milliseconds on CPUs where one pause takes about
// 140 cycles). On a quiet machine that is free; on a shared one, spinning threads take the
// cores that the threads they wait for need, and a model of many short nodes slowed down
// 100-300x beside another OpenMP process (bench/contention/run.py). A bounded spin of 10000
// keeps the quiet-machine latency (threads still catch the next node while they spin) and lets
// waiting threads sleep soon after; the session's thread governor (runtime/thread_governor.h)
// does the rest on a busy machine, running narrow while that is faster. Shorter spins are not
// safe: at 1000, runs of models with many small nodes went 4-7x slower on a quiet machine, in
// about one process start of two, every node paying a futex wake-up of its second thread.
//
// libgomp reads its wait policy (GOMP_SPINCOUNT, OMP_WAIT_POLICY) once, while the process
// loads, before main() runs; it cannot be changed afterwards. So the kiln binary calls
// ApplyThreadWaitPolicy first thing in main(): when the policy is `bounded` (KILN_THREAD_WAIT,
// the default) and the user set neither variable, it sets GOMP_SPINCOUNT and re-executes
// itself once with the same arguments. A user's GOMP_SPINCOUNT or OMP_WAIT_POLICY always wins.

#include <string>

namespace kiln {

// The spin count kiln's `bounded` policy gives libgomp (GOMP_SPINCOUNT).
inline constexpr const char* kBoundedSpinCount = "10000";

// Re-executes the running binary (/proc/self/exe, same argv) with GOMP_SPINCOUNT set, when the
// policy asks for it and the environment does not already say; returns without doing anything
// otherwise, or when the re-execution fails (the process then runs with libgomp's defaults).
// Call before any thread starts.
void ApplyThreadWaitPolicy(char** argv);

// How this process's OpenMP threads wait, as the environment libgomp read says:
// "GOMP_SPINCOUNT=10000", "OMP_WAIT_POLICY=passive", both, or "OpenMP default" (kiln profile).
std::string DescribeThreadWait();

}  // namespace kiln
