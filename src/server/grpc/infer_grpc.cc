// SPDX-License-Identifier: Apache-2.0
// gRPC inference messages <-> InferRequest / InferResponse; see infer_grpc.h.
#include "server/grpc/infer_grpc.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/raw_tensor.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"

namespace kiln {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using InputTensor = inference::ModelInferRequest::InferInputTensor;

// Element count of `dims` (already checked non-negative); nullopt when it overflows int64.
std::optional<int64_t> ElementCount(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string DimsText(std::span<const int64_t> dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::span<const int64_t> Dims(const InputTensor& in) {
  return {in.shape().data(), static_cast<size_t>(in.shape_size())};
}

// Names of the typed fields that hold values, for error messages.
std::vector<std::string_view> FilledContentFields(const InferTensorContents& c) {
  std::vector<std::string_view> names;
  if (c.bool_contents_size() > 0) names.emplace_back("bool_contents");
  if (c.int_contents_size() > 0) names.emplace_back("int_contents");
  if (c.int64_contents_size() > 0) names.emplace_back("int64_contents");
  if (c.uint_contents_size() > 0) names.emplace_back("uint_contents");
  if (c.uint64_contents_size() > 0) names.emplace_back("uint64_contents");
  if (c.fp32_contents_size() > 0) names.emplace_back("fp32_contents");
  if (c.fp64_contents_size() > 0) names.emplace_back("fp64_contents");
  if (c.bytes_contents_size() > 0) names.emplace_back("bytes_contents");
  return names;
}

std::string_view TypedFieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kBool:
      return "bool_contents";
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
      return "uint_contents";
    case DataType::kUint64:
      return "uint64_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return "int_contents";
    case DataType::kInt64:
      return "int64_contents";
    case DataType::kFloat32:
      return "fp32_contents";
    case DataType::kFloat64:
      return "fp64_contents";
    case DataType::kBytes:
      return "bytes_contents";
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInvalid:
      break;
  }
  return {};
}

// Copies a repeated field into the tensor, narrowing to T with a range check.
template <typename T, typename Field>
Status CopyTyped(const Field& values, std::string_view input, DataType dtype, OwnedTensor* t) {
  T* out = t->data<T>();
  int64_t i = 0;
  for (const auto& v : values) {
    if constexpr (!std::is_same_v<T, std::decay_t<decltype(v)>>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        return Status::InvalidArgument(
            fmt::format("input '{}': element {} ({}) is out of range for {}", input, i, v,
                        DataTypeName(dtype)));
      }
    }
    out[i++] = static_cast<T>(v);
  }
  return Status::OK();
}

// The typed field of `dtype` holds exactly `count` values and no other field holds any.
Status CheckTyped(const InputTensor& in, DataType dtype, int64_t count) {
  const InferTensorContents& c = in.contents();
  const std::string_view want = TypedFieldFor(dtype);
  if (want.empty()) {
    return Status::InvalidArgument(fmt::format(
        "input '{}': datatype {} has no typed contents field; send it in raw_input_contents",
        in.name(), DataTypeName(dtype)));
  }
  for (std::string_view field : FilledContentFields(c)) {
    if (field != want) {
      return Status::InvalidArgument(
          fmt::format("input '{}' of datatype {} carries {}; its values belong in {}", in.name(),
                      DataTypeName(dtype), field, want));
    }
  }
  int64_t got = 0;
  switch (dtype) {
    case DataType::kBool:
      got = c.bool_contents_size();
      break;
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
      got = c.uint_contents_size();
      break;
    case DataType::kUint64:
      got = c.uint64_contents_size();
      break;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      got = c.int_contents_size();
      break;
    case DataType::kInt64:
      got = c.int64_contents_size();
      break;
    case DataType::kFloat32:
      got = c.fp32_contents_size();
      break;
    case DataType::kFloat64:
      got = c.fp64_contents_size();
      break;
    case DataType::kBytes:
      got = c.bytes_contents_size();
      break;
    default:
      break;
  }
  if (got != count) {
    return Status::InvalidArgument(
        fmt::format("input '{}': {} has {} elements but shape {} needs {}", in.name(), want, got,
                    DimsText(Dims(in)), count));
  }
  return Status::OK();
}

