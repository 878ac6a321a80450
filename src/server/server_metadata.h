// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the server metadata (HTTP `GET /v2`, gRPC ServerMetadata) says about kiln: its name and
// the KServe extensions it serves, in the reference server's order. One list for every protocol,
// so the two answers agree; an extension is added here when every protocol serves it.

#include <array>
#include <string_view>

namespace kiln {

inline constexpr std::string_view kServerName = "kiln";
inline constexpr std::array<std::string_view, 6> kServerExtensions{
    "classification", "model_repository", "binary_tensor_data", "statistics", "trace", "logging"};

}  // namespace kiln
