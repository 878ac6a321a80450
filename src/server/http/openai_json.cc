// SPDX-License-Identifier: Apache-2.0
// OpenAI-compatible request parsing (simdjson DOM) and response writing (JsonWriter); the
// sampling field validators shared with the Triton generate extension (generate_json.cc).
//
// NOTE: the parser is given kMaxJsonDepth, so simdjson rejects deeper documents in its
// iterative stage 2 and the one recursive walk below (WriteElement, re-serializing messages)
// never goes deeper than that. Only the simdjson error-code API is used (`.get(x)`), which
// never throws. Every field has one validator and one message shape, "'<field>' must be
// <what>, got <what was sent>", so the OpenAI and Triton front ends refuse the same way.
#include "server/http/openai_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "server/http/infer_json.h"
#include "server/http/json_read.h"
#include "server/json_writer.h"
#include "server/status_map.h"

namespace kiln {
namespace {

namespace dom = simdjson::dom;
using ElementType = dom::element_type;

constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

using json_read::AsDouble;
using json_read::AsInt64;
using json_read::AsString;
using json_read::AsUint64;
using json_read::JsonTypeName;

// The element for an error message (json_read.h), an empty string named as such.
std::string Describe(dom::element e) {
  if (e.type() == ElementType::STRING && AsString(e).empty()) return "an empty string";
  return json_read::JsonValueForMessage(e);
}

bool IsNull(dom::element e) { return e.type() == ElementType::NULL_VALUE; }

// A whole-string number (lenient style): std::from_chars takes no sign '+', no spaces.
template <typename T>
bool FromChars(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), *out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

// A JSON number, or in the lenient style a string holding one, as a finite double.
bool GetDouble(dom::element e, JsonValueStyle style, double* out) {
  switch (e.type()) {
    case ElementType::INT64:
      *out = static_cast<double>(AsInt64(e));
      return true;
    case ElementType::UINT64:
      *out = static_cast<double>(AsUint64(e));
      return true;
    case ElementType::DOUBLE:
      *out = AsDouble(e);
      return true;
    case ElementType::STRING:
      return style == JsonValueStyle::kLenient && FromChars(AsString(e), out) &&
             std::isfinite(*out);
    default:
      return false;
  }
}

// An integral double within [lo, hi) (both powers of two, so exact) as an integer.
bool IntegralDouble(double d, double lo, double hi) {
  return std::isfinite(d) && d == std::floor(d) && d >= lo && d < hi;
}

// A JSON integer (or a number with no fraction, or lenient: a string of one) in int64 range.
bool GetInt64(dom::element e, JsonValueStyle style, int64_t* out) {
  constexpr double kTwo63 = 9223372036854775808.0;
  switch (e.type()) {
    case ElementType::INT64:
      *out = AsInt64(e);
      return true;
    case ElementType::DOUBLE: {
      const double d = AsDouble(e);
      if (!IntegralDouble(d, -kTwo63, kTwo63)) return false;
      *out = static_cast<int64_t>(d);
      return true;
    }
    case ElementType::STRING: {
      if (style != JsonValueStyle::kLenient) return false;
      const std::string_view s = AsString(e);
      if (FromChars(s, out)) return true;
      double d = 0;
      if (!FromChars(s, &d) || !IntegralDouble(d, -kTwo63, kTwo63)) return false;
      *out = static_cast<int64_t>(d);
      return true;
    }
    default:  // UINT64 is beyond int64
      return false;
  }
}

Status MustBe(std::string_view key, std::string_view what, dom::element got) {
  return Status::InvalidArgument(fmt::format("'{}' must be {}, got {}", key, what, Describe(got)));
}

Status ReadInt(std::string_view key, dom::element e, JsonValueStyle style, int64_t lo, int64_t hi,
               std::string_view what, int64_t* out) {
  int64_t v = 0;
  if (!GetInt64(e, style, &v) || v < lo || v > hi) return MustBe(key, what, e);
  *out = v;
  return Status::OK();
}

Status ReadString(std::string_view key, dom::element e, std::string* out) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return MustBe(key, "a string", e);
  out->assign(s);
  return Status::OK();
}

// ---- The shared sampling fields ----

// Numbers stored as float: the key, the member, the closed or open range and its wording.
struct FloatField {
  std::string_view key;
  float GenSamplingParams::*member;
  double lo;
  double hi;
  bool lo_open;
  std::string_view range;
};

constexpr FloatField kFloatFields[] = {
    {"temperature", &GenSamplingParams::temperature, 0, 2, false, "between 0 and 2"},
    {"top_p", &GenSamplingParams::top_p, 0, 1, true, "in (0, 1]"},
    {"min_p", &GenSamplingParams::min_p, 0, 1, false, "between 0 and 1"},
    {"repetition_penalty", &GenSamplingParams::repetition_penalty, 0,
     std::numeric_limits<float>::max(), true, "greater than 0"},
    {"presence_penalty", &GenSamplingParams::presence_penalty, -2, 2, false, "between -2 and 2"},
    {"frequency_penalty", &GenSamplingParams::frequency_penalty, -2, 2, false, "between -2 and 2"},
};

Status ReadFloat(const FloatField& f, dom::element e, JsonValueStyle style,
                 GenSamplingParams* params) {
  double d = 0;
  const bool ok = GetDouble(e, style, &d) && (f.lo_open ? d > f.lo : d >= f.lo) && d <= f.hi;
  if (!ok) return MustBe(f.key, fmt::format("a number {}", f.range), e);
  params->*f.member = static_cast<float>(d);
  return Status::OK();
}

Status ReadTokenId(std::string_view what, dom::element e, JsonValueStyle style, int32_t* out) {
  int64_t v = 0;
  if (!GetInt64(e, style, &v) || v < 0 || v > kMaxTokenId) {
    return Status::InvalidArgument(fmt::format(
        "{} must be a token id (an integer in [0, {}]), got {}", what, kMaxTokenId, Describe(e)));
  }
  *out = static_cast<int32_t>(v);
  return Status::OK();
}

Status ReadStop(std::string_view key, dom::element e, JsonValueStyle, GenSamplingParams* params) {
  std::vector<std::string> stops;
  dom::array array;
  if (e.type() == ElementType::STRING) {
    stops.emplace_back(AsString(e));
  } else if (e.get_array().get(array) == simdjson::SUCCESS) {
    if (array.size() > kMaxStopStrings) {
      return Status::InvalidArgument(fmt::format("'{}' has {} strings, more than the limit of {}",
                                                 key, array.size(), kMaxStopStrings));
    }
    size_t i = 0;
    for (dom::element s : array) {
      if (s.type() != ElementType::STRING) {
        return Status::InvalidArgument(
            fmt::format("'{}' element {} must be a string, got {}", key, i, Describe(s)));
      }
      stops.emplace_back(AsString(s));
      ++i;
    }
  } else {
    return MustBe(key, "a string or an array of strings", e);
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) {
      return Status::InvalidArgument(fmt::format("'{}' strings must not be empty", key));
    }
    if (stops[i].size() > kMaxStopStringBytes) {
      return Status::InvalidArgument(
          fmt::format("'{}' string {} is {} bytes, more than the limit of {}", key, i,
                      stops[i].size(), kMaxStopStringBytes));
    }
  }
  params->stop = std::move(stops);
  return Status::OK();
}

