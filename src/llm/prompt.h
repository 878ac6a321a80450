// SPDX-License-Identifier: Apache-2.0
#pragma once
// A chat conversation as the model's prompt tokens: the messages rendered with the model's chat
// template (Hugging Face's apply_chat_template) and tokenized with special tokens parsed, the
// way `kiln generate --messages` and the server's /v1/chat/completions both build it.
//
//   KILN_ASSIGN_OR_RETURN(auto tmpl, ChatTemplate::Parse(model.chat_template()));
//   KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
//                         ChatPromptIds(model, *tmpl, R"([{"role":"user","content":"Hi"}])",
//                                       /*add_generation_prompt=*/true));
//
// Thread safety: reentrant (the template and the model are read only).

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::llm {

class Model;
class ChatTemplate;

// The template gets the model's BOS and EOS texts as bos_token / eos_token. When the rendered
// text starts with the BOS text the template wrote it, so no second BOS is added; otherwise the
// tokenizer adds its special tokens as for a plain prompt. Errors: the template's (a message
// it refuses, invalid UTF-8), with the message unchanged.
Result<std::vector<int32_t>> ChatPromptIds(const Model& model, const ChatTemplate& tmpl,
                                           std::string_view messages_json,
                                           bool add_generation_prompt);

}  // namespace kiln::llm
