// SPDX-License-Identifier: Apache-2.0
// Tests for the ONNX importer: known models of the ONNX backend test data, every model of that
// data set, models built here with the onnx protobuf API (initializers of every dtype, every
// attribute kind, subgraphs, inferred types), every error path, and a deterministic mutation
// test (flipped and truncated model bytes must give errors, never crashes).

#include "graph/onnx/importer.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "base/testing/mutate.h"
#include "graph/onnx/tensor_proto_convert.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string TestDataDir() {
  std::string dir = KILN_ONNX_TESTDATA_DIR;
  EXPECT_FALSE(dir.empty())
      << "ONNX backend test data not found at configure time: install libonnx-testdata or set "
         "KILN_ONNX_TESTDATA_DIR";
  return dir;
}

std::string NodeModel(std::string_view test) {
  return TestDataDir() + "/node/" + std::string(test) + "/model.onnx";
}

onnx::ModelProto NewModel(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln importer_test");
  onnx::OperatorSetIdProto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// Sets a tensor type; dims are "3" (known), "N" (symbolic) or "?" (unknown).
void SetTensorType(onnx::TypeProto* type, int32_t elem, const std::vector<std::string>& dims,
                   bool has_shape = true) {
  onnx::TypeProto_Tensor* t = type->mutable_tensor_type();
  t->set_elem_type(elem);
  if (!has_shape) return;
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (d == "?") continue;
    if (d[0] >= '0' && d[0] <= '9') {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

onnx::ValueInfoProto* AddInput(onnx::GraphProto* g, const std::string& name, int32_t elem,
                               const std::vector<std::string>& dims) {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  SetTensorType(vi->mutable_type(), elem, dims);
  return vi;
}

onnx::ValueInfoProto* AddOutput(onnx::GraphProto* g, const std::string& name, int32_t elem,
                                const std::vector<std::string>& dims, bool has_shape = true) {
  onnx::ValueInfoProto* vi = g->add_output();
  vi->set_name(name);
  SetTensorType(vi->mutable_type(), elem, dims, has_shape);
  return vi;
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name = "") {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  return n;
}

TensorProto FloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<float>& values) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

Result<std::shared_ptr<Graph>> Import(const onnx::ModelProto& m) {
  return ImportOnnxModelFromString(m.SerializeAsString(), "test.onnx");
}

std::shared_ptr<Graph> ImportOk(const onnx::ModelProto& m) {
  Result<std::shared_ptr<Graph>> g = Import(m);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

void ExpectImportError(const onnx::ModelProto& m, StatusCode code, std::string_view part) {
  Result<std::shared_ptr<Graph>> g = Import(m);
  ASSERT_FALSE(g.ok()) << "expected an error containing: " << part;
  EXPECT_EQ(g.status().code(), code) << g.status().ToString();
  EXPECT_NE(g.status().message().find(part), std::string::npos) << g.status().ToString();
  EXPECT_EQ(g.status().message().find("'test.onnx'"), 0u) << g.status().ToString();
}

const Value& ValueNamed(const Graph& g, std::string_view name) {
  const int id = g.FindValue(name);
  KILN_CHECK(id >= 0, "no value named ", name);
  return g.value(id);
}

bool IsOuterScope(const Graph& g, int id) {
  const Value& v = g.value(id);
  if (v.producer != -1 || v.is_constant()) return false;
  for (int in : g.inputs) {
    if (in == id) return false;
  }
  return true;
}

// A small valid model touching most features: an initializer, attributes, a subgraph reading
// an outer-scope value, inferred intermediate types.
onnx::ModelProto RichModel() {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"N", "3"});
  AddInput(g, "cond", TensorProto::BOOL, {});
  *g->add_initializer() = FloatTensor("bias", {3}, {1, 2, 3});
  AddNode(g, "Add", {"x", "bias"}, {"h"}, "add");
  onnx::NodeProto* lr = AddNode(g, "LeakyRelu", {"h"}, {"h2"}, "lrelu");
  onnx::AttributeProto* alpha = lr->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  onnx::NodeProto* if_node = AddNode(g, "If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* a = if_node->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* sub = a->mutable_g();
    sub->set_name(branch);
    AddNode(sub, std::string_view(branch) == "then_branch" ? "Relu" : "Neg", {"h2"}, {"out"});
    AddOutput(sub, "out", TensorProto::FLOAT, {"N", "3"});
  }
  AddOutput(g, "y", TensorProto::FLOAT, {"N", "3"});
  return m;
}

// ---------------------------------------------------------------------------------------------
// ONNX backend test data.

TEST(OnnxImporterTest, ImportsTestAdd) {
  Result<std::shared_ptr<Graph>> r = ImportOnnxModel(NodeModel("test_add"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& g = **r;
  EXPECT_EQ(g.name, "test_add");
  EXPECT_EQ(g.ir_version, 7);
  EXPECT_EQ(g.opset_imports, (std::map<std::string, int64_t>{{"", 14}}));
  EXPECT_EQ(g.OpsetFor("ai.onnx"), 14);
  ASSERT_EQ(g.inputs.size(), 2u);
  const char* names[] = {"x", "y"};
  for (int i = 0; i < 2; ++i) {
    const Value& in = g.value(g.inputs[static_cast<size_t>(i)]);
    EXPECT_EQ(in.name, names[i]);
    EXPECT_EQ(in.type.ToString(), "FP32[3,4,5]");
    EXPECT_FALSE(in.is_constant());
    EXPECT_EQ(in.producer, -1);
  }
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).name, "sum");
  EXPECT_EQ(g.value(g.outputs[0]).type.ToString(), "FP32[3,4,5]");
  ASSERT_EQ(g.num_nodes(), 1);
  const Node& add = g.node(0);
  EXPECT_EQ(add.op_type, "Add");
  EXPECT_EQ(add.domain, "");
  EXPECT_EQ(add.inputs, g.inputs);
  EXPECT_EQ(add.outputs, g.outputs);
  EXPECT_EQ(g.value(g.outputs[0]).producer, 0);
}

TEST(OnnxImporterTest, ImportsConvAttributes) {
  Result<std::shared_ptr<Graph>> r = ImportOnnxModel(NodeModel("test_conv_with_strides_padding"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& g = **r;
  EXPECT_EQ(g.OpsetFor(""), 11);
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.value(g.inputs[0]).type.ToString(), "FP32[1,1,7,5]");
  EXPECT_EQ(g.value(g.inputs[1]).name, "W");
  EXPECT_EQ(g.value(g.inputs[1]).type.ToString(), "FP32[1,1,3,3]");
  ASSERT_EQ(g.num_nodes(), 1);
  const Node& conv = g.node(0);
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.GetInts("kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(conv.GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(conv.GetInts("strides"), (std::vector<int64_t>{2, 2}));
  ASSERT_NE(conv.FindAttribute("pads"), nullptr);
  EXPECT_EQ(conv.FindAttribute("pads")->type, AttributeType::kInts);
  EXPECT_EQ(g.value(g.outputs[0]).type.ToString(), "FP32[1,1,4,3]");
}

TEST(OnnxImporterTest, ImportsLoopBodyWithOuterScopeReference) {
  // The expanded Range function: a Loop whose body reads 'delta' from the main graph.
  Result<std::shared_ptr<Graph>> r =
      ImportOnnxModel(NodeModel("test_range_float_type_positive_delta_expanded"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& g = **r;
  const Node* loop = nullptr;
  for (const Node& n : g.nodes()) {
    if (n.op_type == "Loop") loop = &n;
  }
  ASSERT_NE(loop, nullptr);
  const Attribute* body_attr = loop->FindAttribute("body");
  ASSERT_NE(body_attr, nullptr);
  ASSERT_EQ(body_attr->type, AttributeType::kGraph);
  const Graph& body = *body_attr->g;
  EXPECT_EQ(body.inputs.size(), 3u);
  EXPECT_EQ(body.OpsetFor(""), g.OpsetFor(""));
  const int delta = body.FindValue("delta");
  ASSERT_GE(delta, 0);
  EXPECT_TRUE(IsOuterScope(body, delta));
  // Values the body defines are not outer-scope references.
  for (int id : body.inputs) EXPECT_FALSE(IsOuterScope(body, id));
  for (const Node& n : body.nodes()) {
    for (int out : n.outputs) EXPECT_FALSE(IsOuterScope(body, out));
  }
  // The Loop node supplies the captured value as an implicit input.
  EXPECT_EQ(body.Captures(), std::vector<int>{delta});
  ASSERT_EQ(loop->implicit_inputs.size(), 1u);
  EXPECT_EQ(g.value(loop->implicit_inputs[0]).name, "delta");
}

TEST(OnnxImporterTest, NestedSubgraphCapturesBecomeImplicitInputsAtEveryLevel) {
  // main: If(c) { then: If(c) { then: Add(a, a) else: Neg(a) } else: Identity(a) }
  onnx::ModelProto m = NewModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "c", TensorProto::BOOL, {});
  AddInput(g, "a", TensorProto::FLOAT, {"2"});
  auto branch = [](onnx::GraphProto* b, const std::string& name, const std::string& op,
                   const std::vector<std::string>& in) {
    b->set_name(name);
    AddNode(b, op, in, {name + "_y"});
    AddOutput(b, name + "_y", TensorProto::FLOAT, {"2"});
  };
  onnx::NodeProto* outer = AddNode(g, "If", {"c"}, {"y"});
  onnx::AttributeProto* then_attr = outer->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_g = then_attr->mutable_g();
  then_g->set_name("outer_then");
  onnx::NodeProto* inner = AddNode(then_g, "If", {"c"}, {"inner_y"});
  AddOutput(then_g, "inner_y", TensorProto::FLOAT, {"2"});
  for (const char* which : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* a = inner->add_attribute();
    a->set_name(which);
    a->set_type(onnx::AttributeProto::GRAPH);
    if (std::string(which) == "then_branch")
      branch(a->mutable_g(), "t", "Add", {"a", "a"});
    else
      branch(a->mutable_g(), "e", "Neg", {"a"});
  }
  onnx::AttributeProto* else_attr = outer->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  branch(else_attr->mutable_g(), "outer_else", "Identity", {"a"});
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});

  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Node& outer_if = graph->node(0);
  // The outer If reads 'c' explicitly and 'c' and 'a' through its branches.
  std::vector<std::string> names;
  for (int id : outer_if.implicit_inputs) names.push_back(graph->value(id).name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "c"}));
  // The then-branch captures 'a' and 'c' itself, and its inner If takes them as implicit inputs.
  const Graph& then_branch = *outer_if.FindAttribute("then_branch")->g;
  EXPECT_EQ(then_branch.Captures().size(), 2u);
  const Node& inner_if = then_branch.node(0);
  ASSERT_EQ(inner_if.implicit_inputs.size(), 1u);
  EXPECT_EQ(then_branch.value(inner_if.implicit_inputs[0]).name, "a");
  EXPECT_TRUE(IsOuterScope(then_branch, inner_if.implicit_inputs[0]));
}