Status ReadStopTokenIds(std::string_view key, dom::element e, JsonValueStyle style,
                        GenSamplingParams* params) {
  dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) {
    return MustBe(key, "an array of token ids", e);
  }
  std::vector<int32_t> ids;
  for (dom::element t : array) {
    int32_t id = 0;
    KILN_RETURN_IF_ERROR(
        ReadTokenId(fmt::format("'{}' element {}", key, ids.size()), t, style, &id));
    ids.push_back(id);
  }
  params->stop_token_ids = std::move(ids);
  return Status::OK();
}

Status ReadLogitBias(std::string_view key, dom::element e, JsonValueStyle style,
                     GenSamplingParams* params) {
  dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) {
    return MustBe(key, "an object mapping token ids to numbers between -100 and 100", e);
  }
  if (object.size() > kMaxLogitBias) {
    return Status::InvalidArgument(fmt::format("'{}' has {} entries, more than the limit of {}",
                                               key, object.size(), kMaxLogitBias));
  }
  std::vector<std::pair<int32_t, float>> bias;
  for (dom::key_value_pair kv : object) {
    int32_t id = 0;
    if (!FromChars(kv.key, &id) || id < 0) {
      return Status::InvalidArgument(
          fmt::format("'{}' key \"{}\" is not a token id (an integer in [0, {}])", key,
                      kv.key.substr(0, 32), kMaxTokenId));
    }
    double d = 0;
    if (!GetDouble(kv.value, style, &d) || d < -100 || d > 100) {
      return MustBe(fmt::format("{}.{}", key, kv.key), "a number between -100 and 100", kv.value);
    }
    // A repeated token id: the last value wins, as for every other repeated key.
    auto it = std::find_if(bias.begin(), bias.end(), [id](const auto& b) { return b.first == id; });
    if (it != bias.end()) {
      it->second = static_cast<float>(d);
    } else {
      bias.emplace_back(id, static_cast<float>(d));
    }
  }
  params->logit_bias = std::move(bias);
  return Status::OK();
}

Status ReadSeed(std::string_view key, dom::element e, JsonValueStyle style,
                GenSamplingParams* params) {
  // Negative seeds keep their two's-complement bits; beyond int64 up to 2^64 - 1 is exact.
  constexpr double kTwo64 = 18446744073709551616.0;
  if (e.type() == ElementType::UINT64) {
    params->seed = AsUint64(e);
    return Status::OK();
  }
  int64_t v = 0;
  if (GetInt64(e, style, &v)) {
    params->seed = static_cast<uint64_t>(v);
    return Status::OK();
  }
  uint64_t u = 0;
  if (e.type() == ElementType::STRING && style == JsonValueStyle::kLenient &&
      FromChars(AsString(e), &u)) {
    params->seed = u;
    return Status::OK();
  }
  if (e.type() == ElementType::DOUBLE && IntegralDouble(AsDouble(e), 0, kTwo64)) {
    params->seed = static_cast<uint64_t>(AsDouble(e));
    return Status::OK();
  }
  return MustBe(key, "an integer", e);
}

Status ReadBool(std::string_view key, dom::element e, JsonValueStyle style, bool* out) {
  if (e.get_bool().get(*out) == simdjson::SUCCESS) return Status::OK();
  if (style == JsonValueStyle::kLenient && e.type() == ElementType::STRING) {
    const std::string_view s = AsString(e);
    if (s == "true" || s == "True") {
      *out = true;
      return Status::OK();
    }
    if (s == "false" || s == "False") {
      *out = false;
      return Status::OK();
    }
  }
  return MustBe(key, "a boolean", e);
}

