// SPDX-License-Identifier: Apache-2.0
// ThreadGovernor's policy on made-up run durations: it stays wide on a machine where wide runs
// are faster (probing narrow ever more rarely), switches to one thread when narrow runs are
// clearly faster, and switches back when the machine is quiet again.

#include "runtime/thread_governor.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace kiln {
namespace {

// Runs `runs` runs: each asks the governor for a width and reports the duration `time(width)`.
// Returns how many ran narrow.
int Drive(ThreadGovernor& g, int runs, const std::function<int64_t(int)>& time) {
  int narrow = 0;
  for (int i = 0; i < runs; ++i) {
    const int w = g.Choose();
    if (w == 1) ++narrow;
    g.Record(w, time(w));
  }
  return narrow;
}

ThreadGovernorOptions Options() {
  ThreadGovernorOptions o;
  o.max_threads = 2;
  o.min_probe_period = 8;
  o.max_probe_period = 256;
  return o;
}

TEST(ThreadGovernorTest, OneThreadMaxNeverProbes) {
  ThreadGovernorOptions o = Options();
  o.max_threads = 1;
  ThreadGovernor g(o);
  EXPECT_EQ(Drive(g, 100, [](int) { return 1000; }), 100);
  EXPECT_EQ(g.chosen(), 1);
}

TEST(ThreadGovernorTest, QuietMachineStaysWideAndProbesRarely) {
  ThreadGovernor g(Options());
  // Wide 1.0 ms, narrow 1.6 ms: narrow never wins.
  const int narrow = Drive(g, 4000, [](int w) { return w == 1 ? 1'600'000 : 1'000'000; });
  EXPECT_EQ(g.chosen(), 2);
  EXPECT_EQ(g.switches(), 0);
  // Probes at runs 3, 5, 7 (after one measured wide run; the first is the narrow plans'
  // warm-up; two more before one can
  // win), then the period doubles from 2 to 256: about 4000 / 256 + 10 probes, under 1%.
  EXPECT_GE(narrow, 4);
  EXPECT_LE(narrow, 30) << "narrow probes must become rare on a quiet machine";
}

TEST(ThreadGovernorTest, BusyMachineSwitchesToOneThread) {
  ThreadGovernor g(Options());
  // Contended: wide runs take 3 ms, narrow 1.5 ms. A process that starts on a busy machine
  // switches within its first 8 runs (probes at 3, 5, 7).
  Drive(g, 8, [](int w) { return w == 1 ? 1'500'000 : 3'000'000; });
  EXPECT_EQ(g.chosen(), 1);
  EXPECT_EQ(g.switches(), 1);
  // And stays there while it lasts (wide probes keep losing).
  const int narrow = Drive(g, 1000, [](int w) { return w == 1 ? 1'500'000 : 3'000'000; });
  EXPECT_EQ(g.chosen(), 1);
  EXPECT_GE(narrow, 960);
}

TEST(ThreadGovernorTest, ReturnsToWideWhenTheMachineQuietsDown) {
  ThreadGovernor g(Options());
  Drive(g, 100, [](int w) { return w == 1 ? 1'500'000 : 3'000'000; });
  ASSERT_EQ(g.chosen(), 1);
  // The load is gone: wide runs take 1 ms again, narrow 1.5 ms. A wide probe is at most
  // max_probe_period runs away; the switch back comes after min_probes of them.
  Drive(g, 1000, [](int w) { return w == 1 ? 1'500'000 : 1'000'000; });
  EXPECT_EQ(g.chosen(), 2);
  EXPECT_EQ(g.switches(), 2);
}

TEST(ThreadGovernorTest, ALoadArrivingLaterIsNoticed) {
  ThreadGovernor g(Options());
  // Quiet for long enough that probes are rare, then the machine gets busy: the rise of the
  // wide width's average above its best brings probes back at once.
  Drive(g, 3000, [](int w) { return w == 1 ? 1'600'000 : 1'000'000; });
  ASSERT_EQ(g.chosen(), 2);
  Drive(g, 60, [](int w) { return w == 1 ? 1'600'000 : 4'000'000; });
  EXPECT_EQ(g.chosen(), 1);
}

TEST(ThreadGovernorTest, SmallDifferencesDoNotSwitch) {
  ThreadGovernor g(Options());
  // Narrow 10% faster: under the 15% margin, so no switch (noise must not flip the width).
  Drive(g, 2000, [](int w) { return w == 1 ? 900'000 : 1'000'000; });
  EXPECT_EQ(g.switches(), 0);
}

TEST(ThreadGovernorTest, LongRunsSkipTheEarlyProbes) {
  // 250 ms runs: the first probe comes after min_probe_period runs, not at run 3, so a short
  // measurement of a large model (a few runs) runs at the full width.
  ThreadGovernor g(Options());
  EXPECT_EQ(Drive(g, 8, [](int w) { return w == 1 ? 400'000'000 : 250'000'000; }), 0);
  // Short runs probe early: runs 3, 5 and 7.
  ThreadGovernor s(Options());
  EXPECT_EQ(Drive(s, 8, [](int w) { return w == 1 ? 1'600'000 : 1'000'000; }), 3);
  // A long model on a busy machine still switches, later.
  ThreadGovernor b(Options());
  Drive(b, 40, [](int w) { return w == 1 ? 250'000'000 : 500'000'000; });
  EXPECT_EQ(b.chosen(), 1);
}

TEST(ThreadGovernorsTest, OneGovernorPerSignatureAndOneForTheRest) {
  ThreadGovernors gs(Options(), /*max_signatures=*/2);
  EXPECT_EQ(gs.chosen(), 2);  // before any run: the full width
  const std::vector<int64_t> a = {1, 1, 4, 1, 3, 224, 224, 0};
  const std::vector<int64_t> b = {1, 1, 4, 8, 3, 224, 224, 0};
  const std::vector<int64_t> c = {1, 1, 4, 2, 3, 224, 224, 0};
  const std::vector<int64_t> d = {1, 1, 4, 3, 3, 224, 224, 0};
  ThreadGovernor* ga = &gs.For(a);
  ThreadGovernor* gb = &gs.For(b);
  EXPECT_NE(ga, gb);
  EXPECT_EQ(&gs.For(a), ga);
  ThreadGovernor* gc = &gs.For(c);  // past max_signatures: the shared one
  EXPECT_NE(gc, ga);
  EXPECT_NE(gc, gb);
  EXPECT_EQ(&gs.For(d), gc);
  // chosen() follows the latest signature's governor; switches() adds them up.
  Drive(*ga, 8, [](int w) { return w == 1 ? 1'500'000 : 3'000'000; });
  EXPECT_EQ(ga->chosen(), 1);
  gs.For(b);
  EXPECT_EQ(gs.chosen(), 2);
  gs.For(a);
  EXPECT_EQ(gs.chosen(), 1);
  EXPECT_EQ(gs.switches(), 1);
}

TEST(ThreadGovernorsTest, BatchesOfMixedSizesDoNotMakeTheNarrowWidthWin) {
  // A server's dynamic batches: batch 8 takes 8 ms wide and 14 ms narrow, batch 1 takes 1 ms
  // wide and 1.6 ms narrow; they arrive interleaved. Wide is faster at both sizes, but a single
  // governor sees narrow probes land on batch-1 runs against a wide average of mostly batch-8
  // runs, and switches. Per signature, nothing switches.
  const auto batch_time = [](int batch, int w) -> int64_t {
    return batch == 8 ? (w == 1 ? 14'000'000 : 8'000'000) : (w == 1 ? 1'600'000 : 1'000'000);
  };
  const auto sizes = [](int i) { return i % 2 == 0 ? 1 : 8; };
  ThreadGovernor single(Options());
  ThreadGovernors per_signature(Options());
  for (int i = 0; i < 2000; ++i) {
    const int batch = sizes(i);
    int w = single.Choose();
    single.Record(w, batch_time(batch, w));
    ThreadGovernor& g = per_signature.For({batch});
    w = g.Choose();
    g.Record(w, batch_time(batch, w));
  }
  EXPECT_GT(single.switches(), 0) << "the mixed-size trap this guards against";
  EXPECT_EQ(per_signature.switches(), 0);
  EXPECT_EQ(per_signature.For({1}).chosen(), 2);
  EXPECT_EQ(per_signature.For({8}).chosen(), 2);
}

}  // namespace
}  // namespace kiln