TEST(OnnxImporterTest, ImportsIfWithConstantTensorAttributes) {
  Result<std::shared_ptr<Graph>> r = ImportOnnxModel(NodeModel("test_if"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node& if_node = (*r)->node(0);
  for (const char* branch : {"then_branch", "else_branch"}) {
    const Attribute* a = if_node.FindAttribute(branch);
    ASSERT_NE(a, nullptr) << branch;
    ASSERT_EQ(a->type, AttributeType::kGraph);
    ASSERT_EQ(a->g->num_nodes(), 1);
    const Node& constant = a->g->node(0);
    EXPECT_EQ(constant.op_type, "Constant");
    const Attribute* value = constant.FindAttribute("value");
    ASSERT_NE(value, nullptr);
    ASSERT_EQ(value->type, AttributeType::kTensor);
    EXPECT_EQ(value->t->dtype(), DataType::kFloat32);
    EXPECT_EQ(value->t->num_elements(), 5);
    ASSERT_EQ(a->g->outputs.size(), 1u);
  }
}

// "value 'x' has ..." -> "value '_' has ...", to group messages.
std::string ElideQuoted(std::string_view msg) {
  std::string out;
  bool quoted = false;
  for (char c : msg) {
    if (c == '\'') {
      out += quoted ? "_'" : "'";
      quoted = !quoted;
    } else if (!quoted) {
      out += c;
    }
  }
  return out;
}

int CountFiles(const fs::path& dir, std::string_view prefix) {
  int n = 0;
  if (!fs::is_directory(dir)) return 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(prefix)) ++n;
  }
  return n;
}