// The non-float shared fields: key -> parser. One entry per field; the float ones are above.
using FieldParser = Status (*)(std::string_view key, dom::element e, JsonValueStyle style,
                               GenSamplingParams* params);
struct SamplingField {
  std::string_view key;
  FieldParser parse;
};

constexpr SamplingField kSamplingFields[] = {
    {"top_k",
     [](std::string_view key, dom::element e, JsonValueStyle style, GenSamplingParams* p) {
       int64_t v = 0;
       KILN_RETURN_IF_ERROR(ReadInt(key, e, style, -1, kMaxTokenId,
                                    fmt::format("-1 or an integer in [0, {}]", kMaxTokenId), &v));
       p->top_k = v < 0 ? 0 : static_cast<int32_t>(v);
       return Status::OK();
     }},
    {"max_tokens",
     [](std::string_view key, dom::element e, JsonValueStyle style, GenSamplingParams* p) {
       return ReadInt(key, e, style, 1, std::numeric_limits<int64_t>::max(), "an integer >= 1",
                      &p->max_tokens);
     }},
    {"min_tokens",
     [](std::string_view key, dom::element e, JsonValueStyle style, GenSamplingParams* p) {
       return ReadInt(key, e, style, 0, std::numeric_limits<int64_t>::max(), "an integer >= 0",
                      &p->min_tokens);
     }},
    {"n",
     [](std::string_view key, dom::element e, JsonValueStyle style, GenSamplingParams* p) {
       int64_t v = 0;
       KILN_RETURN_IF_ERROR(ReadInt(key, e, style, 1, kMaxChoices,
                                    fmt::format("an integer between 1 and {}", kMaxChoices), &v));
       p->n = static_cast<int32_t>(v);
       return Status::OK();
     }},
    {"seed", ReadSeed},
    {"stop", ReadStop},
    {"stop_token_ids", ReadStopTokenIds},
    {"logit_bias", ReadLogitBias},
    {"ignore_eos", [](std::string_view key, dom::element e, JsonValueStyle style,
                      GenSamplingParams* p) { return ReadBool(key, e, style, &p->ignore_eos); }},
    {"skip_special_tokens",
     [](std::string_view key, dom::element e, JsonValueStyle style, GenSamplingParams* p) {
       return ReadBool(key, e, style, &p->skip_special_tokens);
     }},
};

Status ParseError(simdjson::error_code error, std::string_view what) {
  switch (error) {
    case simdjson::DEPTH_ERROR:
      return Status::InvalidArgument(
          fmt::format("malformed JSON {}: nesting deeper than {} levels", what, kMaxJsonDepth));
    case simdjson::MEMALLOC:
    case simdjson::CAPACITY:
      return Status::ResourceExhausted(fmt::format("cannot allocate memory to parse the {}", what));
    default:
      return Status::InvalidArgument(
          fmt::format("malformed JSON {}: {}", what, simdjson::error_message(error)));
  }
}

Status ParseJsonObject(dom::parser& parser, std::string_view body, std::string_view what,
                       dom::element* root) {
  const bool blank = std::all_of(body.begin(), body.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  });
  if (blank)
    return Status::InvalidArgument(fmt::format("{} is empty; expected a JSON object", what));
  if (parser.allocate(body.size(), kMaxJsonDepth) != simdjson::SUCCESS) {
    return Status::ResourceExhausted(fmt::format("cannot allocate memory to parse the {}", what));
  }
  if (const auto error = parser.parse(body.data(), body.size(), true).get(*root);
      error != simdjson::SUCCESS) {
    return ParseError(error, what);
  }
  if (root->type() != ElementType::OBJECT) {
    return Status::InvalidArgument(
        fmt::format("{} must be a JSON object, got {}", what, JsonTypeName(root->type())));
  }
  return Status::OK();
}

// ---- OpenAI requests ----

// Writes `e` as JSON. Depth is bounded by the parser (kMaxJsonDepth).
void WriteElement(dom::element e, JsonWriter* w) {
  switch (e.type()) {
    case ElementType::ARRAY: {
      w->BeginArray();
      dom::array a;
      if (e.get_array().get(a) == simdjson::SUCCESS) {
        for (dom::element child : a) WriteElement(child, w);
      }
      w->EndArray();
      break;
    }
    case ElementType::OBJECT: {
      w->BeginObject();
      dom::object o;
      if (e.get_object().get(o) == simdjson::SUCCESS) {
        for (dom::key_value_pair kv : o) {
          w->Key(kv.key);
          WriteElement(kv.value, w);
        }
      }
      w->EndObject();
      break;
    }
    case ElementType::INT64:
      w->Int(AsInt64(e));
      break;
    case ElementType::UINT64:
      w->Uint(AsUint64(e));
      break;
    case ElementType::DOUBLE:
      w->Double(AsDouble(e));
      break;
    case ElementType::STRING:
      w->String(AsString(e));
      break;
    case ElementType::BOOL: {
      bool b = false;
      if (e.get_bool().get(b) != simdjson::SUCCESS) b = false;
      w->Bool(b);
      break;
    }
    case ElementType::NULL_VALUE:
      w->Null();
      break;
  }
}

