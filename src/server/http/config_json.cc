// SPDX-License-Identifier: Apache-2.0
#include "server/http/config_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>

#include "server/json_writer.h"

namespace kiln {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

// Writes one value of `field` (element `index` of a repeated field, or -1 for a singular one).
void WriteValue(JsonWriter& w, const pb::Message& m, const FD* field, int index,
                bool int64_as_string);

void WriteMessage(JsonWriter& w, const pb::Message& m, bool int64_as_string) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  w.BeginObject();
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if (!f->is_repeated() &&
        (f->cpp_type() == FD::CPPTYPE_MESSAGE || f->real_containing_oneof() != nullptr) &&
        !r->HasField(m, f)) {
      continue;  // unset sub-message or oneof member
    }
    const bool as_string = int64_as_string || f->name() == "graph_spec";
    w.Key(f->name());
    if (f->is_map()) {
      const FD* key = f->message_type()->map_key();
      const FD* value = f->message_type()->map_value();
      w.BeginObject();
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const pb::Message& entry = r->GetRepeatedMessage(m, f, k);
        const pb::Reflection* er = entry.GetReflection();
        switch (key->cpp_type()) {
          case FD::CPPTYPE_STRING:
            w.Key(er->GetString(entry, key));
            break;
          case FD::CPPTYPE_INT32:
            w.Key(std::to_string(er->GetInt32(entry, key)));
            break;
          case FD::CPPTYPE_INT64:
            w.Key(std::to_string(er->GetInt64(entry, key)));
            break;
          case FD::CPPTYPE_UINT32:
            w.Key(std::to_string(er->GetUInt32(entry, key)));
            break;
          case FD::CPPTYPE_UINT64:
            w.Key(std::to_string(er->GetUInt64(entry, key)));
            break;
          case FD::CPPTYPE_BOOL:
            w.Key(er->GetBool(entry, key) ? "true" : "false");
            break;
          default:
            w.Key("");
            break;  // protobuf allows no other key types
        }
        WriteValue(w, entry, value, -1, as_string);
      }
      w.EndObject();
    } else if (f->is_repeated()) {
      w.BeginArray();
      for (int k = 0; k < r->FieldSize(m, f); ++k) WriteValue(w, m, f, k, as_string);
      w.EndArray();
    } else {
      WriteValue(w, m, f, -1, as_string);
    }
  }
  w.EndObject();
}

void WriteValue(JsonWriter& w, const pb::Message& m, const FD* f, int index, bool int64_as_string) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      w.Int(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      return;
    case FD::CPPTYPE_UINT32:
      w.Uint(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      return;
    case FD::CPPTYPE_INT64: {
      const int64_t v = rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
      int64_as_string ? w.String(std::to_string(v)) : w.Int(v);
      return;
    }
    case FD::CPPTYPE_UINT64: {
      const uint64_t v = rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
      int64_as_string ? w.String(std::to_string(v)) : w.Uint(v);
      return;
    }
    case FD::CPPTYPE_DOUBLE:
      w.Double(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      return;
    case FD::CPPTYPE_FLOAT:
      w.Float(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      return;
    case FD::CPPTYPE_BOOL:
      w.Bool(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
      return;
    case FD::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* e = rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f);
      w.String(e->name());
      return;
    }
    case FD::CPPTYPE_STRING: {
      std::string scratch;
      w.String(rep ? r->GetRepeatedStringReference(m, f, index, &scratch)
                   : r->GetStringReference(m, f, &scratch));
      return;
    }
    case FD::CPPTYPE_MESSAGE:
      WriteMessage(w, rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f),
                   int64_as_string);
      return;
  }
}

}  // namespace

std::string ModelConfigJson(const pb::Message& config) {
  std::string out;
  JsonWriter w(&out);
  WriteMessage(w, config, /*int64_as_string=*/false);
  return out;
}

}  // namespace kiln
