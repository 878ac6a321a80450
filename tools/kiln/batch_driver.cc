// SPDX-License-Identifier: Apache-2.0
// The request loop, counts and progress of kiln batch (batch_driver.h).

#include "tools/kiln/batch_driver.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <utility>

namespace kiln::tools {
namespace {

constexpr size_t kFailuresShown = 5;
constexpr auto kBarRedraw = std::chrono::milliseconds(200);
constexpr auto kPollWait = std::chrono::milliseconds(100);

std::atomic<int> g_stop_signal{0};

extern "C" void OnStopSignal(int sig) { g_stop_signal.store(sig); }

int TerminalWidth() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // a second signal: the default action (the process ends)
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

BatchDriver::BatchDriver(const BatchDriverOptions& options, batch::BatchCounts counts)
    : options_(options),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_progress_(start_),
      counts_(counts) {}

int BatchDriver::stop_signal() const { return g_stop_signal.load(); }

double BatchDriver::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool BatchDriver::WaitForSlot() {
  for (;;) {
    if (stop_signal() != 0 || !failure_.ok()) return false;
    if (in_flight_ < options_.concurrency) {
      RunPosted(std::chrono::milliseconds(0));  // what finished meanwhile, without waiting
      return stop_signal() == 0 && failure_.ok();
    }
    RunPosted(kPollWait);
  }
}

void BatchDriver::Post(std::function<void()> work) {
  {
    MutexLock lock(mu_);
    posted_.push_back(std::move(work));
  }
  cv_.NotifyOne();
}

void BatchDriver::Drain() {
  while (in_flight_ > 0) RunPosted(kPollWait);
  ShowProgress(false);
}

void BatchDriver::RunPosted(std::chrono::milliseconds wait) {
  std::deque<std::function<void()>> work;
  {
    MutexLock lock(mu_);
    if (posted_.empty() && wait.count() > 0) {
      cv_.WaitFor(mu_, wait, [this]() KILN_NO_THREAD_SAFETY_ANALYSIS { return !posted_.empty(); });
    }
    work.swap(posted_);
  }
  for (std::function<void()>& w : work) {
    --in_flight_;
    w();
  }
  ShowProgress(false);
}

void BatchDriver::RowDone(bool ok, const std::string& row, const std::string& error) {
  ++(ok ? counts_.succeeded : counts_.failed);
  if (!ok && failures_.size() < kFailuresShown) {
    failures_.push_back(row + ": " + error);
  }
}

void BatchDriver::Fail(Status status) {
  if (failure_.ok()) failure_ = std::move(status);
}

void BatchDriver::ShowProgress(bool force) {
  if (options_.quiet || progress_ended_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (!force && now - last_progress_ < kBarRedraw) return;
    last_progress_ = now;
    std::fprintf(stderr, "\r%s\x1b[K",
                 batch::ProgressBar(counts_, Elapsed(), TerminalWidth() - 1).c_str());
    std::fflush(stderr);
    return;
  }
  if (options_.progress_interval_s <= 0) return;
  if (!force &&
      std::chrono::duration<double>(now - last_progress_).count() < options_.progress_interval_s) {
    return;
  }
  last_progress_ = now;
  std::fprintf(stderr, "kiln batch: %s\n", batch::ProgressLine(counts_, Elapsed()).c_str());
  std::fflush(stderr);
}

void BatchDriver::EndProgress() {
  if (progress_ended_ || options_.quiet || !tty_) return;
  ShowProgress(true);
  std::fputs("\n", stderr);
  progress_ended_ = true;
}

int BatchDriver::Finish(const std::string& output) {
  const int sig = stop_signal();
  EndProgress();
  if (!options_.quiet) {
    std::fprintf(stderr, "kiln batch: %s; output: %s\n",
                 batch::SummaryLine(counts_, Elapsed()).c_str(), output.c_str());
    if (!failures_.empty()) {
      std::fprintf(stderr, "kiln batch: %s:\n",
                   counts_.failed > static_cast<int64_t>(failures_.size())
                       ? "the first failures (all are in the output)"
                       : "failures (also in the output)");
      for (const std::string& f : failures_) std::fprintf(stderr, "  %s\n", f.c_str());
    }
  }
  if (!failure_.ok()) {
    std::fprintf(stderr, "kiln batch: stopped: %s; rerun with --resume to go on\n",
                 failure_.message().c_str());
    return 2;
  }
  if (sig != 0) {
    std::fprintf(stderr,
                 "kiln batch: stopped by %s with %lld row(s) not done; rerun with --resume to "
                 "finish them\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(counts_.left()));
    return 128 + sig;
  }
  return counts_.failed + counts_.skipped_failed > 0 ? 1 : 0;
}

}  // namespace kiln::tools
