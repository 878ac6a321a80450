// SPDX-License-Identifier: Apache-2.0
#pragma once
// JSON of the model repository extension (KSERVE-V2.md 1.7): the bodies of
// POST /v2/repository/index, .../models/{m}/load and .../unload, and the index answer. Pure
// functions, unit- and mutation-tested without a server.
//
//   KILN_ASSIGN_OR_RETURN(bool ready_only, ParseRepositoryIndexRequest(body));
//   std::string json = RepositoryIndexJson(manager->Index(), ready_only);
//   KILN_ASSIGN_OR_RETURN(ModelLoadOptions load, ParseRepositoryLoadRequest(body));
//   KILN_ASSIGN_OR_RETURN(ModelUnloadOptions unload, ParseRepositoryUnloadRequest(body));
//
// Request rules: an empty (or all-whitespace) body is the same as {} (the Python client posts
// ""); otherwise the body must be a JSON object; unknown keys are ignored. Index: "ready" must
// be a boolean. Load: "parameters" must be an object; its "config" must be a string (the JSON
// text of a model configuration); each "file:<path>" parameter must be a string holding the
// base64 of a model file (ModelLoadOptions::files; the manager checks the paths and requires
// "config" with them); other parameters are ignored. Unload: "parameters" must be an
// object and its "unload_dependents", when present, a boolean
// (ModelUnloadOptions::unload_dependents: also unload the composing models an ensemble was
// loaded with; false when absent); other parameters are ignored. Errors are INVALID_ARGUMENT
// naming the key (UNIMPLEMENTED as above); documents nested deeper than kMaxJsonDepth are
// rejected.
//
// Thread safety: stateless functions; call from any thread.

#include <span>
#include <string>

#include "base/result.h"
#include "repo/model_manager.h"

namespace kiln {

// The "ready" flag of an index request (false when absent).
Result<bool> ParseRepositoryIndexRequest(const std::string& body);

// The options of a load request.
Result<ModelLoadOptions> ParseRepositoryLoadRequest(const std::string& body);

// The options of an unload request.
Result<ModelUnloadOptions> ParseRepositoryUnloadRequest(const std::string& body);

// The index answer: a JSON array with one object per entry, in the given order:
// {"name", "version" (decimal string; omitted for version -1), "state" (omitted for a model
// never loaded: kUnknown with version -1), "reason" (omitted when empty)}. With `ready_only`,
// only READY entries.
std::string RepositoryIndexJson(std::span<const ModelIndexEntry> index, bool ready_only);

}  // namespace kiln
