// SPDX-License-Identifier: Apache-2.0
#include "server/grpc/infer_grpc.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace {

using inference::ModelInferRequest;

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* r, const std::string& name,
                                              const std::string& dtype,
                                              std::initializer_list<int64_t> shape) {
  auto* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(dtype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

TEST(ParseModelVersion, AcceptsEmptyAndDecimal) {
  EXPECT_EQ(*ParseModelVersion(""), -1);
  EXPECT_EQ(*ParseModelVersion("3"), 3);
  EXPECT_FALSE(ParseModelVersion("-1").ok());
  EXPECT_FALSE(ParseModelVersion("+1").ok());
  EXPECT_FALSE(ParseModelVersion("1x").ok());
  EXPECT_FALSE(ParseModelVersion("99999999999999999999").ok());
}

TEST(DecodeModelInferRequest, TypedFp32AndParameters) {
  ModelInferRequest r;
  r.set_id("abc");
  auto* x = AddInput(&r, "x", "FP32", {2, 2})->mutable_contents();
  for (float v : {1.f, 2.f, 3.f, 4.f}) x->add_fp32_contents(v);
  (*r.mutable_parameters())["priority"].set_uint64_param(2);
  (*r.mutable_parameters())["timeout"].set_int64_param(500);
  r.add_outputs()->set_name("y");
  auto decoded = DecodeModelInferRequest(r);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const InferRequest& req = **decoded;
  EXPECT_EQ(req.id, "abc");
  EXPECT_EQ(req.priority, 2u);
  EXPECT_EQ(req.timeout_us, 500u);
  ASSERT_EQ(req.inputs.size(), 1u);
  EXPECT_EQ(req.inputs[0].tensor.num_elements(), 4);
  EXPECT_EQ(req.inputs[0].tensor.data<float>()[3], 4.f);
  ASSERT_EQ(req.outputs.size(), 1u);
  EXPECT_EQ(req.outputs[0].name, "y");
}

TEST(DecodeModelInferRequest, RawInt16AndBytes) {
  ModelInferRequest r;
  AddInput(&r, "a", "INT16", {3});
  AddInput(&r, "s", "BYTES", {2});
  const int16_t v[3] = {-1, 2, 300};
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
  r.add_raw_input_contents(std::string("\x02\0\0\0hi\0\0\0\0", 10));
  auto decoded = DecodeModelInferRequest(r);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ((*decoded)->inputs[0].tensor.data<int16_t>()[2], 300);
  EXPECT_EQ((*decoded)->inputs[1].tensor.data<std::string>()[0], "hi");
  EXPECT_EQ((*decoded)->inputs[1].tensor.data<std::string>()[1], "");
}

TEST(DecodeModelInferRequest, RejectsBadInput) {
  struct Case {
    const char* what;
    std::function<void(ModelInferRequest*)> build;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"bad dtype", [](auto* r) { AddInput(r, "x", "FLOAT", {1}); }, StatusCode::kInvalidArgument,
       "invalid datatype"},
      {"negative dim", [](auto* r) { AddInput(r, "x", "FP32", {-1}); },
       StatusCode::kInvalidArgument, "negative"},
      {"huge shape no data",
       [](auto* r) {
         AddInput(r, "x", "FP32", {1 << 30, 1 << 30, 1 << 30});
       },
       StatusCode::kInvalidArgument, "x"},
      {"count mismatch",
       [](auto* r) { AddInput(r, "x", "FP32", {3})->mutable_contents()->add_fp32_contents(1.f); },
       StatusCode::kInvalidArgument, "needs 3"},
      {"wrong field",
       [](auto* r) { AddInput(r, "x", "FP32", {1})->mutable_contents()->add_int_contents(1); },
       StatusCode::kInvalidArgument, "int_contents"},
      {"int8 range",
       [](auto* r) { AddInput(r, "x", "INT8", {1})->mutable_contents()->add_int_contents(300); },
       StatusCode::kInvalidArgument, "out of range"},
      {"fp16 typed",
       [](auto* r) { AddInput(r, "x", "FP16", {1})->mutable_contents()->add_fp32_contents(1.f); },
       StatusCode::kInvalidArgument, "raw_input_contents"},
      {"raw size",
       [](auto* r) {
         AddInput(r, "x", "FP32", {2});
         r->add_raw_input_contents("abc");
       },
       StatusCode::kInvalidArgument, "unexpected size"},
      {"raw bool value",
       [](auto* r) {
         AddInput(r, "x", "BOOL", {1});
         r->add_raw_input_contents("\x05");
       },
       StatusCode::kInvalidArgument, "BOOL"},
      {"raw bytes truncated",
       [](auto* r) {
         AddInput(r, "x", "BYTES", {1});
         r->add_raw_input_contents(std::string("\x09\0\0\0ab", 6));
       },
       StatusCode::kInvalidArgument, "remain"},
      {"raw missing",
       [](auto* r) {
         AddInput(r, "x", "FP32", {1});
         AddInput(r, "y", "FP32", {1});
         r->add_raw_input_contents(std::string(4, '\0'));
       },
       StatusCode::kInvalidArgument, "unable to find data for input tensor 'y'"},
      {"mixed",
       [](auto* r) {
         AddInput(r, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.f);
         r->add_raw_input_contents(std::string(4, '\0'));
       },
       StatusCode::kInvalidArgument, "raw_input_contents"},
      {"no data", [](auto* r) { AddInput(r, "x", "FP32", {1}); }, StatusCode::kInvalidArgument,
       "unable to find data"},
      {"duplicate",
       [](auto* r) {
         AddInput(r, "x", "FP32", {0});
         AddInput(r, "x", "FP32", {0});
       },
       StatusCode::kInvalidArgument, "more than once"},
      {"triton param", [](auto* r) { (*r->mutable_parameters())["triton_x"].set_bool_param(true); },
       StatusCode::kInvalidArgument, "reserved"},
      {"negative priority",
       [](auto* r) { (*r->mutable_parameters())["priority"].set_int64_param(-1); },
       StatusCode::kInvalidArgument, "priority"},
      {"sequence", [](auto* r) { (*r->mutable_parameters())["sequence_id"].set_string_param("s"); },
       StatusCode::kUnimplemented, "sequence"},
      {"sequence id as a double",
       [](auto* r) { (*r->mutable_parameters())["sequence_id"].set_double_param(7.0); },
       StatusCode::kUnimplemented, "sequence_id"},
      {"sequence id as a bool",
       [](auto* r) { (*r->mutable_parameters())["sequence_id"].set_bool_param(true); },
       StatusCode::kUnimplemented, "sequence_id"},
      {"sequence start as an int",
       [](auto* r) { (*r->mutable_parameters())["sequence_start"].set_int64_param(1); },
       StatusCode::kUnimplemented, "sequence_start"},
      {"negative classification",
       [](auto* r) {
         auto* o = r->add_outputs();
         o->set_name("y");
         (*o->mutable_parameters())["classification"].set_int64_param(-2);
       },
       StatusCode::kInvalidArgument, "classification"},
      {"classification as a bool",
       [](auto* r) {
         auto* o = r->add_outputs();
         o->set_name("y");
         (*o->mutable_parameters())["classification"].set_bool_param(true);
       },
       StatusCode::kInvalidArgument, "classification"},
  };
  for (const Case& c : cases) {
    ModelInferRequest r;
    c.build(&r);
    auto decoded = DecodeModelInferRequest(r);
    ASSERT_FALSE(decoded.ok()) << c.what;
    EXPECT_EQ(decoded.status().code(), c.code) << c.what;
    EXPECT_NE(decoded.status().message().find(c.needle), std::string::npos)
        << c.what << ": " << decoded.status().message();
  }
}

TEST(DecodeModelInferRequest, RawContentsAreBorrowedWhenOwned) {
  auto r = std::make_shared<ModelInferRequest>();
  AddInput(r.get(), "a", "FP32", {256});
  AddInput(r.get(), "b", "FP32", {256});
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  r->add_raw_input_contents(std::string(reinterpret_cast<const char*>(v.data()), 1024));
  r->add_raw_input_contents(std::string(reinterpret_cast<const char*>(v.data()), 1024));
  const char* a_bytes = r->raw_input_contents(0).data();
  auto borrowed = DecodeModelInferRequest(*r, r);
  ASSERT_TRUE(borrowed.ok()) << borrowed.status().message();
  // The tensor points into the message and keeps it alive.
  EXPECT_EQ((*borrowed)->inputs[0].tensor.raw_data(), static_cast<const void*>(a_bytes));
  const std::weak_ptr<ModelInferRequest> weak = r;
  r.reset();
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ((*borrowed)->inputs[1].tensor.data<float>()[255], 127.5f);
  borrowed->reset();
  EXPECT_TRUE(weak.expired());

  // Without an owner the bytes are copied.
  ModelInferRequest plain;
  AddInput(&plain, "a", "FP32", {256});
  plain.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v.data()), 1024));
  auto copied = DecodeModelInferRequest(plain);
  ASSERT_TRUE(copied.ok());
  EXPECT_NE((*copied)->inputs[0].tensor.raw_data(),
            static_cast<const void*>(plain.raw_input_contents(0).data()));
  EXPECT_EQ((*copied)->inputs[0].tensor.data<float>()[3], 1.5f);
}

