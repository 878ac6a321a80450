# SPDX-License-Identifier: Apache-2.0
# The Jinja2 subset that renders models' chat templates (value model and
# JSON, lexer and parser, evaluator) behind ChatTemplate. Included by src/llm/CMakeLists.txt.
add_library(kiln_llm_chat_template STATIC)
target_sources(kiln_llm_chat_template PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/chat_template.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jinja_value.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jinja_parser.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jinja_eval.cc)
target_link_libraries(kiln_llm_chat_template PUBLIC kiln_base PRIVATE kiln_text)

# Renders the real templates of tests/llm/templates/ and the language cases with kiln and with
# Debian's python3-jinja2 (tests/llm/render_templates.py, run by the test itself) and compares
# them byte for byte; the Python cases skip where python3-jinja2 is missing.
kiln_test(llm_chat_template_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/chat_template_test.cc
  LIBS kiln_llm_chat_template)
if(TARGET llm_chat_template_test)
  target_compile_definitions(llm_chat_template_test PRIVATE
    KILN_PYTHON="${KILN_PYTHON}"
    KILN_RENDER_TEMPLATES_PY="${CMAKE_SOURCE_DIR}/tests/llm/render_templates.py"
    KILN_CHAT_TEMPLATES_DIR="${CMAKE_SOURCE_DIR}/tests/llm/templates")
endif()