TEST(OnnxImporterTest, ImportsEveryModelOfTheBackendTestData) {
  spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::err);
  const std::string data_dir = TestDataDir();
  ASSERT_TRUE(fs::is_directory(data_dir)) << "'" << data_dir << "'";
  int ok = 0, total = 0;
  std::map<std::string, int> failures;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(data_dir)) {
    if (e.path().filename() != "model.onnx") continue;
    ++total;
    Result<std::shared_ptr<Graph>> g = ImportOnnxModel(e.path().string());
    if (!g.ok()) {
      // Only models kiln cannot represent may fail: sequences, optionals, complex numbers...
      EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << g.status().ToString();
      // Group by message with the origin and quoted names elided.
      const std::string& msg = g.status().message();
      const size_t colon = msg.find("': ");
      const std::string rest = colon == std::string::npos ? msg : msg.substr(colon + 3);
      ++failures[ElideQuoted(rest)];
      continue;
    }
    ++ok;
    // Every graph input is fed by one input_N.pb of the test data.
    const fs::path set = e.path().parent_path() / "test_data_set_0";
    if (fs::is_directory(set)) {
      EXPECT_EQ(static_cast<int>((*g)->inputs.size()), CountFiles(set, "input_")) << e.path();
      EXPECT_EQ(static_cast<int>((*g)->outputs.size()), CountFiles(set, "output_")) << e.path();
    }
    for (const Node& n : (*g)->nodes()) {
      for (int in : n.inputs) {
        if (in != kNoValue) {
          EXPECT_LT(in, (*g)->num_values());
        }
      }
    }
  }
  spdlog::set_level(level);
  std::string summary;
  for (const auto& [msg, n] : failures) summary += "\n  " + std::to_string(n) + " x " + msg;
  std::cout << "backend test models: " << ok << " of " << total << " imported; failures:" << summary
            << "\n";
  EXPECT_GT(total, 1000);
  EXPECT_GT(ok, total * 9 / 10);
}

// ---------------------------------------------------------------------------------------------
// Models built here.

TEST(OnnxImporterTest, TypesComeFromDeclarationsAndShapeInference) {
  onnx::ModelProto m = RichModel();
  onnx::GraphProto* g = m.mutable_graph();
  // A custom op that shape inference cannot see through, with a declared shapeless type (the
  // checker requires shapes on graph inputs and outputs, not on value_info).
  onnx::OperatorSetIdProto* custom = m.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(1);
  AddNode(g, "Opaque", {"x"}, {"loose"})->set_domain("com.example");
  onnx::ValueInfoProto* loose = g->add_value_info();
  loose->set_name("loose");
  SetTensorType(loose->mutable_type(), TensorProto::INT64, {}, /*has_shape=*/false);
  AddInput(g, "partial", TensorProto::FLOAT16, {"?", "4", "batch"});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(ValueNamed(*graph, "x").type.ToString(), "FP32[N,3]");
  // Inferred by ONNX shape inference: h = x + bias, h2 = LeakyRelu(h).
  const ValueType& h = ValueNamed(*graph, "h").type;
  EXPECT_EQ(h.dtype, DataType::kFloat32);
  ASSERT_TRUE(h.has_shape);
  ASSERT_EQ(h.dims.size(), 2u);
  EXPECT_EQ(h.dims[0].symbol, "N");
  EXPECT_FALSE(h.dims[0].known());
  EXPECT_EQ(h.dims[1].value, 3);
  EXPECT_EQ(ValueNamed(*graph, "h2").type.ToString(), "FP32[N,3]");
  EXPECT_EQ(ValueNamed(*graph, "loose").type.ToString(), "INT64[?]");
  EXPECT_FALSE(ValueNamed(*graph, "loose").type.has_shape);
  const ValueType& partial = ValueNamed(*graph, "partial").type;
  ASSERT_EQ(partial.dims.size(), 3u);
  EXPECT_FALSE(partial.dims[0].known());
  EXPECT_TRUE(partial.dims[0].symbol.empty());
  EXPECT_EQ(partial.dims[1].value, 4);
  EXPECT_EQ(partial.dims[2].symbol, "batch");
  // Inputs keep their declaration order; the initializer is a constant, not an input.
  std::vector<std::string> input_names;
  for (int id : graph->inputs) input_names.push_back(graph->value(id).name);
  EXPECT_EQ(input_names, (std::vector<std::string>{"x", "cond", "partial"}));
  EXPECT_TRUE(ValueNamed(*graph, "bias").is_constant());
  EXPECT_EQ(ValueNamed(*graph, "bias").type.ToString(), "FP32[3]");
  EXPECT_FLOAT_EQ(graph->node(1).GetFloat("alpha", 0), 0.5f);
  // The If branches read h2 from the main graph.
  const Attribute* then_branch = graph->node(2).FindAttribute("then_branch");
  ASSERT_NE(then_branch, nullptr);
  const Graph& sub = *then_branch->g;
  EXPECT_EQ(sub.name, "then_branch");
  EXPECT_TRUE(IsOuterScope(sub, sub.FindValue("h2")));
  EXPECT_EQ(sub.node(0).inputs[0], sub.FindValue("h2"));
  EXPECT_EQ(sub.outputs, std::vector<int>{sub.node(0).outputs[0]});
}

