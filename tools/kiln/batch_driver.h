// SPDX-License-Identifier: Apache-2.0
#pragma once
// The loop of `kiln batch` (batch_command.cc): keeps at most `concurrency` requests in flight,
// runs what each finished request left to do (encode, write) on the main thread, counts rows
// and shows the progress on standard error.
//
//   BatchDriver driver(options, counts);           // counts.total / skipped known up front
//   for (each row to do) {
//     if (!driver.WaitForSlot()) break;            // a signal asked to stop, or a fatal error
//     driver.Begin();
//     StartSomething(..., [&driver](...) { driver.Post([...] { write; driver.RowDone(...); }); });
//   }
//   driver.Drain();                                // every begun request has been posted and run
//   driver.Finish(output_path);                    // the summary
//
// Post may be called from any thread (the model's), also before the call that started the
// request returns; everything else is for the main thread only. Every Begin must be matched by
// exactly one Post, and Drain must run before anything a posted function refers to goes away.
//
// Stopping: SIGINT / SIGTERM (InstallStopHandlers) stop new requests from starting; those in
// flight finish and are written; a second signal ends the process at once (the default action).

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "server/batch/batch_progress.h"

namespace kiln::tools {

struct BatchDriverOptions {
  int concurrency = 1;
  bool quiet = false;              // no progress and no summary
  double progress_interval_s = 5;  // a progress line this often when stderr is not a terminal
};

class BatchDriver {
 public:
  BatchDriver(const BatchDriverOptions& options, batch::BatchCounts counts);
  BatchDriver(const BatchDriver&) = delete;
  BatchDriver& operator=(const BatchDriver&) = delete;

  // Runs posted work until fewer than `concurrency` requests are in flight. False when the run
  // must stop starting requests (a stop signal, or Fail).
  bool WaitForSlot();
  // A request is about to start.
  void Begin() { ++in_flight_; }
  // What to do on the main thread once a request has finished. Any thread.
  void Post(std::function<void()> work);
  // Runs posted work until no request is in flight.
  void Drain();

  // Counts one finished row; `row` names it in the summary's list of failures.
  void RowDone(bool ok, const std::string& row, const std::string& error);
  // A fatal error (the output cannot be written): no new requests; Finish reports it.
  void Fail(Status status);
  const Status& failure() const { return failure_; }
  // The signal that stopped the run (0: none).
  int stop_signal() const;

  // Draws the final progress bar and ends its line (on a terminal; once), so that later log
  // lines do not land on it. Finish calls it too.
  void EndProgress();
  // Clears the progress bar and prints the summary (unless quiet). Returns the exit code: 0 all
  // rows succeeded, 1 some failed (in this run, or in the earlier run whose output it resumed),
  // 2 after Fail, 128 + signal when a signal stopped the run.
  int Finish(const std::string& output);

 private:
  void RunPosted(std::chrono::milliseconds wait);
  void ShowProgress(bool force);
  double Elapsed() const;

  const BatchDriverOptions options_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_progress_;
  batch::BatchCounts counts_;
  int in_flight_ = 0;
  bool progress_ended_ = false;
  std::vector<std::string> failures_;  // the first few, for the summary
  Status failure_;

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> posted_ KILN_GUARDED_BY(mu_);
};

// SIGINT and SIGTERM set the flag BatchDriver reads (and restore the default action, so a
// second signal ends the process).
void InstallStopHandlers();

}  // namespace kiln::tools
