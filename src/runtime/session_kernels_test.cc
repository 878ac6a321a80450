// SPDX-License-Identifier: Apache-2.0
// Sessions over one node of a registered kernel: the provider a session reports for it, and what
// the runtime refuses to hand a kernel or to return from a tensor Run (the kernels' own tests
// drive kernels directly and cannot see these).

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/session.h"

namespace kiln {
namespace {

// One node "node" of `op` at `opset` with one input "in0" declared as `input_type` (absent when
// `with_input` is false) and one output "out0" of unknown type, every one a graph input / output.
std::shared_ptr<const Graph> OneNode(std::string op, int64_t opset, bool with_input = true,
                                     ValueType input_type = {}) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  Node node;
  node.name = "node";
  node.op_type = std::move(op);
  if (with_input) {
    const int in = g->AddValue({"in0", std::move(input_type), -1, nullptr});
    g->inputs.push_back(in);
    node.inputs.push_back(in);
  }
  const int out = g->AddValue({"out0", ValueType(), -1, nullptr});
  g->outputs.push_back(out);
  node.outputs.push_back(out);
  g->AddNode(std::move(node));
  return g;
}

ValueType Float32() {
  ValueType t;
  t.dtype = DataType::kFloat32;
  return t;
}

void ExpectMessageHas(const Status& s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "message '" << s.message() << "' lacks '" << p << "'";
  }
}

TEST(RefRegistryTest, SessionReportsTheRefProvider) {
  SessionOptions ref_only;
  ref_only.kernel_provider = "ref";
  Result<std::unique_ptr<Session>> s =
      Session::Create(OneNode("Relu", 13, true, Float32()), ref_only);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->provider(0), "ref");
  // Without the restriction a faster provider, when one is built in, takes the node.
  Result<std::unique_ptr<Session>> best = Session::Create(OneNode("Relu", 13, true, Float32()));
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_FALSE((*best)->provider(0).empty());
}

TEST(IdentityOnValuesTest, TensorKernelsRefuseSequences) {
  // Opset 13 Identity and Relu take tensors only: the runtime refuses a sequence by name.
  Result<OwnedTensor> one = OwnedTensor::Allocate(DataType::kFloat32, Shape{1});
  ASSERT_TRUE(one.ok());
  one->data<float>()[0] = 1;
  Result<TensorSequence> seq = TensorSequence::Create(DataType::kFloat32, {*one});
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  const std::vector<RuntimeValue> seq_feed = {RuntimeValue(std::move(seq).value())};

  Result<std::unique_ptr<Session>> identity = Session::Create(OneNode("Identity", 13));
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  Result<std::vector<RuntimeValue>> r = (*identity)->RunValues(seq_feed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(r.status(),
                   {"node 'node' (Identity)", "input 0 ('in0') is a sequence of 1 FP32 tensor",
                    "takes tensors only"});

  Result<std::unique_ptr<Session>> relu = Session::Create(OneNode("Relu", 14));
  ASSERT_TRUE(relu.ok()) << relu.status().ToString();
  const std::vector<RuntimeValue> none_feed = {RuntimeValue::None()};
  r = (*relu)->RunValues(none_feed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(r.status(), {"(Relu)", "is a none"});
}

TEST(IdentityOnValuesTest, TensorRunNamesANonTensorOutput) {
  Result<std::unique_ptr<Session>> s = Session::Create(OneNode("SequenceEmpty", 11, false));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<std::vector<OwnedTensor>> r = (*s)->Run(std::span<const Tensor>());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  ExpectMessageHas(r.status(), {"graph output 'out0' is a sequence of 0 FP32 tensors"});
}

}  // namespace
}  // namespace kiln