TEST(OnnxImporterTest, InitializersOfEveryDtypeRoundTrip) {
  const DataType dtypes[] = {DataType::kBool,    DataType::kUint8,   DataType::kUint16,
                             DataType::kUint32,  DataType::kUint64,  DataType::kInt8,
                             DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                             DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                             DataType::kBytes,   DataType::kBFloat16};
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  std::vector<OwnedTensor> expected;
  std::mt19937 rng(3);
  for (size_t i = 0; i < std::size(dtypes); ++i) {
    Result<OwnedTensor> t = OwnedTensor::Allocate(dtypes[i], Shape{2, 3});
    ASSERT_TRUE(t.ok());
    if (dtypes[i] == DataType::kBytes) {
      for (int j = 0; j < 6; ++j) t->data<std::string>()[j] = std::string(j, 'a' + j);
    } else {
      auto* p = static_cast<unsigned char*>(t->raw_data());
      for (size_t b = 0; b < t->size_bytes(); ++b) {
        p[b] = dtypes[i] == DataType::kBool ? rng() % 2 : static_cast<unsigned char>(rng());
      }
    }
    const std::string name = "w" + std::to_string(i);
    ASSERT_TRUE(onnx_internal::TensorToProto(t->view(), name, g->add_initializer()).ok());
    AddNode(g, "Identity", {name}, {"y" + std::to_string(i)});
    AddOutput(g, "y" + std::to_string(i), onnx_internal::DataTypeToOnnx(dtypes[i]), {"2", "3"});
    expected.push_back(std::move(t).value());
  }
  // An initializer in the typed-field encoding that is also declared as a graph input.
  *g->add_initializer() = FloatTensor("typed", {2}, {0.5f, -1});
  AddInput(g, "typed", TensorProto::FLOAT, {"2"});
  AddNode(g, "Identity", {"typed"}, {"typed_out"});
  AddOutput(g, "typed_out", TensorProto::FLOAT, {"2"});

  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_TRUE(graph->inputs.empty());  // "typed" is an initializer: the caller does not feed it
  for (size_t i = 0; i < std::size(dtypes); ++i) {
    const Value& v = ValueNamed(*graph, "w" + std::to_string(i));
    ASSERT_TRUE(v.is_constant()) << v.name;
    const OwnedTensor& c = *v.constant;
    EXPECT_EQ(c.dtype(), dtypes[i]);
    EXPECT_EQ(c.shape(), (Shape{2, 3}));
    EXPECT_EQ(v.type.ToString(), std::string(DataTypeName(dtypes[i])) + "[2,3]");
    if (dtypes[i] == DataType::kBytes) {
      for (int j = 0; j < 6; ++j) {
        EXPECT_EQ(c.data<std::string>()[j], expected[i].data<std::string>()[j]);
      }
    } else {
      EXPECT_EQ(std::memcmp(c.raw_data(), expected[i].raw_data(), c.size_bytes()), 0)
          << DataTypeName(dtypes[i]);
    }
    // Identity's output type is inferred from the initializer.
    EXPECT_EQ(ValueNamed(*graph, "y" + std::to_string(i)).type.dtype, dtypes[i]);
  }
  const Value& typed = ValueNamed(*graph, "typed");
  ASSERT_TRUE(typed.is_constant());
  EXPECT_EQ(typed.constant->data<float>()[1], -1.0f);
}

