// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as the body of POST /v2/repository/index, .../load and
// .../unload. Each parser must return a value or an error Status, never crash. Run with
// `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/http/repository_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  (void)kiln::ParseRepositoryIndexRequest(body);
  (void)kiln::ParseRepositoryLoadRequest(body);
  (void)kiln::ParseRepositoryUnloadRequest(body);
  return 0;
}
