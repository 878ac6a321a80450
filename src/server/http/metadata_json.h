// SPDX-License-Identifier: Apache-2.0
#pragma once
// JSON bodies of the KServe v2 metadata endpoints: server metadata (KSERVE-V2.md 1.3) and model
// metadata (1.4). Pure functions of their arguments, so they are tested without a server.
//
// Thread safety: stateless functions; call from any thread.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "repo/model_manager.h"

namespace kiln {

// {"name":..., "version":..., "extensions":[...]}. List only extensions that are implemented.
std::string ServerMetadataJson(std::string_view name, std::string_view version,
                               std::span<const std::string_view> extensions);

// {"name", "versions" (decimal strings), "platform" (signature.platform, else backend),
//  "inputs", "outputs"}; tensor shapes are the config dims, prefixed with -1 when
// signature.max_batch_size > 0.
std::string ModelMetadataJson(std::string_view name, std::span<const int64_t> versions,
                              const ModelSignature& signature);

}  // namespace kiln
