// SPDX-License-Identifier: Apache-2.0
#pragma once
// The classification extension (KSERVE-V2.md 1.11), independent of the protocol: an output
// requested with a class count k is replaced by its k highest elements, each rendered as the
// string "<value>:<index>" or "<value>:<index>:<label>". HTTP (parameters.classification) and
// gRPC (the same output parameter) both call Classify, and so does the kiln_classify step
// (ai.kiln TopKClassify, repo/classify_model.h).
//
//   KILN_ASSIGN_OR_RETURN(OwnedTensor classes,
//                         Classify(output.tensor.view(), k, max_batch_size > 0, labels));
//
// Rules: elements are compared in the output's datatype (FP16/BF16 as their float values; NaN
// ranks below every number); equal values keep index order. Values are written as
// std::to_string writes them (floating point with 6 decimals, integers exactly, BOOL as 0/1),
// as the reference server does. Index is the position within one batch item (flat over the
// item's dims). A label is appended when labels[index] exists. The result is BYTES of shape
// [batch, min(k, elements per item)] when `batched`, [min(k, elements)] otherwise.
//
// Errors: INVALID_ARGUMENT for a BYTES output, k < 1, or a batched output of rank 0.
// Thread safety: stateless function.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// The order Classify ranks by: the indices (within each batch item) of the min(k, elements per
// item) highest elements of each item, best first. The same errors as Classify.
struct TopK {
  int64_t items = 0;             // batch items (1 when not batched)
  int64_t k = 0;                 // indices per item
  std::vector<int64_t> indices;  // items x k
};
// REQUIRES: `output` is a contiguous host tensor.
Result<TopK> TopKIndices(const Tensor& output, int64_t class_count, bool batched);

// Classify's strings for a ranking TopKIndices made of the same `output` (for a caller that
// needs the indices too).
Result<OwnedTensor> ClassStrings(const Tensor& output, const TopK& top, bool batched,
                                 std::span<const std::string> labels);

// REQUIRES: `output` is a contiguous host tensor.
Result<OwnedTensor> Classify(const Tensor& output, int64_t class_count, bool batched,
                             std::span<const std::string> labels);

// The largest |a[i] - b[i]| over two contiguous host tensors of the same numeric datatype and
// shape (FP16 / BF16 as their float values; NaN against NaN counts 0, NaN against a number
// +infinity): how far two versions' answers are (repo/rollout.h shadow traffic). 0 for empty
// tensors. INVALID_ARGUMENT for BYTES, or datatypes or shapes that differ.
Result<double> MaxAbsDifference(const Tensor& a, const Tensor& b);

// The lines of a label file: one label per line, "\r\n" or "\n" line ends, a final line end
// optional. Used for an output's config label_filename.
std::vector<std::string> ParseLabelFile(std::string_view contents);

}  // namespace kiln