// REQUIRES: CheckTyped(in, dtype, t->num_elements()) is OK.
Status FillFromTyped(const InputTensor& in, DataType dtype, int64_t count, OwnedTensor* t) {
  const InferTensorContents& c = in.contents();
  const std::string_view name = in.name();
  switch (dtype) {
    case DataType::kBool:
      return CopyTyped<bool>(c.bool_contents(), name, dtype, t);
    case DataType::kUint8:
      return CopyTyped<uint8_t>(c.uint_contents(), name, dtype, t);
    case DataType::kUint16:
      return CopyTyped<uint16_t>(c.uint_contents(), name, dtype, t);
    case DataType::kUint32:
      return CopyTyped<uint32_t>(c.uint_contents(), name, dtype, t);
    case DataType::kUint64:
      return CopyTyped<uint64_t>(c.uint64_contents(), name, dtype, t);
    case DataType::kInt8:
      return CopyTyped<int8_t>(c.int_contents(), name, dtype, t);
    case DataType::kInt16:
      return CopyTyped<int16_t>(c.int_contents(), name, dtype, t);
    case DataType::kInt32:
      return CopyTyped<int32_t>(c.int_contents(), name, dtype, t);
    case DataType::kInt64:
      return CopyTyped<int64_t>(c.int64_contents(), name, dtype, t);
    case DataType::kFloat32:
      return CopyTyped<float>(c.fp32_contents(), name, dtype, t);
    case DataType::kFloat64:
      return CopyTyped<double>(c.fp64_contents(), name, dtype, t);
    case DataType::kBytes: {
      auto* out = t->data<std::string>();
      for (int64_t i = 0; i < count; ++i) out[i] = c.bytes_contents(static_cast<int>(i));
      return Status::OK();
    }
    default:
      break;
  }
  return Status::Internal(fmt::format("input '{}': unhandled datatype", name));
}

// One input. Raw contents are borrowed from the message (kept alive by `owner`) when `owner` is
// set and the bytes are aligned for the datatype; copied otherwise.
Result<InferInput> DecodeInput(const InputTensor& in, const std::string* raw,
                               const std::shared_ptr<const void>& owner) {
  const std::string& name = in.name();
  const std::optional<DataType> dtype = DataTypeFromName(in.datatype());
  if (!dtype || *dtype == DataType::kInvalid) {
    return Status::InvalidArgument(
        fmt::format("input '{}' has invalid datatype '{}'", name, in.datatype()));
  }
  if (in.shape_size() > Shape::kMaxRank) {
    return Status::InvalidArgument(fmt::format("input '{}': rank {} exceeds the maximum {}", name,
                                               in.shape_size(), Shape::kMaxRank));
  }
  for (int64_t d : in.shape()) {
    if (d < 0) {
      return Status::InvalidArgument(
          fmt::format("input '{}': shape {} has a negative dimension", name, DimsText(Dims(in))));
    }
  }
  const std::optional<int64_t> count = ElementCount(Dims(in));
  if (!count) {
    return Status::InvalidArgument(
        fmt::format("input '{}': shape {} has too many elements", name, DimsText(Dims(in))));
  }
  for (const auto& [key, value] : in.parameters()) {
    if (key == "shared_memory_region" || key == "shared_memory_byte_size" ||
        key == "shared_memory_offset") {
      return Status::Unimplemented(
          fmt::format("input '{}': shared memory inputs are not supported", name));
    }
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(Dims(in)));

  if (raw != nullptr) {
    if (*dtype != DataType::kBytes) {
      const size_t elem = DataTypeSize(*dtype);
      const uint64_t want = static_cast<uint64_t>(*count);
      if (want > raw->size() / elem || want * elem != raw->size()) {
        return Status::InvalidArgument(fmt::format(
            "unexpected size for input '{}': shape {} of {} needs {} bytes, raw_input_contents "
            "holds {}",
            name, DimsText(Dims(in)), DataTypeName(*dtype),
            want <= std::numeric_limits<uint64_t>::max() / elem ? fmt::format("{}", want * elem)
                                                                : std::string("too many"),
            raw->size()));
      }
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, DecodeRawTensor(name, *dtype, shape, *raw, owner));
    return InferInput{name, std::move(tensor)};
  }

  if (!in.has_contents() && *count > 0) {
    return Status::InvalidArgument(fmt::format(
        "unable to find data for input tensor '{}': set its contents or raw_input_contents", name));
  }
  // The typed field and its element count are checked before anything is allocated.
  if (*count > 0) KILN_RETURN_IF_ERROR(CheckTyped(in, *dtype, *count));
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(*dtype, shape));
  if (*count > 0) KILN_RETURN_IF_ERROR(FillFromTyped(in, *dtype, *count, &tensor));
  return InferInput{name, std::move(tensor)};
}

