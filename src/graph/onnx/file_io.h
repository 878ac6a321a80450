// SPDX-License-Identifier: Apache-2.0
#pragma once
// Private to graph/onnx: whole-file reads and writes that report errors as Status naming the
// file, e.g. "cannot read model file 'm.onnx': No such file or directory".
//
// `kind` is the noun used in messages ("model file", "tensor file"). A missing file (ENOENT) is
// NOT_FOUND; every other failure (permissions, a directory, I/O errors) is INVALID_ARGUMENT.
//
// Thread safety: both functions may be called from any thread.

#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln::onnx_internal {

Result<std::string> ReadWholeFile(const std::string& path, std::string_view kind);

// Creates or truncates `path` and writes `bytes` to it.
Status WriteWholeFile(const std::string& path, std::string_view bytes, std::string_view kind);

}  // namespace kiln::onnx_internal
