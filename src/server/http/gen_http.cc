// SPDX-License-Identifier: Apache-2.0
// GenHttpFormat for the OpenAI-compatible API and Triton's generate extension; see gen_http.h.
#include "server/http/gen_http.h"

#include <fmt/format.h>

#include <chrono>
#include <random>
#include <utility>
#include <vector>

#include "server/http/generate_json.h"
#include "server/http/openai_json.h"
#include "server/status_map.h"

namespace kiln {
namespace {

// What a non-streaming answer keeps of each choice, and which choices have started.
class Choices {
 public:
  explicit Choices(int32_t n) : choices_(static_cast<size_t>(std::max(n, 1))) {
    for (size_t i = 0; i < choices_.size(); ++i) choices_[i].index = static_cast<int32_t>(i);
  }
  // False for an index outside [0, n) (a model bug; ignored).
  bool Add(const GenChunk& c, bool logprobs) {
    if (c.index < 0 || static_cast<size_t>(c.index) >= choices_.size()) return false;
    OpenAiChoice& ch = choices_[static_cast<size_t>(c.index)];
    ch.text += c.text;
    ch.has_logprobs = logprobs;
    ch.logprobs.insert(ch.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    if (c.finish_reason.has_value()) {
      ch.finish_reason = c.finish_reason;
      ch.stop_reason = c.stop_reason;
    }
    return true;
  }
  std::vector<OpenAiChoice>& all() { return choices_; }

 private:
  std::vector<OpenAiChoice> choices_;
};

class OpenAiFormat final : public GenHttpFormat {
 public:
  OpenAiFormat(const OpenAiRequest& r, bool chat, std::string id, int64_t created,
               std::string model)
      : chat_(chat),
        stream_(r.stream),
        include_usage_(r.include_usage),
        logprobs_(r.logprobs >= 0),
        echo_(r.echo ? r.request.prompt : std::string()),
        id_(std::move(id)),
        created_(created),
        model_(std::move(model)),
        choices_(r.request.sampling.n),
        started_(static_cast<size_t>(std::max(r.request.sampling.n, 1)), false),
        text_offset_(static_cast<size_t>(std::max(r.request.sampling.n, 1)), 0) {
    if (!echo_.empty() && !stream_) {
      for (OpenAiChoice& c : choices_.all()) c.text = echo_;
    }
  }

  bool stream() const override { return stream_; }

  std::string Chunk(const GenChunk& chunk) override {
    if (!stream_) {
      choices_.Add(chunk, logprobs_);
      return {};
    }
    if (chunk.index < 0 || static_cast<size_t>(chunk.index) >= started_.size()) return {};
    const size_t i = static_cast<size_t>(chunk.index);
    const bool first = !started_[i];
    started_[i] = true;
    const OpenAiResponseHeader h = header();
    std::string out;
    if (chat_) {
      for (const std::string& json : ChatCompletionChunkJson(h, chunk, first)) {
        out += SseEvent(json);
      }
      return out;
    }
    if (first && !echo_.empty()) {
      GenChunk prompt;
      prompt.index = chunk.index;
      prompt.text = echo_;
      out += SseEvent(CompletionChunkJson(h, prompt, &text_offset_[i]));
    }
    // A chunk with nothing to say (text held back by a stop string, no logprobs, not the
    // last) is not sent.
    if (chunk.text.empty() && chunk.logprobs.empty() && !chunk.finish_reason.has_value()) {
      return out;
    }
    out += SseEvent(CompletionChunkJson(h, chunk, &text_offset_[i]));
    return out;
  }

  std::string Finish(const GenFinal& final) override {
    const OpenAiResponseHeader h = header();
    if (stream_) {
      std::string out;
      if (include_usage_) {
        out += SseEvent(
            UsageChunkJson(h, chat_ ? OpenAiApi::kChat : OpenAiApi::kCompletions, final.usage));
      }
      out += kSseDone;
      return out;
    }
    return chat_ ? ChatCompletionResponseJson(h, choices_.all(), final.usage)
                 : CompletionResponseJson(h, choices_.all(), final.usage);
  }

  std::string ErrorBody(const Status& status) const override { return OpenAiErrorJson(status); }

  std::string StreamError(const Status& status) const override {
    return SseEvent(OpenAiErrorJson(status)) + std::string(kSseDone);
  }

 private:
  OpenAiResponseHeader header() const { return {id_, created_, model_, include_usage_}; }

  const bool chat_, stream_, include_usage_, logprobs_;
  const std::string echo_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  Choices choices_;
  std::vector<bool> started_;
  std::vector<int64_t> text_offset_;
};

class GenerateFormat final : public GenHttpFormat {
 public:
  GenerateFormat(const TritonGenerateRequest& r, bool stream, std::string model, int64_t version)
      : stream_(stream),
        prefix_(r.exclude_input_in_output ? std::string() : r.request.prompt),
        model_(std::move(model)),
        version_(version),
        text_(prefix_) {}

  bool stream() const override { return stream_; }

  std::string Chunk(const GenChunk& chunk) override {
    if (!stream_) {
      text_ += chunk.text;
      if (chunk.finish_reason.has_value()) finish_ = chunk.finish_reason;
      return {};
    }
    if (chunk.text.empty() && !chunk.finish_reason.has_value() && !first_) return {};
    GenChunk c = chunk;
    if (first_) c.text = prefix_ + c.text;
    first_ = false;
    return SseEvent(GenerateChunkJson(model_, version_, c));
  }

  std::string Finish(const GenFinal&) override {
    if (stream_) return {};
    return GenerateResponseJson(model_, version_, text_, finish_);
  }

  std::string ErrorBody(const Status& status) const override {
    return GenerateErrorJson(status.message());
  }
  std::string StreamError(const Status& status) const override {
    return SseEvent(GenerateErrorJson(status.message()));
  }

 private:
  const bool stream_;
  const std::string prefix_;
  const std::string model_;
  const int64_t version_;
  std::string text_;
  std::optional<FinishReason> finish_;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<GenHttpFormat> MakeOpenAiFormat(const OpenAiRequest& request, bool chat,
                                                std::string id, int64_t created,
                                                std::string model) {
  return std::make_unique<OpenAiFormat>(request, chat, std::move(id), created, std::move(model));
}

std::unique_ptr<GenHttpFormat> MakeGenerateFormat(const TritonGenerateRequest& request, bool stream,
                                                  std::string model_name, int64_t model_version) {
  return std::make_unique<GenerateFormat>(request, stream, std::move(model_name), model_version);
}
std::string NewOpenAiResponseId(bool chat) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}", chat ? "chatcmpl-" : "cmpl-", rng());
}

int64_t UnixSecondsNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void ApplyOpenAiDefaults(bool chat, GenerateRequest* request) {
  if (!chat && request->sampling.max_tokens < 0) request->sampling.max_tokens = 16;
}

}  // namespace kiln