// An unsigned scheduling parameter: int64_param >= 0 or uint64_param.
Result<uint64_t> UnsignedParameter(const std::string& key, const InferParameter& p,
                                   std::string_view meaning) {
  if (p.parameter_choice_case() == InferParameter::kUint64Param) return p.uint64_param();
  if (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<uint64_t>(p.int64_param());
  }
  return Status::InvalidArgument(fmt::format(
      "request parameter '{}' ({}) must be a non-negative int64_param or a uint64_param", key,
      meaning));
}

Status DecodeParameters(const ModelInferRequest& msg, InferRequest* request) {
  for (const auto& [key, p] : msg.parameters()) {
    if (key == "priority") {
      KILN_ASSIGN_OR_RETURN(request->priority,
                            UnsignedParameter(key, p,
                                              "priority level; 1 is the highest, 0 the "
                                              "model's default"));
    } else if (key == "timeout") {
      KILN_ASSIGN_OR_RETURN(request->timeout_us,
                            UnsignedParameter(key, p, "queue timeout in microseconds"));
    } else if (key == "precision" || key == "service_class") {
      if (p.parameter_choice_case() != InferParameter::kStringParam) {
        return Status::InvalidArgument(
            fmt::format("request parameter '{}' must be a string_param", key));
      }
      KILN_RETURN_IF_ERROR(SetRoutingParameter(key, p.string_param(), request));
    } else if (key == "sequence_id") {
      // Only 0 and "" mean "not part of a sequence"; any other value, or a value of another
      // type (double, bool), asks for sequence batching.
      const bool none =
          (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() == 0) ||
          (p.parameter_choice_case() == InferParameter::kUint64Param && p.uint64_param() == 0) ||
          (p.parameter_choice_case() == InferParameter::kStringParam && p.string_param().empty());
      if (!none) {
        return Status::Unimplemented(
            "request parameter 'sequence_id': sequence batching is not supported by this server");
      }
    } else if (key == "sequence_start" || key == "sequence_end") {
      // Only bool false is "no sequence"; true, or a value of another type, is refused.
      if (p.parameter_choice_case() != InferParameter::kBoolParam || p.bool_param()) {
        return Status::Unimplemented(fmt::format(
            "request parameter '{}': sequence batching is not supported by this server", key));
      }
    } else if (key.starts_with("triton_")) {
      return Status::InvalidArgument(
          fmt::format("request parameter '{}' uses the reserved prefix 'triton_'", key));
    }
  }
  return Status::OK();
}

}  // namespace

Result<int64_t> ParseModelVersion(std::string_view version) {
  if (version.empty()) return int64_t{-1};
  int64_t v = 0;
  const auto res = std::from_chars(version.data(), version.data() + version.size(), v);
  if (version.front() == '-' || version.front() == '+' || res.ec != std::errc() ||
      res.ptr != version.data() + version.size()) {
    return Status::InvalidArgument(fmt::format(
        "model version '{}' is not a non-negative decimal number that fits int64", version));
  }
  return v;
}

Result<int64_t> ClassCount(const inference::ModelInferRequest::InferRequestedOutputTensor& output) {
  const auto it = output.parameters().find("classification");
  if (it == output.parameters().end()) return int64_t{0};
  const inference::InferParameter& p = it->second;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    return p.int64_param();
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param &&
      p.uint64_param() <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(p.uint64_param());
  }
  return Status::InvalidArgument(
      fmt::format("output '{}': parameter 'classification' must be a non-negative int64_param or "
                  "uint64_param (the number of top classes)",
                  output.name()));
}

