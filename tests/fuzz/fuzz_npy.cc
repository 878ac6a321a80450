// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a .npy file. ReadNpy must return a tensor or an error
// Status, never crash; an accepted tensor must write back. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::Result<kiln::OwnedTensor> t =
      kiln::ReadNpy(std::string_view(reinterpret_cast<const char*>(data), size));
  if (t.ok()) (void)kiln::WriteNpy(t->view());
  return 0;
}
