// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a GGUF file. GgufFile::Parse must return a file or an
// error Status, never crash; on an accepted file every metadata getter answers (a value or an
// error) and every tensor's bytes lie inside the input (ASan checks the first and last byte).
// Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <span>

#include "llm/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::llm::GgufFile::Parse(std::span<const uint8_t>(data, size));
  if (!file.ok()) return 0;
  const kiln::llm::GgufFile& f = **file;
  for (const kiln::llm::GgufValue& v : f.metadata()) {
    (void)v.ToString();
    (void)f.GetInt(v.key());
    (void)f.GetFloat(v.key());
    (void)f.GetBool(v.key());
    (void)f.GetString(v.key());
    (void)f.GetStringArray(v.key());
    (void)f.GetFloatArray(v.key());
    (void)f.GetIntArray(v.key());
    if (v.is_array() && v.size() > 0) {
      (void)v.IntAt(v.size() - 1);
      (void)v.FloatAt(v.size() - 1);
      (void)v.StringAt(v.size() - 1);
    }
  }
  volatile uint8_t sink = 0;
  for (const kiln::llm::GgufTensorInfo& t : f.tensors()) {
    if (f.FindTensor(t.name) != &t) __builtin_trap();
    (void)t.elements();
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  return 0;
}