// A custom-domain node with attributes of every kind, an omitted optional input and output, and
// three subgraphs reading the outer value 'a'.
onnx::ModelProto AttributeModel() {
  using A = onnx::AttributeProto;
  onnx::ModelProto m = NewModel();
  onnx::OperatorSetIdProto* custom = m.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {"2"});
  AddInput(g, "b", TensorProto::FLOAT, {"2"});
  onnx::NodeProto* n = AddNode(g, "Foo", {"a", "", "b"}, {"z", ""}, "foo");
  n->set_domain("com.example");
  auto add = [&](const char* name, A::AttributeType type) {
    A* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  };
  add("f", A::FLOAT)->set_f(1.25f);
  add("i", A::INT)->set_i(-42);
  add("s", A::STRING)->set_s(std::string("by\0tes", 6));
  *add("t", A::TENSOR)->mutable_t() = FloatTensor("", {2}, {3, 4});
  auto make_graph = [](onnx::GraphProto* sub, const std::string& name) {
    sub->set_name(name);
    AddInput(sub, name + "_in", TensorProto::FLOAT, {"2"});
    AddNode(sub, "Add", {name + "_in", "a"}, {name + "_out"});  // 'a' is from the outer graph
    AddOutput(sub, name + "_out", TensorProto::FLOAT, {"2"});
  };
  make_graph(add("g", A::GRAPH)->mutable_g(), "g0");
  A* floats = add("floats", A::FLOATS);
  floats->add_floats(0.5f);
  floats->add_floats(-1.5f);
  A* ints = add("ints", A::INTS);
  for (int64_t v : {1, 2, 3}) ints->add_ints(v);
  A* strings = add("strings", A::STRINGS);
  strings->add_strings("x");
  strings->add_strings("yy");
  A* tensors = add("tensors", A::TENSORS);
  *tensors->add_tensors() = FloatTensor("t0", {1}, {7});
  *tensors->add_tensors() = FloatTensor("t1", {2, 1}, {8, 9});
  A* graphs = add("graphs", A::GRAPHS);
  make_graph(graphs->add_graphs(), "g1");
  make_graph(graphs->add_graphs(), "g2");
  AddOutput(g, "z", TensorProto::FLOAT, {"2"});
  return m;
}

TEST(OnnxImporterTest, AttributesOfEveryKind) {
  std::shared_ptr<Graph> graph = ImportOk(AttributeModel());
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->OpsetFor("com.example"), 1);
  const Node& foo = graph->node(0);
  EXPECT_EQ(foo.domain, "com.example");
  EXPECT_EQ(foo.name, "foo");
  ASSERT_EQ(foo.inputs.size(), 3u);
  EXPECT_EQ(foo.inputs[1], kNoValue);
  EXPECT_EQ(foo.num_present_inputs(), 3);
  EXPECT_TRUE(foo.has_input(2));
  EXPECT_FALSE(foo.has_input(1));
  ASSERT_EQ(foo.outputs.size(), 2u);
  EXPECT_EQ(foo.outputs[1], kNoValue);
  EXPECT_FLOAT_EQ(foo.GetFloat("f", 0), 1.25f);
  EXPECT_EQ(foo.GetInt("i", 0), -42);
  EXPECT_EQ(foo.GetString("s", ""), std::string("by\0tes", 6));
  const Attribute* t = foo.FindAttribute("t");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, AttributeType::kTensor);
  EXPECT_EQ(t->t->data<float>()[1], 4.0f);
  EXPECT_EQ(foo.GetFloats("floats"), (std::vector<float>{0.5f, -1.5f}));
  EXPECT_EQ(foo.GetInts("ints"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(foo.FindAttribute("strings")->strings, (std::vector<std::string>{"x", "yy"}));
  const Attribute* ts = foo.FindAttribute("tensors");
  ASSERT_EQ(ts->type, AttributeType::kTensors);
  ASSERT_EQ(ts->tensors.size(), 2u);
  EXPECT_EQ(ts->tensors[1]->shape(), (Shape{2, 1}));
  EXPECT_EQ(ts->tensors[1]->data<float>()[1], 9.0f);
  const Attribute* g0 = foo.FindAttribute("g");
  ASSERT_EQ(g0->type, AttributeType::kGraph);
  const Attribute* gs = foo.FindAttribute("graphs");
  ASSERT_EQ(gs->type, AttributeType::kGraphs);
  ASSERT_EQ(gs->graphs.size(), 2u);
  for (const Graph* sub : {g0->g.get(), gs->graphs[0].get(), gs->graphs[1].get()}) {
    ASSERT_EQ(sub->inputs.size(), 1u);
    ASSERT_EQ(sub->num_nodes(), 1);
    EXPECT_TRUE(IsOuterScope(*sub, sub->FindValue("a"))) << sub->name;
    EXPECT_FALSE(IsOuterScope(*sub, sub->inputs[0]));
    EXPECT_EQ(sub->OpsetFor("com.example"), 1);
  }
  EXPECT_EQ(gs->graphs[1]->name, "g2");
}

TEST(OnnxImporterTest, AiOnnxOpsetDomainIsNormalized) {
  onnx::ModelProto m = NewModel();
  onnx::OperatorSetIdProto* alias = m.add_opset_import();
  alias->set_domain("ai.onnx");
  alias->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->opset_imports, (std::map<std::string, int64_t>{{"", 17}}));
}

TEST(OnnxImporterTest, ShapeInferenceFailureKeepsDeclaredTypes) {
  // The checker accepts this model, but shape inference finds Relu's FLOAT output declared INT64.
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Relu", {"x"}, {"h"});
  AddNode(g, "Relu", {"h"}, {"y"});
  AddOutput(g, "y", TensorProto::INT64, {"2"});
  spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::err);
  std::shared_ptr<Graph> graph = ImportOk(m);
  spdlog::set_level(level);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(ValueNamed(*graph, "y").type.ToString(), "INT64[2]");
  // Nothing inferred survives: h has no recorded type.
  EXPECT_EQ(ValueNamed(*graph, "h").type.dtype, DataType::kInvalid);
}

