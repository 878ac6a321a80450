// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as an ONNX model file. Import (parse, check, shape
// inference, IR build) and, when that succeeds, session creation (kernel selection and
// construction) must return a Status, never crash. Run with `make fuzz`.

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "graph/onnx/importer.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::Result<std::shared_ptr<kiln::Graph>> graph =
      kiln::ImportOnnxModelFromString(bytes, "fuzz-input");
  if (!graph.ok()) return 0;
  kiln::Result<std::unique_ptr<kiln::Session>> session = kiln::Session::Create(*graph);
  (void)session;
  return 0;
}
