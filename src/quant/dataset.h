// SPDX-License-Identifier: Apache-2.0
#pragma once
// Datasets for calibration and validation, read from a directory, and running a model over them.
//
//   KILN_ASSIGN_OR_RETURN(Dataset data, LoadDataset("calib/", session->graph()));
//   KILN_ASSIGN_OR_RETURN(RunResult r, RunDataset(*session, data, {.batch_size = 32}));
//   Metrics m = ComputeMetrics(r.output.view(), &reference.output.view(), data.labels);
//
// Directory layouts (the first that applies):
//   stacked     `inputs.npy` (a model with one input) or `<input_name>.npy` per graph input, all
//               samples stacked on axis 0; optional `labels.npy` (INT64 [N], or any integer
//               type) with one label per sample.
//   per-sample  for a model with one input: every other `.npy` / `.pb` file (sorted by name, not
//               `labels.npy`) is one sample, holding the input without its batch dim or with a
//               batch dim of 1; optional `labels.npy` as above.
// FP64 data for an FP32 input is converted. Every sample's dims must match the declared dims of
// the input that are known (the batch dim aside).
//
// Errors (INVALID_ARGUMENT / NOT_FOUND, naming the file and what was expected): a missing or
// empty directory, no data for an input (listing the expected file names), a file holding
// several stacked samples under a name that is not an input's, inputs with different sample
// counts, labels whose count differs from the samples', dtype or dim mismatches.
//
// Thread safety: Datasets are plain values; the functions are pure apart from file reads and
// the session runs.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "runtime/session.h"
#include "tensor/tensor.h"

namespace kiln::quant {

struct Dataset {
  std::string dir;                    // where the data came from (MakeDataset: its `source`)
  std::vector<OwnedTensor> inputs;    // one per graph input, in graph-input order: [N, ...]
  std::optional<OwnedTensor> labels;  // INT64 [N]
  int64_t num_samples = 0;
  std::string layout;  // "stacked" or "per-sample"
};

// Loads the dataset in `dir` for the inputs of `graph`. `max_samples` > 0 keeps the first that
// many samples.
Result<Dataset> LoadDataset(const std::string& dir, const Graph& graph, int64_t max_samples = 0);

// The samples of one graph input, stacked on axis 0, and the file they were read from.
struct InputSamples {
  std::string file;
  OwnedTensor samples;  // [N, ...]
};

// A dataset (no labels) from tensors already read, one per graph input in graph-input order, with
// the checks of the stacked layout: FP64 data for a FP32 input converted, dtype and declared dims
// (the batch dim aside) matched, equal sample counts, at least one sample. `source` says where the
// data came from (Dataset::dir, and the messages); `max_samples` > 0 keeps the first samples.
Result<Dataset> MakeDataset(std::vector<InputSamples> inputs, const Graph& graph,
                            const std::string& source, int64_t max_samples = 0);

// Labels from a .npy / .pb file: integers of any width, [N] or [N, 1], returned as INT64 [N].
Result<OwnedTensor> LoadLabels(const std::string& path);

struct RunOptions {
  int64_t batch_size = 32;  // a model whose batch dim is fixed runs at that size instead
  int64_t max_samples = 0;  // > 0: only the first samples
  int threads = 0;          // intra-op threads of the sessions a workflow creates (0: all)
};

// The batch size a run of `graph` uses: the first input's dim 0 when the model fixes it, else
// `requested`.
int64_t EffectiveBatchSize(const Graph& graph, int64_t requested);

// Calls `fn(outputs, begin, count)` for consecutive batches of the dataset run through
// `session`: the last batch of a model with a fixed batch size is padded by repeating its last
// sample (only the first `count` rows are real). Stops at the first error.
Status ForEachBatch(const Session& session, const Dataset& data, const RunOptions& options,
                    const std::function<Status(std::vector<OwnedTensor>&, int64_t, int64_t)>& fn);

struct RunResult {
  OwnedTensor output;  // graph output 0 of every sample, stacked: [N, ...]
  int64_t samples = 0;
  double seconds = 0;  // time spent in Session::Run (a warm-up batch excluded)
};

// Runs every sample (batched) and stacks output 0. Output 0 must carry the batch on axis 0.
Result<RunResult> RunDataset(const Session& session, const Dataset& data, const RunOptions& options,
                             const std::function<void(int64_t, int64_t)>& progress = nullptr);

struct Metrics {
  int64_t samples = 0;
  std::optional<double> top1;   // % of samples whose argmax is the label (labels given)
  std::optional<double> top5;   // % with the label among the 5 largest (labels, >= 5 classes)
  double agreement_top1 = 100;  // % of samples whose argmax equals the reference's
  double mean_cosine = 1;       // mean over samples of cos(output, reference output)
  double items_per_s = 0;
};

// Metrics of `output` ([N, ...], flattened per sample into scores) against `labels` (INT64 [N],
// may be null) and `reference` (same shape, may be null: agreement 100, cosine 1). Cosine of two
// zero vectors is 1, of a zero and a nonzero one 0.
Result<Metrics> ComputeMetrics(const Tensor& output, const Tensor* reference, const Tensor* labels);

}  // namespace kiln::quant