TEST(OnnxImporterTest, ShapeInferenceCrashIsContained) {
  // libonnx 1.12's LayerNormalization inference indexes dims with an unchecked axis and crashes
  // on this checker-approved model; the importer runs inference in a child and carries on.
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", TensorProto::FLOAT, {"2", "3", "5"});
  AddInput(g, "W", TensorProto::FLOAT, {"3", "5"});
  AddInput(g, "B", TensorProto::FLOAT, {"3", "5"});
  onnx::NodeProto* ln = AddNode(g, "LayerNormalization", {"X", "W", "B"}, {"Y", "Mean", "Inv"});
  onnx::AttributeProto* axis = ln->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-67108866);
  AddOutput(g, "Y", TensorProto::FLOAT, {"2", "3", "5"});
  AddOutput(g, "Mean", TensorProto::FLOAT, {"2", "1", "1"});
  AddOutput(g, "Inv", TensorProto::FLOAT, {"2", "1", "1"});
  spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::err);
  std::shared_ptr<Graph> graph = ImportOk(m);
  spdlog::set_level(level);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->node(0).GetInt("axis", 0), -67108866);
  EXPECT_EQ(ValueNamed(*graph, "Mean").type.ToString(), "FP32[2,1,1]");  // as declared
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(OnnxImporterTest, MissingAndUnreadableFiles) {
  Result<std::shared_ptr<Graph>> missing = ImportOnnxModel("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot read model file '/nonexistent/model.onnx': No such file or directory");
  Result<std::shared_ptr<Graph>> dir = ImportOnnxModel(fs::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("Is a directory"), std::string::npos);
}

TEST(OnnxImporterTest, GarbageIsNotAModel) {
  for (std::string_view bytes :
       {std::string_view("\x7f\x7f\x7f\x7f"), std::string_view("hello, I am not a model"),
        std::string_view("")}) {
    Result<std::shared_ptr<Graph>> g = ImportOnnxModelFromString(bytes, "junk.onnx");
    ASSERT_FALSE(g.ok()) << bytes;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().ToString();
    EXPECT_EQ(g.status().message().find("'junk.onnx' is not a valid ONNX model: "), 0u)
        << g.status().ToString();
  }
  Result<std::shared_ptr<Graph>> empty = ImportOnnxModelFromString("", "junk.onnx");
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  Result<std::shared_ptr<Graph>> bad = ImportOnnxModelFromString("\x7f\x7f", "junk.onnx");
  EXPECT_NE(bad.status().message().find("protobuf parsing failed"), std::string::npos);
}

TEST(OnnxImporterTest, CheckerFailures) {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Add", {"x"}, {"y"}, "lonely_add");  // Add needs two inputs
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});
  ExpectImportError(m, StatusCode::kInvalidArgument, "ONNX checker");
  ExpectImportError(m, StatusCode::kInvalidArgument, "lonely_add");

  onnx::ModelProto no_ir = RichModel();
  no_ir.clear_ir_version();
  ExpectImportError(no_ir, StatusCode::kInvalidArgument, "ir_version");

  onnx::ModelProto unknown_op = RichModel();
  unknown_op.mutable_graph()->mutable_node(0)->set_op_type("NoSuchOp");
  ExpectImportError(unknown_op, StatusCode::kInvalidArgument, "NoSuchOp");

  onnx::ModelProto no_graph = NewModel();
  no_graph.clear_graph();
  ExpectImportError(no_graph, StatusCode::kInvalidArgument, "has no graph");
}

TEST(OnnxImporterTest, UnknownInputName) {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Add", {"x", "nope"}, {"y"}, "adder");
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});
  ExpectImportError(m, StatusCode::kInvalidArgument,
                    "node 'adder' (Add) reads unknown value 'nope'");

  onnx::ModelProto out = NewModel();
  AddInput(out.mutable_graph(), "x", TensorProto::FLOAT, {"2"});
  AddOutput(out.mutable_graph(), "ghost", TensorProto::FLOAT, {"2"});
  ExpectImportError(out, StatusCode::kInvalidArgument, "graph output 'ghost' is not");
}

TEST(OnnxImporterTest, NodesOutOfOrder) {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Relu", {"h"}, {"y"}, "second");
  AddNode(g, "Relu", {"x"}, {"h"});
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});
  ExpectImportError(m, StatusCode::kInvalidArgument,
                    "node 'second' (Relu) reads 'h', which is produced later by node #1 (Relu); "
                    "ONNX requires nodes in topological order");

  onnx::ModelProto twice = NewModel();
  g = twice.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "Relu", {"x"}, {"y"}, "one");
  AddNode(g, "Neg", {"x"}, {"y"}, "two");
  AddOutput(g, "y", TensorProto::FLOAT, {"2"});
  ExpectImportError(twice, StatusCode::kInvalidArgument,
                    "value 'y' is produced twice, by node 'one' (Relu) and by node 'two' (Neg)");

  // The same mistake inside a subgraph names where it is.
  onnx::ModelProto sub = RichModel();
  onnx::GraphProto* branch =
      sub.mutable_graph()->mutable_node(2)->mutable_attribute(1)->mutable_g();
  AddNode(branch, "Relu", {"late"}, {"early"}, "early_node");
  AddNode(branch, "Relu", {"h2"}, {"late"}, "late_node");
  ExpectImportError(sub, StatusCode::kInvalidArgument,
                    "attribute 'else_branch' of node 'if' (If): node 'early_node' (Relu) reads "
                    "'late', which is produced later by node 'late_node' (Relu)");
  // A subgraph name that no enclosing graph defines.
  onnx::ModelProto nowhere = RichModel();
  nowhere.mutable_graph()
      ->mutable_node(2)
      ->mutable_attribute(0)
      ->mutable_g()
      ->mutable_node(0)
      ->set_input(0, "nowhere");
  ExpectImportError(nowhere, StatusCode::kInvalidArgument, "reads unknown value 'nowhere'");
}