Result<bool> UnloadDependents(const inference::RepositoryModelUnloadRequest& request) {
  const auto it = request.parameters().find("unload_dependents");
  if (it == request.parameters().end()) return false;
  if (it->second.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
    return Status::InvalidArgument("unload parameter 'unload_dependents' must be a bool_param");
  }
  return it->second.bool_param();
}

Result<std::unique_ptr<InferRequest>> DecodeModelInferRequest(
    const ModelInferRequest& msg, const std::shared_ptr<const void>& owner) {
  auto request = std::make_unique<InferRequest>();
  request->id = msg.id();
  KILN_RETURN_IF_ERROR(DecodeParameters(msg, request.get()));

  const bool raw = msg.raw_input_contents_size() > 0;
  if (raw && msg.raw_input_contents_size() != msg.inputs_size()) {
    if (msg.raw_input_contents_size() < msg.inputs_size()) {
      return Status::InvalidArgument(fmt::format(
          "unable to find data for input tensor '{}': raw_input_contents has {} entries for {} "
          "inputs",
          msg.inputs(msg.raw_input_contents_size()).name(), msg.raw_input_contents_size(),
          msg.inputs_size()));
    }
    return Status::InvalidArgument(
        fmt::format("raw_input_contents has {} entries but the request has only {} inputs",
                    msg.raw_input_contents_size(), msg.inputs_size()));
  }
  std::set<std::string_view> seen;
  request->inputs.reserve(static_cast<size_t>(msg.inputs_size()));
  for (int i = 0; i < msg.inputs_size(); ++i) {
    const InputTensor& in = msg.inputs(i);
    if (in.name().empty()) {
      return Status::InvalidArgument(fmt::format("inputs[{}] has no name", i));
    }
    if (!seen.insert(in.name()).second) {
      return Status::InvalidArgument(fmt::format("input '{}' appears more than once", in.name()));
    }
    if (raw && in.has_contents()) {
      return Status::InvalidArgument(fmt::format(
          "input '{}' sets contents while the request uses raw_input_contents; use one form "
          "for every input",
          in.name()));
    }
    KILN_ASSIGN_OR_RETURN(InferInput input,
                          DecodeInput(in, raw ? &msg.raw_input_contents(i) : nullptr, owner));
    request->inputs.push_back(std::move(input));
  }

  request->outputs.reserve(static_cast<size_t>(msg.outputs_size()));
  for (int i = 0; i < msg.outputs_size(); ++i) {
    const auto& out = msg.outputs(i);
    if (out.name().empty()) {
      return Status::InvalidArgument(fmt::format("outputs[{}] has no name", i));
    }
    for (const auto& [key, p] : out.parameters()) {
      if (key == "classification") {
        KILN_RETURN_IF_ERROR(ClassCount(out).status());
        continue;
      }
      if (key == "shared_memory_region" || key == "shared_memory_byte_size" ||
          key == "shared_memory_offset") {
        return Status::Unimplemented(
            fmt::format("output '{}': shared memory outputs are not supported", out.name()));
      }
    }
    request->outputs.push_back(RequestedOutput{out.name()});
  }
  return request;
}

void WireMessage::Append(std::string bytes) {
  size_ += bytes.size();
  pieces_.push_back(Piece{std::move(bytes), OwnedTensor()});
}

void WireMessage::AppendBorrowed(OwnedTensor tensor) {
  size_ += tensor.size_bytes();
  pieces_.push_back(Piece{std::string(), std::move(tensor)});
}

