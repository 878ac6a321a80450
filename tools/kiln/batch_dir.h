// SPDX-License-Identifier: Apache-2.0
#pragma once
// `kiln batch` over a directory of tensor files (docs/batch.md):
//
//   <input>/<row>.npy | <row>.pb        a row of a model with one input
//   <input>/<row>/<input name>.npy|.pb  a row of any model: one file per input
//   <output>/<row>/<output name>.npy    every output of the row (.pb with --output-format pb,
//                                       and for a datatype .npy cannot hold: BYTES, BF16)
//   <output>/<row>/error.json           instead, when the row failed: {"code", "message"}
//
// Rows are the entries of <input> in name order; hidden entries (a leading '.') and files of
// other extensions are not rows. A file's tensor is one row's worth: for a model that batches
// (max_batch_size > 0) a tensor with the configured rank gets a batch dim of 1 (and its outputs
// lose it again), one with a leading batch dim is sent as it is. --batch-size N sends up to N
// consecutive rows with the same input shapes and datatypes as one request (concatenated on the
// batch dim) and splits the outputs back.
//
// A row's output appears whole or not at all: it is written to <output>/.<row>.partial/ and
// renamed to <output>/<row>/ when complete, so after a crash a row directory is a finished row
// (--resume skips it) and a leftover .partial directory is removed and the row redone.
//
// File names: an input or output name becomes a file name with '/' replaced by '_' and a '_'
// before a leading '.' (and before an empty name).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "repo/model_manager.h"
#include "tools/kiln/batch_driver.h"

namespace kiln::tools {

enum class TensorFileKind { kAny, kNpy, kPb };

struct DirRow {
  std::string name;  // the file's stem, or the directory's name
  std::string path;  // the file or the directory
  bool is_dir = false;
};

// The rows of `input` (sorted by name). `output` is left out when it lies inside `input`.
// INVALID_ARGUMENT naming both entries when two give the same row name (a.npy and a.pb, a.npy
// and a/); NOT_FOUND / INVALID_ARGUMENT naming `input` when it cannot be listed.
Result<std::vector<DirRow>> ListDirRows(const std::string& input, TensorFileKind kind,
                                        const std::string& output);

// What an existing output directory holds: the rows with a result (a row directory); stale
// .partial directories are removed. With `retry_failed` the rows that failed (error.json) are
// removed too, and are not done. INVALID_ARGUMENT for a row directory the input does not have
// (the output of another input).
struct DirOutputState {
  std::vector<bool> done;  // per row of `rows`
  int64_t done_count = 0;
  int64_t failed_count = 0;  // of the done rows, those that failed
};
Result<DirOutputState> ScanDirOutput(const std::string& output, const std::vector<DirRow>& rows,
                                     bool retry_failed);

struct DirRunOptions {
  std::string output;
  TensorFileKind kind = TensorFileKind::kAny;
  bool output_pb = false;  // --output-format pb
  int batch_size = 1;
};

// Runs every row of `rows` not done yet on `model` through `driver` and writes the results.
// Returns when every started request is written (or the driver stopped the run).
void RunDirRows(const DirRunOptions& options, const std::shared_ptr<LoadedModel>& model,
                const std::vector<DirRow>& rows, const std::vector<bool>& done,
                BatchDriver& driver);

// Whether `name` (a file name) is hidden: a leading '.'.
inline bool IsHiddenName(const std::string& name) { return !name.empty() && name[0] == '.'; }

}  // namespace kiln::tools
