// SPDX-License-Identifier: Apache-2.0
#include "repo/builtin_models.h"

#include "base/check.h"
#include "repo/image_model.h"

namespace kiln {

bool IsBuiltinModelConfig(const inference::ModelConfig& config) { return IsImageConfig(config); }

Result<std::shared_ptr<Graph>> BuildBuiltinModel(std::string_view name,
                                                 const std::filesystem::path& model_dir,
                                                 inference::ModelConfig* config) {
  (void)model_dir;
  if (IsImageConfig(*config)) return BuildImageModel(name, config);
  KILN_CHECK(false, "not a built-in backend");
  return Status::Internal("not a built-in backend");
}

}  // namespace kiln