// obj[member], which must be a string; *param and the message name "<where>.<member>".
Status RequiredString(dom::object obj, std::string_view where, std::string_view member,
                      std::string* param, std::string_view* out) {
  const std::string key = fmt::format("{}.{}", where, member);
  dom::element e;
  if (obj.at_key(member).get(e) != simdjson::SUCCESS) {
    *param = key;
    return Status::InvalidArgument(fmt::format("'{}' is required", key));
  }
  if (e.get_string().get(*out) != simdjson::SUCCESS) {
    *param = key;
    return MustBe(key, "a string", e);
  }
  return Status::OK();
}

// A message's content as one string (parts joined by "\n"), or nullopt for null.
Result<std::optional<std::string>> NormalizeContent(dom::element content, std::string_view where,
                                                    std::string* param) {
  const std::string key = fmt::format("{}.content", where);
  if (content.type() == ElementType::STRING) return std::optional<std::string>(AsString(content));
  dom::array parts;
  if (content.get_array().get(parts) != simdjson::SUCCESS) {
    *param = key;
    return MustBe(key, "a string or an array of text parts", content);
  }
  std::string joined;
  size_t i = 0;
  for (dom::element part : parts) {
    const std::string part_key = fmt::format("{}[{}]", key, i);
    dom::object obj;
    if (part.get_object().get(obj) != simdjson::SUCCESS) {
      *param = part_key;
      return MustBe(part_key, "an object", part);
    }
    std::string_view type;
    KILN_RETURN_IF_ERROR(RequiredString(obj, part_key, "type", param, &type));
    if (type != "text") {
      *param = part_key + ".type";
      return Status::InvalidArgument(
          fmt::format("'{}' has type \"{}\": only \"text\" content parts are supported", part_key,
                      type.substr(0, 32)));
    }
    std::string_view text;
    KILN_RETURN_IF_ERROR(RequiredString(obj, part_key, "text", param, &text));
    if (i > 0) joined.push_back('\n');
    joined.append(text);
    ++i;
  }
  return std::optional<std::string>(std::move(joined));
}

// Validates `messages` and writes the normalized array (see openai_json.h) to *out.
Status ParseMessages(dom::element messages, std::string* out, std::string* param) {
  dom::array array;
  if (messages.get_array().get(array) != simdjson::SUCCESS) {
    *param = "messages";
    return MustBe("messages", "a non-empty array of messages", messages);
  }
  if (array.size() == 0) {
    *param = "messages";
    return Status::InvalidArgument("'messages' must be a non-empty array of messages, got []");
  }
  out->clear();
  JsonWriter w(out);
  w.BeginArray();
  size_t i = 0;
  for (dom::element message : array) {
    const std::string where = fmt::format("messages[{}]", i);
    dom::object obj;
    if (message.get_object().get(obj) != simdjson::SUCCESS) {
      *param = where;
      return MustBe(where, "an object", message);
    }
    // Members in order; a repeated key's last value wins (as for the request's own keys).
    std::vector<dom::key_value_pair> members;
    std::unordered_map<std::string_view, size_t> last;
    for (dom::key_value_pair kv : obj) {
      last[kv.key] = members.size();
      members.push_back(kv);
    }
    const auto find = [&](std::string_view key) -> const dom::key_value_pair* {
      auto it = last.find(key);
      return it == last.end() ? nullptr : &members[it->second];
    };
    const dom::key_value_pair* role_kv = find("role");
    if (role_kv == nullptr) {
      *param = where + ".role";
      return Status::InvalidArgument(fmt::format("'{}.role' is required", where));
    }
    std::string_view role;
    if (role_kv->value.get_string().get(role) != simdjson::SUCCESS || role.empty()) {
      *param = where + ".role";
      return MustBe(where + ".role", "a non-empty string", role_kv->value);
    }
    const dom::key_value_pair* content_kv = find("content");
    std::optional<std::string> content;
    if (content_kv == nullptr || IsNull(content_kv->value)) {
      if (role != "assistant") {
        *param = where + ".content";
        return Status::InvalidArgument(fmt::format(
            "'{}.content' is required for role \"{}\" (only an assistant message may have none)",
            where, role.substr(0, 32)));
      }
    } else {
      KILN_ASSIGN_OR_RETURN(content, NormalizeContent(content_kv->value, where, param));
    }
    w.BeginObject();
    for (size_t m = 0; m < members.size(); ++m) {
      if (last[members[m].key] != m) continue;
      w.Key(members[m].key);
      if (&members[m] == content_kv) {
        if (content) {
          w.String(*content);
        } else {
          w.Null();
        }
      } else {
        WriteElement(members[m].value, &w);
      }
    }
    w.EndObject();
    ++i;
  }
  w.EndArray();
  return Status::OK();
}

Status ParseTokenArray(dom::array array, std::string_view key, std::vector<int32_t>* out) {
  out->clear();
  for (dom::element t : array) {
    int32_t id = 0;
    KILN_RETURN_IF_ERROR(ReadTokenId(fmt::format("'{}' element {}", key, out->size()), t,
                                     JsonValueStyle::kStrict, &id));
    out->push_back(id);
  }
  return Status::OK();
}

