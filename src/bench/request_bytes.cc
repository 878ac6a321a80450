// SPDX-License-Identifier: Apache-2.0
#include "bench/request_bytes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "bench/writers.h"

namespace kiln::bench {
namespace {

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// JSON array text of a tensor's raw bytes (flat, row-major).
std::string JsonData(const TensorData& t) {
  std::string out = "[";
  const std::string& dt = t.datatype;
  const char* p = t.raw.data();
  const char* end = p + t.raw.size();
  bool first = true;
  auto sep = [&] {
    if (!first) out += ',';
    first = false;
  };
  if (dt == "BYTES") {
    while (p + 4 <= end) {
      uint32_t n = Load<uint32_t>(p);
      p += 4;
      sep();
      out += JsonQuote(std::string_view(p, n));
      p += n;
    }
  } else {
    const int size = ElementSize(dt);
    for (; p + size <= end; p += size) {
      sep();
      if (dt == "FP32")
        out += fmt::format("{}", Load<float>(p));
      else if (dt == "FP64")
        out += fmt::format("{}", Load<double>(p));
      else if (dt == "INT8")
        out += fmt::format("{}", Load<int8_t>(p));
      else if (dt == "INT16")
        out += fmt::format("{}", Load<int16_t>(p));
      else if (dt == "INT32")
        out += fmt::format("{}", Load<int32_t>(p));
      else if (dt == "INT64")
        out += fmt::format("{}", Load<int64_t>(p));
      else if (dt == "UINT8")
        out += fmt::format("{}", Load<uint8_t>(p));
      else if (dt == "UINT16")
        out += fmt::format("{}", Load<uint16_t>(p));
      else if (dt == "UINT32")
        out += fmt::format("{}", Load<uint32_t>(p));
      else if (dt == "UINT64")
        out += fmt::format("{}", Load<uint64_t>(p));
      else if (dt == "BOOL")
        out += Load<uint8_t>(p) ? "true" : "false";
      else
        out += "0";  // FP16/BF16 cannot travel as JSON (the server answers 400)
    }
  }
  out += ']';
  return out;
}

}  // namespace

Result<RequestParameter> ParseRequestParameter(std::string_view spec) {
  const size_t first = spec.find(':');
  const size_t last = spec.rfind(':');
  if (first == std::string_view::npos || first == last || first == 0) {
    return Status::InvalidArgument(fmt::format(
        "--request-parameter '{}': expected name:value:type (type string, int, uint, bool or "
        "double)",
        spec));
  }
  RequestParameter p{std::string(spec.substr(0, first)),
                     std::string(spec.substr(first + 1, last - first - 1)),
                     std::string(spec.substr(last + 1))};
  const auto bad = [&](std::string_view what) {
    return Status::InvalidArgument(
        fmt::format("--request-parameter '{}': value '{}' is not {}", spec, p.value, what));
  };
  if (p.type == "string") return p;
  if (p.type == "bool") {
    if (p.value != "true" && p.value != "false") return bad("true or false");
    return p;
  }
  if (p.type == "int" || p.type == "uint" || p.type == "double") {
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    std::from_chars_result r;
    if (p.type == "int") {
      int64_t v;
      r = std::from_chars(begin, end, v);
    } else if (p.type == "uint") {
      uint64_t v;
      r = std::from_chars(begin, end, v);
    } else {
      double v = 0;
      r = std::from_chars(begin, end, v);
      if (!std::isfinite(v)) return bad("a finite double");
    }
    if (r.ec != std::errc() || r.ptr != end || p.value.empty()) return bad("a " + p.type);
    return p;
  }
  return Status::InvalidArgument(fmt::format(
      "--request-parameter '{}': type '{}' is not one of string, int, uint, bool, double", spec,
      p.type));
}

std::string InferPath(const std::string& model, const std::string& version) {
  return version.empty() ? fmt::format("/v2/models/{}/infer", model)
                         : fmt::format("/v2/models/{}/versions/{}/infer", model, version);
}

std::string InferJsonHeader(const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                            bool binary, const std::vector<RequestParameter>& parameters) {
  std::string out = "{\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorData& t = inputs[i];
    if (i > 0) out += ',';
    out += fmt::format("{{\"name\":{},\"shape\":[{}],\"datatype\":{},", JsonQuote(t.name),
                       fmt::join(t.shape, ","), JsonQuote(t.datatype));
    if (binary) {
      out += fmt::format("\"parameters\":{{\"binary_data_size\":{}}}}}", t.raw.size());
    } else {
      out += "\"data\":" + JsonData(t) + "}";
    }
  }
  out += ']';
  if (binary && !outputs.empty()) {
    out += ",\"outputs\":[";
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i > 0) out += ',';
      out += fmt::format("{{\"name\":{},\"parameters\":{{\"binary_data\":true}}}}",
                         JsonQuote(outputs[i].name));
    }
    out += ']';
  }
  if (!parameters.empty()) {
    out += ",\"parameters\":{";
    for (size_t i = 0; i < parameters.size(); ++i) {
      const RequestParameter& p = parameters[i];
      if (i > 0) out += ',';
      out += JsonQuote(p.name) + ':' + (p.type == "string" ? JsonQuote(p.value) : p.value);
    }
    out += '}';
  }
  out += '}';
  return out;
}

std::string HttpInferRequest(const std::string& host, const std::string& path,
                             const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                             bool binary, const std::vector<RequestParameter>& parameters) {
  std::string body = InferJsonHeader(inputs, outputs, binary, parameters);
  const size_t header_len = body.size();
  if (binary) {
    for (const TensorData& t : inputs) body += t.raw;
  }
  std::string req = fmt::format("POST {} HTTP/1.1\r\nHost: {}\r\n", path, host);
  if (binary) {
    req += fmt::format(
        "Content-Type: application/octet-stream\r\n"
        "Inference-Header-Content-Length: {}\r\n",
        header_len);
  } else {
    req += "Content-Type: application/json\r\n";
  }
  req += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  req += body;
  return req;
}

}  // namespace kiln::bench
