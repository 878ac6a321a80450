// SPDX-License-Identifier: Apache-2.0
#include "llm/prompt.h"

#include <string>

#include "llm/chat_template.h"
#include "llm/model.h"
#include "llm/tokenizer.h"

namespace kiln::llm {

Result<std::vector<int32_t>> ChatPromptIds(const Model& model, const ChatTemplate& tmpl,
                                           std::string_view messages_json,
                                           bool add_generation_prompt) {
  const Tokenizer& tok = model.tokenizer();
  ChatRenderOptions render;
  render.add_generation_prompt = add_generation_prompt;
  const std::string bos = tok.bos_id() >= 0 ? std::string(tok.Piece(tok.bos_id())) : "";
  render.bos_token = bos;
  render.eos_token = tok.eos_id() >= 0 ? std::string(tok.Piece(tok.eos_id())) : "";
  KILN_ASSIGN_OR_RETURN(std::string text, tmpl.RenderJson(messages_json, render));
  // The template writes the BOS text itself when the model wants one; add it only when not.
  const bool has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
  return tok.Encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace kiln::llm