Status ParsePrompt(dom::element e, GenerateRequest* req) {
  constexpr std::string_view kWhat = "a string, an array of one string, or an array of token ids";
  const auto set_text = [req](std::string_view text) {
    if (text.empty()) return Status::InvalidArgument("'prompt' must not be empty");
    req->prompt.assign(text);
    req->prompt_tokens.clear();
    return Status::OK();
  };
  if (e.type() == ElementType::STRING) return set_text(AsString(e));
  dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) return MustBe("prompt", kWhat, e);
  const size_t n = array.size();
  if (n == 0) return Status::InvalidArgument("'prompt' must not be empty");
  dom::element first;
  if (array.at(0).get(first) != simdjson::SUCCESS) return MustBe("prompt", kWhat, e);
  const bool nested = first.type() == ElementType::STRING || first.type() == ElementType::ARRAY;
  if (nested && n > 1) {
    return Status::InvalidArgument(fmt::format(
        "batched prompts are not supported: 'prompt' is an array of {} prompts; send one per "
        "request",
        n));
  }
  if (first.type() == ElementType::STRING) return set_text(AsString(first));
  dom::array tokens = array;
  std::string_view key = "prompt";
  if (first.type() == ElementType::ARRAY) {
    if (first.get_array().get(tokens) != simdjson::SUCCESS) return MustBe("prompt", kWhat, e);
    key = "prompt[0]";
    if (tokens.size() == 0) return Status::InvalidArgument("'prompt' must not be empty");
  }
  KILN_RETURN_IF_ERROR(ParseTokenArray(tokens, key, &req->prompt_tokens));
  req->prompt.clear();
  return Status::OK();
}

// Fields read in any order and resolved once every key is seen.
struct Pending {
  bool has_prompt = false;
  bool has_messages = false;
  bool has_stream_options = false;
  bool include_usage = false;
  std::optional<int64_t> max_completion_tokens;
  std::optional<int64_t> best_of;
  std::optional<int64_t> completion_logprobs;  // completions
  bool chat_logprobs = false;                  // chat
  std::optional<int64_t> top_logprobs;         // chat
};

// One key of the request object (not null). Sets *param for nested fields; the caller names
// the key itself otherwise.
Status ParseOpenAiKey(OpenAiApi api, std::string_view key, dom::element value, OpenAiRequest* out,
                      Pending* pending, std::string* param) {
  constexpr JsonValueStyle kStrict = JsonValueStyle::kStrict;
  const bool chat = api == OpenAiApi::kChat;
  GenerateRequest& req = out->request;
  if (key == "model") return ReadString(key, value, &out->model);
  if (key == "stream") return ReadBool(key, value, kStrict, &out->stream);
  if (key == "stream_options") {
    dom::object options;
    if (value.get_object().get(options) != simdjson::SUCCESS) {
      return MustBe(key, "an object", value);
    }
    pending->has_stream_options = true;
    dom::element include;
    if (options.at_key("include_usage").get(include) == simdjson::SUCCESS && !IsNull(include)) {
      *param = "stream_options.include_usage";
      KILN_RETURN_IF_ERROR(ReadBool(*param, include, kStrict, &pending->include_usage));
      param->clear();
    }
    return Status::OK();
  }
  if (key == "user") return ReadString(key, value, &out->user);
  if (key == "priority") return ParseUintField(key, value, kStrict, &req.priority);
  if (key == "response_format") {
    dom::object format;
    dom::element type_el;
    std::string_view type;
    if (value.get_object().get(format) != simdjson::SUCCESS ||
        format.at_key("type").get(type_el) != simdjson::SUCCESS ||
        type_el.get_string().get(type) != simdjson::SUCCESS) {
      return MustBe(key, "an object with a string 'type'", value);
    }
    if (type != "text") {
      return Status::InvalidArgument(fmt::format(
          "'response_format' type \"{}\" is not supported; only \"text\" is", type.substr(0, 32)));
    }
    return Status::OK();
  }
  if (key == "best_of") {
    int64_t v = 0;
    KILN_RETURN_IF_ERROR(ReadInt(key, value, kStrict, 1, std::numeric_limits<int64_t>::max(),
                                 "an integer >= 1", &v));
    pending->best_of = v;
    return Status::OK();
  }
  if (key == "max_completion_tokens") {
    int64_t v = 0;
    KILN_RETURN_IF_ERROR(ReadInt(key, value, kStrict, 1, std::numeric_limits<int64_t>::max(),
                                 "an integer >= 1", &v));
    pending->max_completion_tokens = v;
    return Status::OK();
  }
  if (!chat) {
    if (key == "prompt") {
      pending->has_prompt = true;
      return ParsePrompt(value, &req);
    }
    if (key == "echo") return ReadBool(key, value, kStrict, &out->echo);
    if (key == "logprobs") {
      int64_t v = 0;
      KILN_RETURN_IF_ERROR(
          ReadInt(key, value, kStrict, 0, kMaxCompletionLogprobs,
                  fmt::format("an integer between 0 and {}", kMaxCompletionLogprobs), &v));
      pending->completion_logprobs = v;
      return Status::OK();
    }
    if (key == "suffix") {
      std::string suffix;
      KILN_RETURN_IF_ERROR(ReadString(key, value, &suffix));
      if (!suffix.empty()) {
        return Status::InvalidArgument("'suffix' is not supported (no fill-in-the-middle)");
      }
      return Status::OK();
    }
  } else {
    if (key == "messages") {
      pending->has_messages = true;
      return ParseMessages(value, &req.messages_json, param);
    }
    if (key == "logprobs") return ReadBool(key, value, kStrict, &pending->chat_logprobs);
    if (key == "top_logprobs") {
      int64_t v = 0;
      KILN_RETURN_IF_ERROR(ReadInt(key, value, kStrict, 0, kMaxTopLogprobs,
                                   fmt::format("an integer between 0 and {}", kMaxTopLogprobs),
                                   &v));
      pending->top_logprobs = v;
      return Status::OK();
    }
    if (key == "add_generation_prompt") {
      return ReadBool(key, value, kStrict, &req.add_generation_prompt);
    }
  }
  KILN_ASSIGN_OR_RETURN(bool known, ParseSamplingField(key, value, kStrict, &req.sampling));
  (void)known;  // unknown keys are ignored
  return Status::OK();
}

