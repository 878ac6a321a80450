// SPDX-License-Identifier: Apache-2.0
#pragma once
// The model as `kiln bench` sees it (from the metadata and config endpoints) and the request
// inputs it sends: random data of the model's shapes, or real data from a perf_analyzer-style
// JSON file or a directory of .npy files (one per input, named <input>.npy).
//
// NOTE: every input set is encoded once, before the load starts (request_bytes.h); the hot
// path only replays prebuilt bytes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace kiln::bench {

struct TensorSpec {
  std::string name;
  std::string datatype;        // protocol spelling: "FP32", "INT64", "BYTES", ...
  std::vector<int64_t> shape;  // as the metadata lists it (-1 = variable)
};

struct ModelInfo {
  std::string name;
  std::vector<std::string> versions;
  int max_batch_size = 0;  // from the config; > 0 means the first metadata dim is the batch
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// One input tensor of one request, encoded little-endian row-major (BYTES: 4-byte length
// prefixed elements, protocol §1.10).
struct TensorData {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;  // full request shape, batch dim included when the model batches
  std::string raw;
};
using InputSet = std::vector<TensorData>;

// Bytes per element of a fixed-size datatype; 0 for BYTES; -1 for an unknown name.
int ElementSize(const std::string& datatype);

// Parses a --shape value "NAME:d1,d2,..." into (name, dims).
Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeFlag(const std::string& text);

struct InputOptions {
  int batch_size = 1;
  // --shape overrides, per input, without the batch dim (as perf_analyzer takes them).
  std::map<std::string, std::vector<int64_t>> shapes;
  // "" or "random": random data; "zero": zeros; else a .json file or a directory of .npy files.
  std::string input_data;
  uint64_t seed = 1;
  int random_sets = 4;  // distinct random input sets to rotate through
  int string_length = 16;
};

// The per-item shape of `spec` (batch dim dropped when the model batches) with --shape applied.
// InvalidArgument naming the input when a dim stays variable.
Result<std::vector<int64_t>> ItemShape(const ModelInfo& model, const TensorSpec& spec,
                                       const InputOptions& options);

// The input sets to send. Errors name the file, input and problem (missing input, element
// count not matching the shape, unsupported datatype, -b > 1 on a non-batching model, ...).
Result<std::vector<InputSet>> MakeInputs(const ModelInfo& model, const InputOptions& options);

}  // namespace kiln::bench