TEST(OnnxImporterTest, UnsupportedTensors) {
  onnx::ModelProto external = RichModel();
  TensorProto* bias = external.mutable_graph()->mutable_initializer(0);
  bias->clear_float_data();
  bias->set_data_location(TensorProto::EXTERNAL);
  auto* entry = bias->add_external_data();
  entry->set_key("location");
  entry->set_value("bias.bin");
  ExpectImportError(external, StatusCode::kUnimplemented,
                    "initializer 'bias' is stored in an external file; external data is not "
                    "supported");

  onnx::ModelProto short_init = RichModel();
  *short_init.mutable_graph()->add_initializer() = FloatTensor("w", {2, 3}, {1, 2, 3, 4, 5});
  ExpectImportError(short_init, StatusCode::kInvalidArgument,
                    "initializer 'w' has 5 values but shape [2,3] needs 6");

  onnx::ModelProto negative = RichModel();
  *negative.mutable_graph()->add_initializer() = FloatTensor("w", {-1}, {});
  ExpectImportError(negative, StatusCode::kInvalidArgument,
                    "initializer 'w' has negative dimension -1");

  onnx::ModelProto complex = RichModel();
  TensorProto* c = complex.mutable_graph()->add_initializer();
  c->set_name("c");
  c->set_data_type(TensorProto::COMPLEX64);
  c->add_dims(1);
  c->set_raw_data(std::string(8, '\0'));
  ExpectImportError(complex, StatusCode::kUnimplemented,
                    "initializer 'c' has element type COMPLEX64, which kiln does not support");

  onnx::ModelProto complex_input = NewModel();
  onnx::GraphProto* g = complex_input.mutable_graph();
  AddInput(g, "z", TensorProto::COMPLEX128, {"2"});
  AddNode(g, "Identity", {"z"}, {"y"});
  AddOutput(g, "y", TensorProto::COMPLEX128, {"2"});
  ExpectImportError(complex_input, StatusCode::kUnimplemented,
                    "value 'z' has element type COMPLEX128");

  onnx::ModelProto sparse = RichModel();
  onnx::SparseTensorProto* sp = sparse.mutable_graph()->add_sparse_initializer();
  *sp->mutable_values() = FloatTensor("sp", {1}, {1});
  *sp->mutable_indices() = TensorProto();
  sp->mutable_indices()->set_data_type(TensorProto::INT64);
  sp->mutable_indices()->add_dims(1);
  sp->mutable_indices()->add_int64_data(0);
  sp->add_dims(4);
  ExpectImportError(sparse, StatusCode::kUnimplemented, "sparse");

  onnx::ModelProto sparse_attr = NewModel();
  g = sparse_attr.mutable_graph();
  onnx::NodeProto* constant = AddNode(g, "Constant", {}, {"y"}, "k");
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("sparse_value");
  value->set_type(onnx::AttributeProto::SPARSE_TENSOR);
  *value->mutable_sparse_tensor() = *sp;
  AddOutput(g, "y", TensorProto::FLOAT, {"4"});
  ExpectImportError(sparse_attr, StatusCode::kUnimplemented,
                    "attribute 'sparse_value' of node 'k' (Constant) holds a sparse tensor");

  onnx::ModelProto bad_attr_tensor = RichModel();
  onnx::NodeProto* k = AddNode(bad_attr_tensor.mutable_graph(), "Constant", {}, {"k"}, "kk");
  onnx::AttributeProto* kv = k->add_attribute();
  kv->set_name("value");
  kv->set_type(onnx::AttributeProto::TENSOR);
  *kv->mutable_t() = FloatTensor("", {3}, {1});
  ExpectImportError(bad_attr_tensor, StatusCode::kInvalidArgument,
                    "tensor attribute 'value' of node 'kk' (Constant) has 1 values but shape [3] "
                    "needs 3");
}

// Sequence and optional types on inputs, outputs and inferred values, and a TYPE_PROTO attribute:
//   seq: seq(FP32[2]), opt: optional(seq(INT64[N,3])) (inputs)
//   built = SequenceConstruct(x)             inferred: seq(FP32[2])
//   n = SequenceLength(seq); has = OptionalHasElement(opt)
//   empty = Optional[type = seq(FP32[5])]()  declared output: optional(seq(FP32[5]))
onnx::ModelProto SequenceModel() {
  onnx::ModelProto m = NewModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::ValueInfoProto* seq = g->add_input();
  seq->set_name("seq");
  SetTensorType(seq->mutable_type()->mutable_sequence_type()->mutable_elem_type(),
                TensorProto::FLOAT, {"2"});
  onnx::ValueInfoProto* opt = g->add_input();
  opt->set_name("opt");
  SetTensorType(opt->mutable_type()
                    ->mutable_optional_type()
                    ->mutable_elem_type()
                    ->mutable_sequence_type()
                    ->mutable_elem_type(),
                TensorProto::INT64, {"N", "3"});
  AddInput(g, "x", TensorProto::FLOAT, {"2"});
  AddNode(g, "SequenceConstruct", {"x"}, {"built"});
  AddNode(g, "SequenceLength", {"built"}, {"n_built"});
  AddNode(g, "SequenceLength", {"seq"}, {"n"});
  AddNode(g, "OptionalHasElement", {"opt"}, {"has"});
  onnx::NodeProto* make = AddNode(g, "Optional", {}, {"empty"}, "make_empty");
  onnx::AttributeProto* type = make->add_attribute();
  type->set_name("type");
  type->set_type(onnx::AttributeProto::TYPE_PROTO);
  SetTensorType(type->mutable_tp()->mutable_sequence_type()->mutable_elem_type(),
                TensorProto::FLOAT, {"5"});
  AddOutput(g, "n", TensorProto::INT64, {});
  AddOutput(g, "n_built", TensorProto::INT64, {});
  AddOutput(g, "has", TensorProto::BOOL, {});
  onnx::ValueInfoProto* empty = g->add_output();
  empty->set_name("empty");
  *empty->mutable_type()->mutable_optional_type()->mutable_elem_type() = type->tp();
  return m;
}