Status Resolve(OpenAiApi api, const Pending& pending, OpenAiRequest* out, std::string* param) {
  GenSamplingParams& sampling = out->request.sampling;
  const auto fail = [param](std::string_view field, std::string message) {
    *param = field;
    return Status::InvalidArgument(std::move(message));
  };
  if (api == OpenAiApi::kCompletions && !pending.has_prompt) {
    return fail("prompt", "'prompt' is required");
  }
  if (api == OpenAiApi::kChat && !pending.has_messages) {
    return fail("messages", "'messages' is required");
  }
  if (pending.max_completion_tokens) sampling.max_tokens = *pending.max_completion_tokens;
  if (pending.best_of && *pending.best_of != sampling.n) {
    return fail("best_of",
                fmt::format("'best_of' must equal 'n' ({}): kiln does not sample extra choices "
                            "to choose from, got {}",
                            sampling.n, *pending.best_of));
  }
  if (pending.has_stream_options && !out->stream) {
    return fail("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  out->include_usage = out->stream && pending.include_usage;
  if (api == OpenAiApi::kCompletions) {
    sampling.logprobs = static_cast<int32_t>(pending.completion_logprobs.value_or(-1));
    if (out->echo && !out->request.prompt_tokens.empty()) {
      return fail("echo", "'echo' needs a text prompt; a prompt of token ids has no text to echo");
    }
    if (out->echo && sampling.logprobs >= 0) {
      return fail("echo",
                  "'echo' with 'logprobs' is not supported (prompt logprobs are not computed)");
    }
  } else {
    const int64_t top = pending.top_logprobs.value_or(0);
    if (top > 0 && !pending.chat_logprobs) {
      return fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
    sampling.logprobs = pending.chat_logprobs ? static_cast<int32_t>(top) : -1;
  }
  out->logprobs = sampling.logprobs;
  return CheckSamplingParams(sampling, param);
}

Result<OpenAiRequest> ParseOpenAiRequest(std::string_view body, OpenAiApi api,
                                         std::string* error_param) {
  std::string unused;
  std::string* param = error_param != nullptr ? error_param : &unused;
  param->clear();
  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJsonRequestBody(parser, body, &root));
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Status::Internal("parsed request body is not an object");
  }
  OpenAiRequest out;
  Pending pending;
  for (dom::key_value_pair kv : obj) {
    if (IsNull(kv.value)) continue;  // null: absent
    Status s = ParseOpenAiKey(api, kv.key, kv.value, &out, &pending, param);
    if (!s.ok()) {
      if (param->empty()) param->assign(kv.key);
      return s;
    }
  }
  KILN_RETURN_IF_ERROR(Resolve(api, pending, &out, param));
  return out;
}

// ---- Response documents ----

float ClampLogprob(float lp) { return lp >= -9999.0f ? lp : -9999.0f; }  // NaN too

// UTF-8 code points that start in `bytes` (bytes that are not continuation bytes).
int64_t CodePoints(std::string_view bytes) {
  return std::count_if(bytes.begin(), bytes.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

void WriteHeader(JsonWriter& w, const OpenAiResponseHeader& h, std::string_view object) {
  w.KeyString("id", h.id);
  w.KeyString("object", object);
  w.KeyInt("created", h.created);
  w.KeyString("model", h.model);
}

void WriteUsage(JsonWriter& w, const GenUsage& u) {
  w.Key("usage");
  w.BeginObject();
  w.KeyInt("prompt_tokens", u.prompt_tokens);
  w.KeyInt("completion_tokens", u.completion_tokens);
  w.KeyInt("total_tokens", u.prompt_tokens + u.completion_tokens);
  w.Key("prompt_tokens_details");
  w.BeginObject();
  w.KeyInt("cached_tokens", u.cached_prompt_tokens);
  w.EndObject();
  w.EndObject();
}

void WriteFinishReason(JsonWriter& w, const std::optional<FinishReason>& reason,
                       std::string_view stop_reason) {
  w.Key("finish_reason");
  if (reason) {
    w.String(FinishReasonName(*reason));
  } else {
    w.Null();
  }
  if (!stop_reason.empty()) w.KeyString("stop_reason", stop_reason);
}

void WriteCompletionLogprobs(JsonWriter& w, std::span<const GenTokenLogprob> logprobs,
                             int64_t* text_offset) {
  w.BeginObject();
  w.Key("tokens");
  w.BeginArray();
  for (const GenTokenLogprob& t : logprobs) w.String(t.text);
  w.EndArray();
  w.Key("token_logprobs");
  w.BeginArray();
  for (const GenTokenLogprob& t : logprobs) w.Float(ClampLogprob(t.logprob));
  w.EndArray();
  w.Key("top_logprobs");
  w.BeginArray();
  for (const GenTokenLogprob& t : logprobs) {
    w.BeginObject();
    for (const GenTopLogprob& top : t.top) {
      w.Key(top.text);
      w.Float(ClampLogprob(top.logprob));
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("text_offset");
  w.BeginArray();
  for (const GenTokenLogprob& t : logprobs) {
    w.Int(*text_offset);
    *text_offset += CodePoints(t.text);
  }
  w.EndArray();
  w.EndObject();
}

void WriteBytes(JsonWriter& w, std::string_view text) {
  w.Key("bytes");
  w.BeginArray();
  for (char c : text) w.Int(static_cast<unsigned char>(c));
  w.EndArray();
}

void WriteChatLogprobs(JsonWriter& w, std::span<const GenTokenLogprob> logprobs) {
  w.BeginObject();
  w.Key("content");
  w.BeginArray();
  for (const GenTokenLogprob& t : logprobs) {
    w.BeginObject();
    w.KeyString("token", t.text);
    w.Key("logprob");
    w.Float(ClampLogprob(t.logprob));
    WriteBytes(w, t.text);
    w.Key("top_logprobs");
    w.BeginArray();
    for (const GenTopLogprob& top : t.top) {
      w.BeginObject();
      w.KeyString("token", top.text);
      w.Key("logprob");
      w.Float(ClampLogprob(top.logprob));
      WriteBytes(w, top.text);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string ResponseJson(OpenAiApi api, const OpenAiResponseHeader& header,
                         std::span<const OpenAiChoice> choices, const GenUsage& usage) {
  const bool chat = api == OpenAiApi::kChat;
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  WriteHeader(w, header, chat ? "chat.completion" : "text_completion");
  w.Key("choices");
  w.BeginArray();
  for (const OpenAiChoice& c : choices) {
    w.BeginObject();
    w.KeyInt("index", c.index);
    if (chat) {
      w.Key("message");
      w.BeginObject();
      w.KeyString("role", "assistant");
      w.KeyString("content", c.text);
      w.EndObject();
    } else {
      w.KeyString("text", c.text);
    }
    w.Key("logprobs");
    if (!c.has_logprobs) {
      w.Null();
    } else if (chat) {
      WriteChatLogprobs(w, c.logprobs);
    } else {
      int64_t offset = 0;
      WriteCompletionLogprobs(w, c.logprobs, &offset);
    }
    WriteFinishReason(w, c.finish_reason, c.stop_reason);
    w.EndObject();
  }
  w.EndArray();
  WriteUsage(w, usage);
  w.EndObject();
  return out;
}

}  // namespace

// ---- Shared validators ----

Status ParseJsonRequestBody(dom::parser& parser, std::string_view body, dom::element* root,
                            std::string_view what) {
  return ParseJsonObject(parser, body, what, root);
}

Result<bool> ParseSamplingField(std::string_view key, const dom::element& value,
                                JsonValueStyle style, GenSamplingParams* params) {
  for (const FloatField& f : kFloatFields) {
    if (f.key != key) continue;
    if (!IsNull(value)) KILN_RETURN_IF_ERROR(ReadFloat(f, value, style, params));
    return true;
  }
  for (const SamplingField& f : kSamplingFields) {
    if (f.key != key) continue;
    if (!IsNull(value)) KILN_RETURN_IF_ERROR(f.parse(key, value, style, params));
    return true;
  }
  return false;
}

Status CheckSamplingParams(const GenSamplingParams& params, std::string* error_param) {
  if (params.max_tokens >= 0 && params.min_tokens > params.max_tokens) {
    if (error_param != nullptr) *error_param = "min_tokens";
    return Status::InvalidArgument(
        fmt::format("'min_tokens' ({}) must not exceed 'max_tokens' ({})", params.min_tokens,
                    params.max_tokens));
  }
  return Status::OK();
}

std::string DescribeJsonValue(const dom::element& value) { return Describe(value); }

Status ParseBoolField(std::string_view key, const dom::element& value, JsonValueStyle style,
                      bool* out) {
  if (IsNull(value)) return Status::OK();
  return ReadBool(key, value, style, out);
}

Status ParseUintField(std::string_view key, const dom::element& value, JsonValueStyle style,
                      uint64_t* out) {
  if (IsNull(value)) return Status::OK();
  if (value.type() == ElementType::UINT64) {
    *out = AsUint64(value);
    return Status::OK();
  }
  int64_t v = 0;
  if (GetInt64(value, style, &v) && v >= 0) {
    *out = static_cast<uint64_t>(v);
    return Status::OK();
  }
  uint64_t u = 0;
  if (style == JsonValueStyle::kLenient && value.type() == ElementType::STRING &&
      FromChars(AsString(value), &u)) {
    *out = u;
    return Status::OK();
  }
  return MustBe(key, "a non-negative integer", value);
}

// ---- Requests ----

Result<OpenAiRequest> ParseCompletionRequest(std::string_view body, std::string* error_param) {
  return ParseOpenAiRequest(body, OpenAiApi::kCompletions, error_param);
}

Result<OpenAiRequest> ParseChatCompletionRequest(std::string_view body, std::string* error_param) {
  return ParseOpenAiRequest(body, OpenAiApi::kChat, error_param);
}

// ---- Responses ----

std::string CompletionResponseJson(const OpenAiResponseHeader& header,
                                   std::span<const OpenAiChoice> choices, const GenUsage& usage) {
  return ResponseJson(OpenAiApi::kCompletions, header, choices, usage);
}

std::string ChatCompletionResponseJson(const OpenAiResponseHeader& header,
                                       std::span<const OpenAiChoice> choices,
                                       const GenUsage& usage) {
  return ResponseJson(OpenAiApi::kChat, header, choices, usage);
}

std::string CompletionChunkJson(const OpenAiResponseHeader& header, const GenChunk& chunk,
                                int64_t* text_offset) {
  int64_t offset = text_offset != nullptr ? *text_offset : 0;
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  WriteHeader(w, header, "text_completion");
  w.Key("choices");
  w.BeginArray();
  w.BeginObject();
  w.KeyInt("index", chunk.index);
  w.KeyString("text", chunk.text);
  w.Key("logprobs");
  if (chunk.logprobs.empty()) {
    w.Null();
  } else {
    WriteCompletionLogprobs(w, chunk.logprobs, &offset);
  }
  WriteFinishReason(w, chunk.finish_reason, chunk.stop_reason);
  w.EndObject();
  w.EndArray();
  if (header.include_usage) {
    w.Key("usage");
    w.Null();
  }
  w.EndObject();
  if (text_offset != nullptr) *text_offset = offset;
  return out;
}

std::vector<std::string> ChatCompletionChunkJson(const OpenAiResponseHeader& header,
                                                 const GenChunk& chunk, bool first_of_choice) {
  std::vector<std::string> out;
  const auto chunk_json = [&](auto&& write_choice) {
    std::string json;
    JsonWriter w(&json);
    w.BeginObject();
    WriteHeader(w, header, "chat.completion.chunk");
    w.Key("choices");
    w.BeginArray();
    w.BeginObject();
    w.KeyInt("index", chunk.index);
    write_choice(w);
    w.EndObject();
    w.EndArray();
    if (header.include_usage) {
      w.Key("usage");
      w.Null();
    }
    w.EndObject();
    out.push_back(std::move(json));
  };
  if (first_of_choice || !chunk.text.empty() || !chunk.logprobs.empty()) {
    chunk_json([&](JsonWriter& w) {
      w.Key("delta");
      w.BeginObject();
      if (first_of_choice) w.KeyString("role", "assistant");
      w.KeyString("content", chunk.text);
      w.EndObject();
      w.Key("logprobs");
      if (chunk.logprobs.empty()) {
        w.Null();
      } else {
        WriteChatLogprobs(w, chunk.logprobs);
      }
      WriteFinishReason(w, std::nullopt, {});
    });
  }
  if (chunk.finish_reason) {
    chunk_json([&](JsonWriter& w) {
      w.Key("delta");
      w.BeginObject();
      w.EndObject();
      w.Key("logprobs");
      w.Null();
      WriteFinishReason(w, chunk.finish_reason, chunk.stop_reason);
    });
  }
  return out;
}

std::string UsageChunkJson(const OpenAiResponseHeader& header, OpenAiApi api,
                           const GenUsage& usage) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  WriteHeader(w, header, api == OpenAiApi::kChat ? "chat.completion.chunk" : "text_completion");
  w.Key("choices");
  w.BeginArray();
  w.EndArray();
  WriteUsage(w, usage);
  w.EndObject();
  return out;
}

std::string SseEvent(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ");
  out.append(json);
  out.append("\n\n");
  return out;
}

std::string_view OpenAiErrorType(int http_status) {
  switch (http_status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 409:
      return "ConflictError";
    case 422:
      return "UnprocessableEntityError";
    case 429:
      return "RateLimitError";
    case 501:
      return "NotImplementedError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return http_status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

std::string OpenAiErrorJson(std::string_view message, std::string_view type, std::string_view param,
                            int code) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("error");
  w.BeginObject();
  w.KeyString("message", message);
  w.KeyString("type", type);
  w.Key("param");
  if (param.empty()) {
    w.Null();
  } else {
    w.String(param);
  }
  w.KeyInt("code", code);
  w.EndObject();
  w.EndObject();
  return out;
}

std::string OpenAiErrorJson(const Status& status, std::string_view param) {
  const int http = HttpStatusFor(status.code());
  return OpenAiErrorJson(status.message(), OpenAiErrorType(http), param, http);
}

namespace {
void WriteModel(JsonWriter& w, const OpenAiModelInfo& m) {
  w.BeginObject();
  w.KeyString("id", m.id);
  w.KeyString("object", "model");
  w.KeyInt("created", m.created);
  w.KeyString("owned_by", m.owned_by);
  w.EndObject();
}
}  // namespace

std::string ModelsListJson(std::span<const OpenAiModelInfo> models) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyString("object", "list");
  w.Key("data");
  w.BeginArray();
  for (const OpenAiModelInfo& m : models) WriteModel(w, m);
  w.EndArray();
  w.EndObject();
  return out;
}

std::string ModelJson(const OpenAiModelInfo& model) {
  std::string out;
  JsonWriter w(&out);
  WriteModel(w, model);
  return out;
}

}  // namespace kiln