void WireMessage::AppendFieldHeader(int field, uint64_t length) {
  // Tag (field number, wire type 2: length-delimited), then the length, both varints.
  std::string header;
  for (uint64_t v : {(static_cast<uint64_t>(field) << 3) | 2u, length}) {
    while (v >= 0x80) {
      header.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    header.push_back(static_cast<char>(v));
  }
  Append(std::move(header));
}

WireMessage WireMessage::NestedAs(int field) && {
  WireMessage outer;
  outer.AppendFieldHeader(field, size_);
  outer.size_ += size_;
  for (Piece& p : pieces_) outer.pieces_.push_back(std::move(p));
  pieces_.clear();
  size_ = 0;
  return outer;
}

std::string WireMessage::Join() const {
  std::string all;
  all.reserve(size_);
  for (const Piece& p : pieces_) all.append(p.data(), p.size());
  return all;
}

Result<WireMessage> EncodeModelInferResponse(const InferResponse& response,
                                             inference::ModelInferResponse head) {
  head.set_model_name(response.model_name);
  head.set_model_version(std::to_string(response.model_version));
  head.set_id(response.id);
  head.clear_outputs();
  head.clear_raw_output_contents();
  // Output metadata first, checking every output and the message size before any copy.
  uint64_t raw_total = 0;
  for (const InferOutput& output : response.outputs) {
    const Tensor& t = output.tensor.view();
    if (!t.valid() || !t.device().is_cpu() || !t.is_contiguous()) {
      return Status::Internal(
          fmt::format("output '{}' is not a contiguous host tensor", output.name));
    }
    auto* o = head.add_outputs();
    o->set_name(output.name);
    o->set_datatype(std::string(DataTypeName(t.dtype())));
    for (int64_t d : t.shape().dims()) o->add_shape(d);
    raw_total += RawTensorBytes(t) + 16;  // + at most a tag and a length
  }
  const size_t head_bytes = head.ByteSizeLong();
  if (raw_total + head_bytes > static_cast<uint64_t>(kMaxGrpcMessageBytes)) {
    return Status::InvalidArgument(fmt::format(
        "the response's outputs exceed the largest gRPC message ({} bytes)", kMaxGrpcMessageBytes));
  }
  WireMessage wire;
  std::string bytes;
  if (!head.SerializeToString(&bytes)) {
    return Status::Internal("cannot serialize the response's metadata");
  }
  wire.Append(std::move(bytes));
  constexpr int kRawField = inference::ModelInferResponse::kRawOutputContentsFieldNumber;
  for (const InferOutput& output : response.outputs) {
    const Tensor& t = output.tensor.view();
    if (t.dtype() == DataType::kBytes) {
      std::string raw;
      raw.reserve(RawTensorBytes(t));
      KILN_RETURN_IF_ERROR(AppendRawTensor(t, &raw));
      wire.AppendFieldHeader(kRawField, raw.size());
      wire.Append(std::move(raw));
    } else {
      wire.AppendFieldHeader(kRawField, t.size_bytes());
      if (t.size_bytes() > 0) wire.AppendBorrowed(output.tensor);
    }
  }
  return wire;
}

namespace {
void FillDuration(const StatDuration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}
}  // namespace

void FillModelStatistics(std::string_view name, int64_t version, const ModelStatistics& s,
                         inference::ModelStatistics* m) {
  m->set_name(std::string(name));
  m->set_version(std::to_string(version));
  m->set_last_inference(s.last_inference_ms);
  m->set_inference_count(s.inference_count);
  m->set_execution_count(s.execution_count);
  auto* is = m->mutable_inference_stats();
  FillDuration(s.inference.success, is->mutable_success());
  FillDuration(s.inference.fail, is->mutable_fail());
  FillDuration(s.inference.queue, is->mutable_queue());
  FillDuration(s.inference.compute_input, is->mutable_compute_input());
  FillDuration(s.inference.compute_infer, is->mutable_compute_infer());
  FillDuration(s.inference.compute_output, is->mutable_compute_output());
  FillDuration(s.inference.cache_hit, is->mutable_cache_hit());
  FillDuration(s.inference.cache_miss, is->mutable_cache_miss());
  for (const auto& [size, b] : s.batches) {
    auto* bs = m->add_batch_stats();
    bs->set_batch_size(size);
    FillDuration(b.compute_input, bs->mutable_compute_input());
    FillDuration(b.compute_infer, bs->mutable_compute_infer());
    FillDuration(b.compute_output, bs->mutable_compute_output());
  }
}

}  // namespace kiln