TEST(OnnxImporterTest, SequenceAndOptionalTypes) {
  std::shared_ptr<Graph> graph = ImportOk(SequenceModel());
  ASSERT_NE(graph, nullptr);
  const ValueType& seq = ValueNamed(*graph, "seq").type;
  EXPECT_EQ(seq.kind, TypeKind::kSequence);
  ASSERT_NE(seq.elem, nullptr);
  EXPECT_EQ(seq.elem->dtype, DataType::kFloat32);
  EXPECT_EQ(seq.ToString(), "seq(FP32[2])");
  const ValueType& opt = ValueNamed(*graph, "opt").type;
  EXPECT_TRUE(opt.is_optional());
  ASSERT_NE(opt.elem, nullptr);
  EXPECT_TRUE(opt.elem->is_sequence());
  EXPECT_EQ(opt.ToString(), "optional(seq(INT64[N,3]))");
  // From ONNX shape inference.
  EXPECT_EQ(ValueNamed(*graph, "built").type.ToString(), "seq(FP32[2])");
  EXPECT_EQ(ValueNamed(*graph, "empty").type.ToString(), "optional(seq(FP32[5]))");
  EXPECT_EQ(ValueNamed(*graph, "n").type.ToString(), "INT64[]");
  ValueType unknown_elements;
  unknown_elements.kind = TypeKind::kSequence;
  EXPECT_EQ(unknown_elements.ToString(), "seq(?)");
  // The TYPE_PROTO attribute.
  const Node* make = nullptr;
  for (const Node& n : graph->nodes()) {
    if (n.name == "make_empty") make = &n;
  }
  ASSERT_NE(make, nullptr);
  const Attribute* type = make->FindAttribute("type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->type, AttributeType::kTypeProto);
  ASSERT_NE(type->tp, nullptr);
  EXPECT_EQ(type->tp->ToString(), "seq(FP32[5])");
}

TEST(OnnxImporterTest, UnsupportedValueKindsAreNamed) {
  {  // a map input
    onnx::ModelProto m = SequenceModel();
    onnx::ValueInfoProto* map = m.mutable_graph()->add_input();
    map->set_name("map");
    onnx::TypeProto_Map* t = map->mutable_type()->mutable_map_type();
    t->set_key_type(TensorProto::INT64);
    SetTensorType(t->mutable_value_type(), TensorProto::FLOAT, {});
    ExpectImportError(m, StatusCode::kUnimplemented,
                      "value 'map' has a map type; kiln supports tensors, sequences of tensors "
                      "and optionals");
  }
  {  // a sequence of sequences
    onnx::ModelProto m = SequenceModel();
    onnx::ValueInfoProto* nested = m.mutable_graph()->add_input();
    nested->set_name("nested");
    SetTensorType(nested->mutable_type()
                      ->mutable_sequence_type()
                      ->mutable_elem_type()
                      ->mutable_sequence_type()
                      ->mutable_elem_type(),
                  TensorProto::FLOAT, {});
    ExpectImportError(m, StatusCode::kUnimplemented,
                      "value 'nested' is a sequence of a sequence type; kiln supports sequences "
                      "of tensors only");
  }
  {  // an optional of an optional, in the Optional op's type attribute
    onnx::ModelProto m = SequenceModel();
    onnx::GraphProto* g = m.mutable_graph();
    for (onnx::NodeProto& n : *g->mutable_node()) {
      if (n.name() != "make_empty") continue;
      onnx::TypeProto nested;
      *nested.mutable_optional_type()
           ->mutable_elem_type()
           ->mutable_optional_type()
           ->mutable_elem_type() = n.attribute(0).tp();
      *n.mutable_attribute(0)->mutable_tp() = nested;
    }
    ExpectImportError(m, StatusCode::kUnimplemented,
                      "type attribute 'type' of node 'make_empty' (Optional) is an optional of an "
                      "optional type");
  }
}

// ---------------------------------------------------------------------------------------------
// Mutation test: corrupted models must give errors or graphs, never crashes.

TEST(OnnxImporterTest, MutatedModelsNeverCrash) {
  const std::string seeds[] = {RichModel().SerializeAsString(),
                               AttributeModel().SerializeAsString(),
                               SequenceModel().SerializeAsString()};
  spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::off);
  std::mt19937 rng(1234567);
  int accepted = 0;
  std::map<StatusCode, int> codes;
  for (int iter = 0; iter < 6000; ++iter) {
    const std::string bytes = testing::MutateBytes(seeds[iter % 3], rng);
    Result<std::shared_ptr<Graph>> g = ImportOnnxModelFromString(bytes, "mutant");
    if (g.ok()) {
      ++accepted;
      for (const Node& n : (*g)->nodes()) {
        for (int in : n.inputs) {
          if (in != kNoValue) {
            ASSERT_LT(in, (*g)->num_values());
          }
        }
      }
    } else {
      ++codes[g.status().code()];
      EXPECT_FALSE(g.status().message().empty());
      EXPECT_NE(g.status().code(), StatusCode::kInternal) << g.status().ToString();
    }
  }
  spdlog::set_level(level);
  std::cout << "mutants: " << accepted << " accepted";
  for (const auto& [code, n] : codes) std::cout << ", " << n << " " << StatusCodeName(code);
  std::cout << "\n";
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace kiln