InferResponse TwoOutputResponse() {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = 3;
  resp.id = "i";
  auto f = OwnedTensor::Allocate(DataType::kFloat32, Shape{2});
  f->data<float>()[0] = 1.5f;
  f->data<float>()[1] = -2.f;
  auto s = OwnedTensor::Allocate(DataType::kBytes, Shape{1});
  s->data<std::string>()[0] = "xyz";
  auto empty = OwnedTensor::Allocate(DataType::kInt64, Shape{0, 4});
  resp.outputs.push_back({"f", std::move(*f)});
  resp.outputs.push_back({"s", std::move(*s)});
  resp.outputs.push_back({"e", std::move(*empty)});
  return resp;
}

TEST(EncodeModelInferResponse, WireFormParsesAsTheMessage) {
  const InferResponse resp = TwoOutputResponse();
  inference::ModelInferResponse head;
  (*head.mutable_parameters())["triton_final_response"].set_bool_param(true);
  Result<WireMessage> wire = EncodeModelInferResponse(resp, head);
  ASSERT_TRUE(wire.ok()) << wire.status().message();
  const std::string bytes = wire->Join();
  EXPECT_EQ(bytes.size(), wire->size());
  // The float output's bytes are the output tensor's own memory, not a copy.
  bool borrowed = false;
  for (const WireMessage::Piece& p : wire->pieces()) {
    borrowed |= p.data() == static_cast<const char*>(resp.outputs[0].tensor.raw_data());
  }
  EXPECT_TRUE(borrowed);

  // Parsed by protobuf itself.
  inference::ModelInferResponse out;
  ASSERT_TRUE(out.ParseFromString(bytes));
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "3");
  EXPECT_EQ(out.id(), "i");
  EXPECT_TRUE(out.parameters().at("triton_final_response").bool_param());
  ASSERT_EQ(out.outputs_size(), 3);
  ASSERT_EQ(out.raw_output_contents_size(), 3);
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  EXPECT_EQ(out.outputs(1).datatype(), "BYTES");
  EXPECT_EQ(out.outputs(2).datatype(), "INT64");
  EXPECT_EQ(out.outputs(2).shape_size(), 2);
  EXPECT_EQ(out.outputs(2).shape(1), 4);
  EXPECT_FALSE(out.outputs(0).has_contents());
  float back[2];
  ASSERT_EQ(out.raw_output_contents(0).size(), sizeof(back));
  std::memcpy(back, out.raw_output_contents(0).data(), sizeof(back));
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.f);
  EXPECT_EQ(out.raw_output_contents(1), std::string("\x03\0\0\0xyz", 7));
  EXPECT_EQ(out.raw_output_contents(2), "");
}

