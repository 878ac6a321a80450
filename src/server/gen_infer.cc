// SPDX-License-Identifier: Apache-2.0
// Triton's LLM tensor convention on a generative model (gen_infer.h).
#include "server/gen_infer.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>

#include "server/http/generate_json.h"
#include "tensor/tensor.h"

namespace kiln {
namespace {

constexpr std::string_view kTextInput = "text_input";
constexpr std::string_view kTextOutput = "text_output";

Result<OwnedTensor> TextTensor(std::string text) {
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(DataType::kBytes, Shape{1}));
  t.data<std::string>()[0] = std::move(text);
  return t;
}

// The one element of a [1] (or [1, 1]) input of `dtype`.
Status CheckScalar(const InferInput& in, DataType dtype) {
  if (in.tensor.dtype() != dtype) {
    return Status::InvalidArgument(fmt::format("input '{}' must be {}, got {}", in.name,
                                               DataTypeName(dtype),
                                               DataTypeName(in.tensor.dtype())));
  }
  if (in.tensor.num_elements() != 1) {
    return Status::InvalidArgument(
        fmt::format("input '{}' must hold one element, got {}", in.name, in.tensor.num_elements()));
  }
  return Status::OK();
}

// Chunks -> tensor responses. Streaming: the previous chunk is held so that the last one goes
// out as the final response (no empty final response).
class GenToInferSink final : public GenerationSink {
 public:
  GenToInferSink(std::shared_ptr<ResponseSink> out, bool stream, std::string prefix,
                 InferResponse head)
      : out_(std::move(out)), stream_(stream), text_(std::move(prefix)), head_(std::move(head)) {}

  void Send(GenChunk chunk) override {
    const auto tokens = static_cast<int64_t>(chunk.token_ids.size());
    if (!stream_) {
      text_ += chunk.text;
      tokens_ += tokens;
      return;
    }
    if (held_.has_value()) SendText(std::move(*held_), std::exchange(held_tokens_, 0));
    held_ = std::move(text_) + chunk.text;  // the prefix goes with the first chunk
    held_tokens_ = tokens;
    text_.clear();
  }

  void Finish(Result<GenFinal> result) override {
    if (!result.ok()) {
      out_->Finish(result.status());
      return;
    }
    std::string last =
        stream_ ? (held_.has_value() ? std::move(*held_) : std::move(text_)) : std::move(text_);
    Result<OwnedTensor> t = TextTensor(std::move(last));
    if (!t.ok()) {
      out_->Finish(t.status());
      return;
    }
    InferResponse r = Head();
    r.outputs.push_back({std::string(kTextOutput), std::move(t).value()});
    // The tokens not yet reported: those of the held chunk, or of the whole answer.
    r.generated_tokens = stream_ ? held_tokens_ : tokens_;
    out_->Finish(std::move(r));
  }

  size_t backlog() const override { return out_->backlog(); }

 private:
  void SendText(std::string text, int64_t tokens) {
    Result<OwnedTensor> t = TextTensor(std::move(text));
    if (!t.ok()) return;
    InferResponse r = Head();
    r.outputs.push_back({std::string(kTextOutput), std::move(t).value()});
    r.generated_tokens = tokens;
    out_->Send(std::move(r));
  }
  // A response naming the model, version and request id (no outputs yet).
  InferResponse Head() const {
    InferResponse r;
    r.model_name = head_.model_name;
    r.model_version = head_.model_version;
    r.id = head_.id;
    return r;
  }

  std::shared_ptr<ResponseSink> out_;
  const bool stream_;
  std::string text_;
  std::optional<std::string> held_;
  int64_t tokens_ = 0;       // not streaming: the answer's tokens so far
  int64_t held_tokens_ = 0;  // streaming: the held chunk's tokens
  const InferResponse head_;
};

}  // namespace

void StartGenerativeInference(std::shared_ptr<LoadedModel> model,
                              std::unique_ptr<InferRequest> request,
                              std::shared_ptr<ResponseSink> sink) {
  auto gen = std::make_unique<GenerateRequest>();
  bool stream = false;
  bool exclude_input = true;
  bool have_text = false;
  const auto fail = [&](Status s) { sink->Finish(std::move(s)); };
  for (const InferInput& in : request->inputs) {
    if (in.name == kTextInput) {
      if (Status s = CheckScalar(in, DataType::kBytes); !s.ok()) return fail(s);
      gen->prompt = in.tensor.data<std::string>()[0];
      have_text = true;
    } else if (in.name == "stream") {
      if (Status s = CheckScalar(in, DataType::kBool); !s.ok()) return fail(s);
      stream = in.tensor.data<bool>()[0];
    } else if (in.name == "exclude_input_in_output") {
      if (Status s = CheckScalar(in, DataType::kBool); !s.ok()) return fail(s);
      exclude_input = in.tensor.data<bool>()[0];
    } else if (in.name == "sampling_parameters") {
      if (Status s = CheckScalar(in, DataType::kBytes); !s.ok()) return fail(s);
      Status s = ParseSamplingParametersJson(in.tensor.data<std::string>()[0], &gen->sampling);
      if (!s.ok()) return fail(s.WithContext("input 'sampling_parameters'"));
    } else {
      return fail(Status::InvalidArgument(fmt::format(
          "unexpected input '{}' for generative model '{}' (its inputs: text_input, stream, "
          "sampling_parameters, exclude_input_in_output)",
          in.name, model->name())));
    }
  }
  if (!have_text) {
    return fail(Status::InvalidArgument(
        fmt::format("generative model '{}' needs the input 'text_input'", model->name())));
  }
  for (const RequestedOutput& out : request->outputs) {
    if (out.name != kTextOutput) {
      return fail(Status::InvalidArgument(
          fmt::format("unexpected inference output '{}' for model '{}' (its output: text_output)",
                      out.name, model->name())));
    }
  }
  if (stream && !sink->streaming()) {
    return fail(Status::InvalidArgument(
        "'stream' is true, but this endpoint answers once: stream with gRPC ModelStreamInfer or "
        "HTTP /generate_stream"));
  }
  if (gen->sampling.n != 1) {
    return fail(Status::InvalidArgument("'n' must be 1 for a tensor request (one text_output)"));
  }
  gen->id = request->id;
  gen->priority = request->priority;
  gen->timeout_us = request->timeout_us;
  gen->cancellation = request->cancellation;
  std::string prefix = exclude_input ? std::string() : gen->prompt;
  InferResponse head;
  head.model_name = model->name();
  head.model_version = model->version();
  head.id = request->id;
  model->Generate(std::move(gen), std::make_shared<GenToInferSink>(
                                      std::move(sink), stream, std::move(prefix), std::move(head)));
}

}  // namespace kiln
