// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_dataset.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "base/check.h"
#include "bench/schedule.h"

namespace kiln::bench {
namespace {

constexpr int64_t kDefaultNumPrompts = 1000;

// Common short English words, about one token each in the usual BPE vocabularies (Llama,
// GPT-2/4, Qwen): the chat endpoint's random prompts.
constexpr const char* kWords[] = {
    "the",  "of",   "and",    "to",   "in",    "is",   "it",    "you",   "that",   "he",
    "was",  "for",  "on",     "are",  "with",  "as",   "his",   "they",  "be",     "at",
    "one",  "have", "this",   "from", "or",    "had",  "by",    "word",  "but",    "what",
    "some", "we",   "can",    "out",  "other", "were", "all",   "there", "when",   "up",
    "use",  "your", "how",    "said", "an",    "each", "she",   "which", "do",     "their",
    "time", "if",   "will",   "way",  "about", "many", "then",  "them",  "write",  "would",
    "like", "so",   "these",  "her",  "long",  "make", "thing", "see",   "him",    "two",
    "has",  "look", "more",   "day",  "could", "go",   "come",  "did",   "number", "sound",
    "no",   "most", "people", "my",   "over",  "know", "water", "than",  "call",   "first",
    "who",  "may",  "down",   "side", "been",  "now",  "find",  "any",   "new",    "work"};
constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

// Deterministic draws over mt19937_64 (whose output the standard fixes), so a seed gives the same
// dataset with every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : rng_(seed) {}
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi]. REQUIRES: lo <= hi.
  int64_t Int(int64_t lo, int64_t hi) {
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(rng_() % span);  // bias < span / 2^64: negligible
  }
  // Standard normal (Box-Muller).
  double Normal() {
    double u1 = 1.0 - Uniform();  // (0, 1]
    double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // Gamma(shape, 1) (Marsaglia and Tsang 2000; shape < 1 by the boost shape + 1, u^(1/shape)).
  double Gamma(double shape) {
    if (shape < 1) return Gamma(shape + 1) * std::pow(1.0 - Uniform(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
      double x = Normal(), v = 1 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      double u = 1.0 - Uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  std::mt19937_64 rng_;
};

int64_t CountWords(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

GenPrompt RandomPrompt(Rng& rng, int64_t input_len, int64_t output_len, const DatasetOptions& o) {
  GenPrompt p;
  p.input_tokens = input_len;
  p.output_tokens = output_len;
  if (o.chat) {
    for (int64_t i = 0; i < input_len; ++i) {
      if (i > 0) p.text += ' ';
      p.text += kWords[rng.Int(0, kWordCount - 1)];
    }
  } else {
    p.token_ids.resize(static_cast<size_t>(input_len));
    for (int32_t& id : p.token_ids) {
      id = static_cast<int32_t>(rng.Int(kFirstRandomTokenId, o.vocab_size - 1));
    }
  }
  return p;
}

Status CheckVocab(const DatasetOptions& o) {
  if (!o.chat &&
      (o.vocab_size <= kFirstRandomTokenId || o.vocab_size > std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(
        fmt::format("--vocab-size {}: token ids are drawn from [{}, vocab size), so it must be "
                    "above {} (and fit in 32 bits)",
                    o.vocab_size, kFirstRandomTokenId, kFirstRandomTokenId));
  }
  return Status::OK();
}

Result<std::vector<GenPrompt>> RandomDataset(const DatasetOptions& o, int64_t n) {
  if (o.input_len < 1) {
    return Status::InvalidArgument(fmt::format("--input-len {}: must be >= 1", o.input_len));
  }
  if (o.output_len < 1) {
    return Status::InvalidArgument(fmt::format("--output-len {}: must be >= 1", o.output_len));
  }
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return Status::InvalidArgument(
        fmt::format("--range-ratio {}: must be in [0, 1)", o.range_ratio));
  }
  KILN_RETURN_IF_ERROR(CheckVocab(o));
  // vLLM's bounds: int(len * (1 - r)) .. int(len * (1 + r)), at least 1.
  auto bounds = [&](int64_t len) {
    int64_t lo = static_cast<int64_t>(static_cast<double>(len) * (1 - o.range_ratio));
    int64_t hi = static_cast<int64_t>(static_cast<double>(len) * (1 + o.range_ratio));
    return std::pair<int64_t, int64_t>{std::max<int64_t>(1, lo), std::max<int64_t>(1, hi)};
  };
  auto [in_lo, in_hi] = bounds(o.input_len);
  auto [out_lo, out_hi] = bounds(o.output_len);
  Rng rng(o.seed);
  std::vector<GenPrompt> prompts;
  prompts.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t in = rng.Int(in_lo, in_hi);
    int64_t out = rng.Int(out_lo, out_hi);
    prompts.push_back(RandomPrompt(rng, in, out, o));
  }
  return prompts;
}

Result<std::vector<GenPrompt>> ShareGptLikeDataset(const DatasetOptions& o, int64_t n) {
  KILN_RETURN_IF_ERROR(CheckVocab(o));
  const double s = kShareGptSigma;
  // mean = exp(mu + sigma^2 / 2).
  const double mu_in = std::log(kShareGptInputMean) - s * s / 2;
  const double mu_out = std::log(kShareGptOutputMean) - s * s / 2;
  Rng rng(o.seed);
  std::vector<GenPrompt> prompts;
  prompts.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t in = 0, out = 0;
    do {
      in = std::llround(std::exp(mu_in + s * rng.Normal()));
      out = std::llround(std::exp(mu_out + s * rng.Normal()));
    } while (in < kShareGptInputMin || in > kShareGptInputMax || out < kShareGptOutputMin ||
             in + out > kShareGptTotalMax);
    prompts.push_back(RandomPrompt(rng, in, out, o));
  }
  return prompts;
}

}  // namespace

Result<std::vector<GenPrompt>> ParsePrompts(const std::string& text, const std::string& name,
                                            bool chat, int64_t default_output_len) {
  std::vector<GenPrompt> prompts;
  simdjson::dom::parser parser;
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    auto where = [&] { return fmt::format("{}:{}", name, line_no); };
    GenPrompt p;
    p.output_tokens = default_output_len;
    if (line[first] != '{') {
      p.text = line;
      p.input_tokens = CountWords(line);
      prompts.push_back(std::move(p));
      continue;
    }
    simdjson::dom::element root;
    if (auto error = parser.parse(line).get(root); error != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("{}: not a JSON object: {}", where(), simdjson::error_message(error)));
    }
    std::string_view prompt;
    simdjson::dom::array ids, messages;
    if (root["prompt"].get(prompt) == simdjson::SUCCESS) {
      p.text = std::string(prompt);
      p.input_tokens = CountWords(prompt);
    } else if (root["prompt"].get(ids) == simdjson::SUCCESS) {
      if (chat) {
        return Status::InvalidArgument(fmt::format(
            "{}: a token-id prompt needs --endpoint /v1/completions (chat takes text)", where()));
      }
      for (simdjson::dom::element e : ids) {
        int64_t id = 0;
        if (e.get(id) != simdjson::SUCCESS || id < 0 || id > std::numeric_limits<int32_t>::max()) {
          return Status::InvalidArgument(
              fmt::format("{}: \"prompt\" array holds something other than token ids", where()));
        }
        p.token_ids.push_back(static_cast<int32_t>(id));
      }
      p.input_tokens = static_cast<int64_t>(p.token_ids.size());
    } else if (root["messages"].get(messages) == simdjson::SUCCESS) {
      if (!chat) {
        return Status::InvalidArgument(fmt::format(
            "{}: \"messages\" needs --endpoint /v1/chat/completions (or give \"prompt\")",
            where()));
      }
      p.messages_json = simdjson::minify(messages);
      for (simdjson::dom::element m : messages) {
        std::string_view content;
        if (m["content"].get(content) == simdjson::SUCCESS) p.input_tokens += CountWords(content);
      }
    } else {
      return Status::InvalidArgument(
          fmt::format("{}: expected {{\"prompt\": \"...\"}} or {{\"messages\": [...]}}", where()));
    }
    simdjson::dom::element max_tokens;
    if (root["max_tokens"].get(max_tokens) == simdjson::SUCCESS) {
      int64_t v = 0;
      if (max_tokens.get(v) != simdjson::SUCCESS || v < 1) {
        return Status::InvalidArgument(
            fmt::format("{}: \"max_tokens\" must be an integer >= 1", where()));
      }
      p.output_tokens = v;
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return Status::InvalidArgument(fmt::format("{}: no prompts", name));
  return prompts;
}

Result<std::vector<GenPrompt>> MakeDataset(const DatasetOptions& o) {
  if (o.num_prompts < 0) {
    return Status::InvalidArgument(fmt::format("--num-prompts {}: must be >= 1", o.num_prompts));
  }
  int64_t n = o.num_prompts > 0 ? o.num_prompts : kDefaultNumPrompts;
  if (o.kind == "random") return RandomDataset(o, n);
  if (o.kind == "sharegpt-like") return ShareGptLikeDataset(o, n);
  if (o.kind != "file") {
    return Status::InvalidArgument(
        fmt::format("--dataset '{}': expected random, sharegpt-like or file", o.kind));
  }
  if (o.prompts_file.empty()) {
    return Status::InvalidArgument("--dataset file needs --prompts FILE");
  }
  if (o.output_len < 1) {
    return Status::InvalidArgument(fmt::format("--output-len {}: must be >= 1", o.output_len));
  }
  std::ifstream f(o.prompts_file, std::ios::binary);
  if (!f) return Status::NotFound(fmt::format("cannot read prompts file '{}'", o.prompts_file));
  std::stringstream text;
  text << f.rdbuf();
  KILN_ASSIGN_OR_RETURN(std::vector<GenPrompt> all,
                        ParsePrompts(text.str(), o.prompts_file, o.chat, o.output_len));
  if (o.num_prompts == 0) return all;
  std::vector<GenPrompt> prompts;
  prompts.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) prompts.push_back(all[static_cast<size_t>(i) % all.size()]);
  return prompts;
}

std::vector<int64_t> ArrivalOffsetsNs(size_t n, double rate_per_s, double burstiness,
                                      uint64_t seed) {
  KILN_CHECK(rate_per_s > 0 && burstiness > 0, "bad arrival parameters");
  std::vector<int64_t> at(n, 0);
  if (std::isinf(rate_per_s) || n == 0) return at;
  if (burstiness == 1) {
    ArrivalSchedule poisson(rate_per_s, Distribution::kPoisson, seed);
    for (size_t i = 1; i < n; ++i) at[i] = poisson.Next();
    return at;
  }
  // Gamma gaps with shape B and scale 1 / (rate * B): mean 1 / rate, CV^2 = 1 / B.
  Rng rng(seed);
  const double scale_ns = 1e9 / (rate_per_s * burstiness);
  double t = 0;
  for (size_t i = 1; i < n; ++i) {
    t += rng.Gamma(burstiness) * scale_ns;
    at[i] = static_cast<int64_t>(t);
  }
  return at;
}

}  // namespace kiln::bench