TEST(EncodeModelInferResponse, NestsAsTheStreamResponse) {
  // A payload over 127 bytes: the nested length takes a two-byte varint.
  InferResponse resp;
  resp.model_name = "m";
  auto big = OwnedTensor::Allocate(DataType::kUint8, Shape{300});
  for (int i = 0; i < 300; ++i) big->data<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
  resp.outputs.push_back({"y", std::move(*big)});
  Result<WireMessage> wire = EncodeModelInferResponse(resp);
  ASSERT_TRUE(wire.ok());
  const uint64_t inner = wire->size();
  WireMessage stream =
      std::move(*wire).NestedAs(inference::ModelStreamInferResponse::kInferResponseFieldNumber);
  EXPECT_EQ(stream.size(), inner + 3);  // tag byte + two length bytes
  inference::ModelStreamInferResponse out;
  ASSERT_TRUE(out.ParseFromString(stream.Join()));
  EXPECT_EQ(out.error_message(), "");
  ASSERT_EQ(out.infer_response().raw_output_contents_size(), 1);
  const std::string& y = out.infer_response().raw_output_contents(0);
  ASSERT_EQ(y.size(), 300u);
  EXPECT_EQ(static_cast<uint8_t>(y[299]), static_cast<uint8_t>(299 * 7));
}

