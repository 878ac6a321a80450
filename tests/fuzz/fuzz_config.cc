// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a config.pbtxt. Parsing must return a config or an error
// Status naming the problem, never crash; so must the validation of a parsed config (ensemble
// step graphs included: cycles, tensors produced twice or never). Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "repo/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = kiln::ParseModelConfigText(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.pbtxt");
  if (config.ok()) (void)kiln::ValidateModelConfig(*config);
  return 0;
}
