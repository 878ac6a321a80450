// SPDX-License-Identifier: Apache-2.0
#include "op/attribute.h"

namespace kiln {

Attribute Attribute::Int(std::string name, int64_t value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInt;
  a.i = value;
  return a;
}

Attribute Attribute::Ints(std::string name, std::vector<int64_t> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInts;
  a.ints = std::move(values);
  return a;
}

Attribute Attribute::Float(std::string name, float value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloat;
  a.f = value;
  return a;
}

Attribute Attribute::Floats(std::string name, std::vector<float> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloats;
  a.floats = std::move(values);
  return a;
}

Attribute Attribute::String(std::string name, std::string value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kString;
  a.s = std::move(value);
  return a;
}

Attribute Attribute::Strings(std::string name, std::vector<std::string> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kStrings;
  a.strings = std::move(values);
  return a;
}

const Attribute* FindAttribute(std::span<const Attribute> attributes, std::string_view name) {
  for (const Attribute& a : attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

int64_t GetIntAttribute(std::span<const Attribute> attributes, std::string_view name,
                        int64_t default_value) {
  const Attribute* a = FindAttribute(attributes, name);
  return a && a->type == AttributeType::kInt ? a->i : default_value;
}

float GetFloatAttribute(std::span<const Attribute> attributes, std::string_view name,
                        float default_value) {
  const Attribute* a = FindAttribute(attributes, name);
  return a && a->type == AttributeType::kFloat ? a->f : default_value;
}

std::string GetStringAttribute(std::span<const Attribute> attributes, std::string_view name,
                               std::string_view default_value) {
  const Attribute* a = FindAttribute(attributes, name);
  return a && a->type == AttributeType::kString ? a->s : std::string(default_value);
}

std::vector<int64_t> GetIntsAttribute(std::span<const Attribute> attributes,
                                      std::string_view name) {
  const Attribute* a = FindAttribute(attributes, name);
  return a && a->type == AttributeType::kInts ? a->ints : std::vector<int64_t>{};
}

std::vector<float> GetFloatsAttribute(std::span<const Attribute> attributes,
                                      std::string_view name) {
  const Attribute* a = FindAttribute(attributes, name);
  return a && a->type == AttributeType::kFloats ? a->floats : std::vector<float>{};
}

}  // namespace kiln