TEST(EncodeModelInferResponse, RefusesANonHostOrInvalidOutput) {
  InferResponse resp;
  resp.outputs.push_back({"y", OwnedTensor()});
  Result<WireMessage> wire = EncodeModelInferResponse(resp);
  ASSERT_FALSE(wire.ok());
  EXPECT_EQ(wire.status().code(), StatusCode::kInternal);
  EXPECT_NE(wire.status().message().find("output 'y'"), std::string::npos);
}

// The ModelStatistics RPC's entry: every counter, the response cache's included.
TEST(UnloadDependents, BoolParamOrAbsent) {
  inference::RepositoryModelUnloadRequest r;
  r.set_model_name("e");
  Result<bool> d = UnloadDependents(r);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(*d);
  (*r.mutable_parameters())["other"].set_string_param("x");  // ignored
  (*r.mutable_parameters())["unload_dependents"].set_bool_param(true);
  d = UnloadDependents(r);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d);
  (*r.mutable_parameters())["unload_dependents"].set_bool_param(false);
  d = UnloadDependents(r);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(*d);
  (*r.mutable_parameters())["unload_dependents"].set_string_param("true");
  d = UnloadDependents(r);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "unload parameter 'unload_dependents' must be a bool_param");
  (*r.mutable_parameters())["unload_dependents"].set_int64_param(1);
  EXPECT_EQ(UnloadDependents(r).status().code(), StatusCode::kInvalidArgument);
}

TEST(FillModelStatistics, EveryMemberCacheHitsAndMissesIncluded) {
  ModelStatistics s;
  s.last_inference_ms = 1700000000123;
  s.inference_count = 9;
  s.execution_count = 2;
  s.inference.success = {5, 3000};
  s.inference.fail = {1, 10};
  s.inference.queue = {5, 300};
  s.inference.compute_input = {3, 30};
  s.inference.compute_infer = {3, 2400};
  s.inference.compute_output = {3, 60};
  s.inference.cache_hit = {2, 700};
  s.inference.cache_miss = {3, 1100};
  s.batches[1] = {{1, 5}, {1, 700}, {1, 9}};
  s.batches[8] = {{1, 20}, {1, 1000}, {1, 21}};
  inference::ModelStatistics m;
  FillModelStatistics("digits", 12, s, &m);
  EXPECT_EQ(m.name(), "digits");
  EXPECT_EQ(m.version(), "12");
  EXPECT_EQ(m.last_inference(), 1700000000123u);
  EXPECT_EQ(m.inference_count(), 9u);
  EXPECT_EQ(m.execution_count(), 2u);
  const inference::InferStatistics& is = m.inference_stats();
  EXPECT_EQ(is.success().count(), 5u);
  EXPECT_EQ(is.success().ns(), 3000u);
  EXPECT_EQ(is.fail().count(), 1u);
  EXPECT_EQ(is.queue().ns(), 300u);
  EXPECT_EQ(is.compute_input().count(), 3u);
  EXPECT_EQ(is.compute_infer().ns(), 2400u);
  EXPECT_EQ(is.compute_output().ns(), 60u);
  EXPECT_EQ(is.cache_hit().count(), 2u);
  EXPECT_EQ(is.cache_hit().ns(), 700u);
  EXPECT_EQ(is.cache_miss().count(), 3u);
  EXPECT_EQ(is.cache_miss().ns(), 1100u);
  ASSERT_EQ(m.batch_stats_size(), 2);
  EXPECT_EQ(m.batch_stats(0).batch_size(), 1u);
  EXPECT_EQ(m.batch_stats(0).compute_infer().ns(), 700u);
  EXPECT_EQ(m.batch_stats(1).batch_size(), 8u);
  EXPECT_EQ(m.batch_stats(1).compute_output().ns(), 21u);
}

}  // namespace
}  // namespace kiln
