// SPDX-License-Identifier: Apache-2.0
// Tests for QDQ insertion (qdq.h) and the quantize workflow (quantizer.h): the structure of the
// QDQ contract on small graphs (activation pairs with shared scalar initializers, INT8 weights
// with the right axis, INT32 biases with scale x_s * w_s, residual Adds, FP32 graph outputs), the
// numerics of quantized Conv (padded, grouped, strided), Gemm and MatMul layers against the error
// bound derived from the scales (per tensor and per channel, UINT8 and INT8 activations), the
// metadata round trip, and the sensitivity ranking on a model with one known-fragile layer.

#include "quant/qdq.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "graph/onnx/exporter.h"
#include "graph/onnx/importer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "opt/opt_test_util.h"
#include "quant/calibration.h"
#include "quant/model_metadata.h"
#include "quant/quantizer.h"
#include "runtime/session.h"
#include "tensor/npy.h"

namespace kiln::quant {
namespace {

using opt::testing::FloatTensor;
using opt::testing::RandomTensor;
using opt::testing::TestGraph;

Dataset InMemory(OwnedTensor x) {
  Dataset d;
  d.num_samples = x.shape().dim(0);
  d.inputs.push_back(std::move(x));
  d.layout = "stacked";
  return d;
}

// Min/max calibration of every candidate activation on `data`.
std::map<int, ActivationParams> Calibrate(const Graph& g, const std::vector<QuantizableLayer>& l,
                                          const Dataset& data) {
  auto hists = CollectHistograms(g, ActivationsToCalibrate(g, l), data, RunOptions{}).value();
  std::map<int, ActivationParams> params;
  for (const auto& [id, h] : hists) {
    const TensorRange r = ComputeRange(h, CalibrationMethod::kMinMax);
    params[id] = ComputeActivationParams(r.min, r.max, ActivationType::kUint8).value();
  }
  return params;
}

const Node* ProducerOf(const Graph& g, int v) {
  const int p = g.value(v).producer;
  return p < 0 ? nullptr : &g.node(p);
}

std::vector<const Node*> NodesOf(const Graph& g, const std::string& op) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes()) {
    if (n.op_type == op) out.push_back(&n);
  }
  return out;
}

// Checks that `v` is the output of DequantizeLinear(QuantizeLinear(x, s, zp), s, zp) with scalar
// FP32 s and UINT8 zp; returns x.
int ExpectActivationQdq(const Graph& g, int v) {
  const Node* dq = ProducerOf(g, v);
  EXPECT_NE(dq, nullptr);
  if (dq == nullptr) return -1;
  EXPECT_EQ(dq->op_type, "DequantizeLinear");
  const Node* q = ProducerOf(g, dq->inputs[0]);
  EXPECT_NE(q, nullptr);
  if (q == nullptr) return -1;
  EXPECT_EQ(q->op_type, "QuantizeLinear");
  EXPECT_EQ(q->inputs[1], dq->inputs[1]);  // the same scale initializer
  EXPECT_EQ(q->inputs[2], dq->inputs[2]);  // the same zero point initializer
  EXPECT_EQ(g.value(q->inputs[1]).constant->shape().rank(), 0);
  EXPECT_EQ(g.value(q->inputs[1]).constant->dtype(), DataType::kFloat32);
  EXPECT_EQ(g.value(q->inputs[2]).constant->dtype(), DataType::kUint8);
  return q->inputs[0];
}

TEST(QdqTest, ConvChainStructure) {
  std::mt19937 rng(5);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 3, 6, 6});
  const int c1 = t.Op("Conv", {x, t.Random("w1", {4, 3, 3, 3}, rng), t.Random("b1", {4}, rng)},
                      {Attribute::Ints("pads", {1, 1, 1, 1})}, {{-1, 4, 6, 6}});
  const int r1 = t.Op("Relu", {c1}, {}, {{-1, 4, 6, 6}});
  const int c2 = t.Op("Conv", {r1, t.Random("w2", {4, 4, 1, 1}, rng)}, {}, {{-1, 4, 6, 6}});
  // A residual join of two quantized tensors, then a last Conv whose output is the graph's.
  const int add = t.Op("Add", {r1, c2}, {}, {{-1, 4, 6, 6}});
  const int y = t.Op("Conv", {add, t.Random("w3", {2, 4, 1, 1}, rng)}, {}, {{-1, 2, 6, 6}});
  t.Output(y);
  std::shared_ptr<const Graph> g = t.Build();
  const std::vector<QuantizableLayer> layers = FindQuantizableLayers(*g);
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].output_point, r1);  // after the Relu
  EXPECT_EQ(layers[0].bias_input, 2);
  EXPECT_EQ(layers[1].output_point, c2);
  EXPECT_EQ(layers[2].output_point, -1);  // a graph output stays FP32
  const std::vector<int> cal = ActivationsToCalibrate(*g, layers);
  EXPECT_EQ(cal, (std::vector<int>{x, r1, c2, add}));

  Dataset data = InMemory(RandomTensor(Shape{8, 3, 6, 6}, rng));
  const auto params = Calibrate(*g, layers, data);
  QdqOptions options;
  options.per_channel = true;
  QdqResult q = InsertQdq(*g, layers, {true, true, true}, params, options).value();
  const Graph& qg = *q.graph;
  EXPECT_EQ(q.qdq_pairs, 4);
  EXPECT_EQ(NodesOf(qg, "QuantizeLinear").size(), 4u);
  // 4 activation DQs, 3 weights, 1 bias.
  EXPECT_EQ(NodesOf(qg, "DequantizeLinear").size(), 8u);
  const std::vector<const Node*> convs = NodesOf(qg, "Conv");
  ASSERT_EQ(convs.size(), 3u);
  EXPECT_EQ(qg.value(ExpectActivationQdq(qg, convs[0]->inputs[0])).name, "x");
  // Weight: INT8 constant, per-channel FP32 scales [C_out], INT8 zero zero points, axis 0.
  const Node* wdq = ProducerOf(qg, convs[0]->inputs[1]);
  ASSERT_NE(wdq, nullptr);
  EXPECT_EQ(wdq->op_type, "DequantizeLinear");
  EXPECT_EQ(qg.value(wdq->inputs[0]).constant->dtype(), DataType::kInt8);
  EXPECT_EQ(qg.value(wdq->inputs[1]).constant->shape(), (Shape{4}));
  EXPECT_EQ(qg.value(wdq->inputs[2]).constant->dtype(), DataType::kInt8);
  EXPECT_EQ(wdq->GetInt("axis", -1), 0);
  // Bias: INT32 with scale x_s * w_s[c], zero point 0.
  const Node* bdq = ProducerOf(qg, convs[0]->inputs[2]);
  ASSERT_NE(bdq, nullptr);
  EXPECT_EQ(qg.value(bdq->inputs[0]).constant->dtype(), DataType::kInt32);
  const float x_s = params.at(x).scale;
  for (int c = 0; c < 4; ++c) {
    EXPECT_FLOAT_EQ(qg.value(bdq->inputs[1]).constant->data<float>()[c],
                    x_s * qg.value(wdq->inputs[1]).constant->data<float>()[c]);
  }
  // Conv 1 -> Relu -> Q -> DQ -> Conv 2 and the Add; the Add reads two DQs, its output is
  // quantized, and the last Conv reads that.
  const int r1_src = ExpectActivationQdq(qg, convs[1]->inputs[0]);
  EXPECT_EQ(ProducerOf(qg, r1_src)->op_type, "Relu");
  const Node* add_node = NodesOf(qg, "Add")[0];
  EXPECT_EQ(ExpectActivationQdq(qg, add_node->inputs[0]), r1_src);
  EXPECT_EQ(ProducerOf(qg, ExpectActivationQdq(qg, add_node->inputs[1]))->op_type, "Conv");
  EXPECT_EQ(ProducerOf(qg, ExpectActivationQdq(qg, convs[2]->inputs[0]))->op_type, "Add");
  EXPECT_EQ(ProducerOf(qg, qg.outputs[0])->op_type, "Conv");
  EXPECT_EQ(qg.value(qg.outputs[0]).name, g->value(y).name);
  // No FP32 weight is left behind.
  for (const Value& v : qg.values()) {
    if (v.is_constant() && v.constant->dtype() == DataType::kFloat32) {
      EXPECT_LE(v.constant->num_elements(), 4) << v.name;
    }
  }
  // It runs, and exports and imports again as standard ONNX.
  std::unique_ptr<Session> s = Session::Create(q.graph).value();
  std::vector<Tensor> in = {data.inputs[0].view()};
  EXPECT_TRUE(s->Run(in).ok());
  const std::string bytes = ExportOnnxModel(qg).value();
  EXPECT_TRUE(ImportOnnxModelFromString(bytes, "qdq").ok());

  // Keeping the middle layer in FP32: its weight stays FP32, its input (r1, also the Add's) is
  // still quantized, and the Add's output is quantized as the last Conv's input, not as a join.
  q = InsertQdq(*g, layers, {true, false, true}, params, options).value();
  EXPECT_EQ(q.qdq_pairs, 3);  // x, r1, add
  EXPECT_EQ(NodesOf(*q.graph, "DequantizeLinear").size(), 3u + 2u + 1u);
  EXPECT_EQ(ProducerOf(*q.graph, NodesOf(*q.graph, "Add")[0]->inputs[1])->op_type, "Conv");
}

// y = x W + b (Gemm, transB as given) quantized alone: the output error is bounded per element by
// sum_k |x_k| dw + |W_kj| dx + dx dw, plus the bias's rounding (dx, dw: half the scales).
void CheckGemmNumerics(bool trans_b, bool per_channel) {
  std::mt19937 rng(11);
  const int64_t k = 24, n = 10;
  TestGraph t(13);
  const int x = t.Input("x", {-1, k});
  std::vector<int64_t> wdims = trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  const int w = t.Random("w", wdims, rng);
  const int y = t.Op("Gemm", {x, w, t.Random("b", {n}, rng)},
                     {Attribute::Int("transB", trans_b ? 1 : 0)}, {{-1, n}});
  t.Output(y);
  std::shared_ptr<const Graph> g = t.Build();
  const std::vector<QuantizableLayer> layers = FindQuantizableLayers(*g);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].weight_axis, trans_b ? 0 : 1);
  Dataset data = InMemory(RandomTensor(Shape{16, k}, rng, -2, 3));
  const auto params = Calibrate(*g, layers, data);
  QdqOptions options;
  options.per_channel = per_channel;
  QdqResult q = InsertQdq(*g, layers, {true}, params, options).value();
  const Node* wdq = ProducerOf(*q.graph, NodesOf(*q.graph, "Gemm")[0]->inputs[1]);
  if (per_channel) {
    EXPECT_EQ(wdq->GetInt("axis", -1), trans_b ? 0 : 1);
  } else {
    EXPECT_EQ(wdq->FindAttribute("axis"), nullptr);
  }
  std::vector<float> w_scales;
  const OwnedTensor& ws = *q.graph->value(wdq->inputs[1]).constant;
  for (int64_t i = 0; i < ws.num_elements(); ++i) w_scales.push_back(ws.data<float>()[i]);

  SessionOptions so;
  so.kernel_provider = "ref";
  std::vector<Tensor> in = {data.inputs[0].view()};
  const OwnedTensor ref = Session::Create(g, so).value()->Run(in).value()[0];
  const OwnedTensor got = Session::Create(q.graph, so).value()->Run(in).value()[0];
  const float dx = params.at(x).scale / 2;
  const float* xv = data.inputs[0].data<float>();
  const float* wv = g->value(w).constant->data<float>();
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const float dw = (per_channel ? w_scales[static_cast<size_t>(j)] : w_scales[0]) / 2;
      double bound = dx * dw * 2;  // the bias's rounding: half of x_s * w_s
      for (int64_t i = 0; i < k; ++i) {
        const float wij = trans_b ? wv[j * k + i] : wv[i * n + j];
        bound += std::fabs(xv[r * k + i]) * dw + std::fabs(wij) * dx + dx * dw;
      }
      const float a = ref.data<float>()[r * n + j], b = got.data<float>()[r * n + j];
      EXPECT_LE(std::fabs(a - b), bound * 1.01 + 1e-6) << "row " << r << " col " << j;
    }
  }
}

TEST(QdqTest, GemmNumericsWithinTheQuantizationBound) {
  CheckGemmNumerics(false, false);
  CheckGemmNumerics(false, true);
  CheckGemmNumerics(true, true);
}

// The same bound for any linear layer, computed by running the layer itself on absolute values:
// |y_q - y| <= L(|x|, dw) + L(dx, |W|) + L(dx, dw) + db, where L is the layer without bias, dx
// and dw are tensors of half the scales (per element of x and of W) and db half the bias scale.
// Checked for Conv (padded, grouped), Gemm and MatMul, per tensor and per channel, with
// asymmetric and symmetric activations.
struct LinearCase {
  std::string op;
  std::vector<int64_t> x_dims, w_dims, y_dims;
  std::vector<Attribute> attrs;
  bool bias = true;
};

void CheckLinearBound(const LinearCase& c, bool per_channel, ActivationType act) {
  SCOPED_TRACE(c.op + (per_channel ? " per channel" : " per tensor") +
               (act == ActivationType::kInt8 ? " int8" : " uint8"));
  std::mt19937 rng(17);
  const int64_t c_out = c.op == "Conv" ? c.w_dims[0] : c.w_dims[1];
  TestGraph t(13);
  std::vector<int64_t> xd = c.x_dims;
  xd[0] = -1;
  const int x = t.Input("x", xd);
  const int w = t.Random("w", c.w_dims, rng);
  std::vector<int> ins = {x, w};
  if (c.bias) ins.push_back(t.Random("b", {c_out}, rng));
  std::vector<int64_t> yd = c.y_dims;
  yd[0] = -1;
  t.Output(t.Op(c.op, ins, c.attrs, {yd}));
  std::shared_ptr<const Graph> g = t.Build();
  const std::vector<QuantizableLayer> layers = FindQuantizableLayers(*g);
  ASSERT_EQ(layers.size(), 1u);
  Dataset data = InMemory(RandomTensor(Shape(std::span<const int64_t>(c.x_dims)), rng, -1, 2));
  auto hists =
      CollectHistograms(*g, ActivationsToCalibrate(*g, layers), data, RunOptions{}).value();
  std::map<int, ActivationParams> params;
  for (const auto& [id, h] : hists) {
    params[id] = ComputeActivationParams(h.min(), h.max(), act).value();
  }
  QdqOptions options;
  options.per_channel = per_channel;
  QdqResult q = InsertQdq(*g, layers, {true}, params, options).value();
  const Graph& qg = *q.graph;
  const Node* layer = NodesOf(qg, c.op)[0];
  const Node* xq = ProducerOf(qg, ProducerOf(qg, layer->inputs[0])->inputs[0]);
  EXPECT_EQ(qg.value(xq->inputs[2]).constant->dtype(),
            act == ActivationType::kUint8 ? DataType::kUint8 : DataType::kInt8);
  const OwnedTensor& ws = *qg.value(ProducerOf(qg, layer->inputs[1])->inputs[1]).constant;

  // The layer alone with x and W as inputs, no bias: evaluates L(., .).
  TestGraph lt(13);
  const int lx = lt.Input("x", c.x_dims);
  const int lw = lt.Input("w", c.w_dims);
  lt.Output(lt.Op(c.op, {lx, lw}, c.attrs, {c.y_dims}));
  SessionOptions so;
  so.kernel_provider = "ref";
  std::unique_ptr<Session> l = Session::Create(lt.Build(), so).value();
  auto run_l = [&](const OwnedTensor& a, const OwnedTensor& b) {
    std::vector<Tensor> in = {a.view(), b.view()};
    return l->Run(in).value()[0];
  };
  const float dx = params.at(x).scale / 2;
  const OwnedTensor& wv = *g->value(w).constant;
  OwnedTensor abs_x = OwnedTensor::CopyOf(data.inputs[0].view()).value();
  for (int64_t i = 0; i < abs_x.num_elements(); ++i)
    abs_x.data<float>()[i] = std::fabs(abs_x.data<float>()[i]);
  OwnedTensor abs_w = OwnedTensor::CopyOf(wv.view()).value();
  OwnedTensor dw = OwnedTensor::CopyOf(wv.view()).value();
  // The output channel of weight element e: axis 0 (Conv) or axis 1 (Gemm/MatMul [K, N]).
  const int64_t inner = c.op == "Conv" ? wv.num_elements() / c_out : 1;
  for (int64_t e = 0; e < wv.num_elements(); ++e) {
    abs_w.data<float>()[e] = std::fabs(wv.data<float>()[e]);
    const int64_t ch = (e / inner) % c_out;
    dw.data<float>()[e] = (per_channel ? ws.data<float>()[ch] : ws.data<float>()[0]) / 2;
  }
  OwnedTensor dx_t = OwnedTensor::CopyOf(data.inputs[0].view()).value();
  for (int64_t i = 0; i < dx_t.num_elements(); ++i) dx_t.data<float>()[i] = dx;
  const OwnedTensor b1 = run_l(abs_x, dw), b2 = run_l(dx_t, abs_w), b3 = run_l(dx_t, dw);

  std::vector<Tensor> in = {data.inputs[0].view()};
  const OwnedTensor ref = Session::Create(g, so).value()->Run(in).value()[0];
  const OwnedTensor got = Session::Create(q.graph, so).value()->Run(in).value()[0];
  ASSERT_EQ(ref.shape(), got.shape());
  const int64_t spatial = ref.num_elements() / c.y_dims[0] / c_out;
  int64_t checked = 0;
  double worst = 0;
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    const int64_t ch = c.op == "Conv" ? (i / spatial) % c_out : i % c_out;
    const double db = c.bias
                          ? 2 * dx * (per_channel ? ws.data<float>()[ch] : ws.data<float>()[0]) / 2
                          : 0;  // half of x_s * w_s
    const double bound = b1.data<float>()[i] + b2.data<float>()[i] + b3.data<float>()[i] + db;
    const double err = std::fabs(ref.data<float>()[i] - got.data<float>()[i]);
    worst = std::max(worst, err / bound);
    EXPECT_LE(err, bound * 1.001 + 1e-6) << "element " << i;
    ++checked;
  }
  EXPECT_EQ(checked, ref.num_elements());
  EXPECT_GT(worst, 0.0);  // quantization did change the output
}

TEST(QdqTest, LinearLayersWithinTheQuantizationBound) {
  const std::vector<LinearCase> cases = {
      {"Conv", {3, 4, 7, 6}, {6, 4, 3, 3}, {3, 6, 7, 6}, {Attribute::Ints("pads", {1, 1, 1, 1})}},
      {"Conv",
       {2, 4, 5, 5},
       {4, 2, 3, 3},
       {2, 4, 2, 2},
       {Attribute::Int("group", 2), Attribute::Ints("strides", {2, 2})},
       false},
      {"Gemm", {5, 9}, {9, 7}, {5, 7}, {}},
      {"MatMul", {5, 9}, {9, 7}, {5, 7}, {}, false},
  };
  for (const LinearCase& c : cases) {
    for (bool per_channel : {false, true}) {
      for (ActivationType act : {ActivationType::kUint8, ActivationType::kInt8}) {
        CheckLinearBound(c, per_channel, act);
      }
    }
  }
}

TEST(QdqTest, ScalesSharedThroughDataMovement) {
  std::mt19937 rng(9);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 2, 4, 4});
  const int r =
      t.Op("Relu", {t.Op("Conv", {x, t.Random("w", {3, 2, 1, 1}, rng)}, {}, {{-1, 3, 4, 4}})}, {},
           {{-1, 3, 4, 4}});
  const int pool = t.Op(
      "MaxPool", {r}, {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})},
      {{-1, 3, 2, 2}});
  const int flat = t.Op("Flatten", {pool}, {}, {{-1, 12}});
  t.Output(t.Op("Gemm", {flat, t.Random("g", {12, 5}, rng)}, {}, {{-1, 5}}));
  std::shared_ptr<const Graph> g = t.Build();
  std::map<int, ActivationParams> params = {{x, {0.1f, 3, ActivationType::kUint8}},
                                            {r, {0.05f, 0, ActivationType::kUint8}},
                                            {flat, {0.04f, 0, ActivationType::kUint8}}};
  EXPECT_EQ(ShareScalesThroughDataMovement(*g, params), 1);
  EXPECT_EQ(params.at(flat).scale, 0.05f);  // from the Relu output, through MaxPool + Flatten
  EXPECT_EQ(params.at(x).scale, 0.1f);
  // Other readers of the source do not matter; an op that computes (Sigmoid) ends the chain.
  TestGraph u(13);
  const int ux = u.Input("x", {-1, 4});
  const int ut = u.Op("Transpose", {ux}, {Attribute::Ints("perm", {1, 0})}, {{4, -1}});
  const int us = u.Op("Sigmoid", {ux}, {}, {{-1, 4}});
  u.Output(ut);
  u.Output(u.Op("Reshape", {us, u.Const("shape", opt::testing::Int64Tensor(Shape{1}, {-1}))}, {},
                {{-1}}));
  std::shared_ptr<const Graph> ug = u.Build();
  const int ur = ug->outputs[1];
  std::map<int, ActivationParams> p2 = {{ux, {0.5f, 0, ActivationType::kUint8}},
                                        {ut, {0.25f, 0, ActivationType::kUint8}},
                                        {ur, {0.125f, 0, ActivationType::kUint8}}};
  EXPECT_EQ(ShareScalesThroughDataMovement(*ug, p2), 1);
  EXPECT_EQ(p2.at(ut).scale, 0.5f);
  EXPECT_EQ(p2.at(ur).scale, 0.125f);
}

TEST(QdqTest, MatMulOfTwoActivationsAndOldOpsets) {
  TestGraph t(12);
  const int a = t.Input("a", {2, 3});
  const int b = t.Input("b", {3, 4});
  t.Output(t.Op("MatMul", {a, b}, {}, {{2, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  const std::vector<QuantizableLayer> layers = FindQuantizableLayers(*g);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].activation_inputs, (std::vector<int>{a, b}));
  EXPECT_EQ(layers[0].weight_input, -1);
  std::map<int, ActivationParams> params = {{a, {}}, {b, {}}};
  QdqOptions options;
  EXPECT_EQ(InsertQdq(*g, layers, {true}, params, options)->qdq_pairs, 2);
  options.per_channel = true;  // opset 12: per-axis DequantizeLinear needs 13
  Result<QdqResult> r = InsertQdq(*g, layers, {true}, params, options);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  params.erase(b);
  options.per_channel = false;
  EXPECT_EQ(InsertQdq(*g, layers, {true}, params, options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ModelMetadataTest, RoundTripAndHash) {
  TestGraph t(13);
  t.Output(t.Op("Relu", {t.Input("x", {2})}, {}, {{2}}));
  std::string bytes = ExportOnnxModel(*t.Build()).value();
  AppendMetadata(bytes, {{"a", "1"}, {"kiln.quantize.source", "/m/x.onnx"}});
  auto props = ReadMetadata(bytes).value();
  EXPECT_EQ(props.at("a"), "1");
  EXPECT_EQ(props.at("kiln.quantize.source"), "/m/x.onnx");
  EXPECT_TRUE(ImportOnnxModelFromString(bytes, "with metadata").ok());
  EXPECT_FALSE(ReadMetadata(std::string("\x72\xff", 2)).ok());
  EXPECT_EQ(ContentHash(""), "fnv1a64:cbf29ce484222325");
  EXPECT_NE(ContentHash("a"), ContentHash("b"));
}

// x -> Gemm1 -> Relu -> Gemm2 -> Relu -> Gemm3 -> y, where Gemm2's weight has one huge input row
// that only ever meets zeros (Gemm1's channel 0 is always negative before its Relu). Per tensor,
// that row sets Gemm2's weight scale and wipes out all its other weights, while the activations
// stay ordinary: Gemm2 alone is fragile.
class FragileLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("kiln_quant_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "calib");
    std::mt19937 rng(21);
    const int64_t k = 16;
    TestGraph t(13);
    const int x = t.Input("x", {-1, k});
    OwnedTensor w1 = RandomTensor(Shape{k, k}, rng);
    OwnedTensor b1 = RandomTensor(Shape{k}, rng, 0, 0.5);
    for (int64_t i = 0; i < k; ++i) w1.data<float>()[i * k] = 0;  // column 0 ...
    b1.data<float>()[0] = -1;                                     // ... always -1
    OwnedTensor w2 = RandomTensor(Shape{k, k}, rng);
    for (int64_t j = 0; j < k; ++j) w2.data<float>()[j] = 1000;  // row 0 huge
    const int h1 =
        t.Op("Relu",
             {t.Op("Gemm", {x, t.Const("w1", std::move(w1)), t.Const("b1", std::move(b1))}, {},
                   {{-1, k}})},
             {}, {{-1, k}});
    const int h2 = t.Op(
        "Relu",
        {t.Op("Gemm", {h1, t.Const("w2", std::move(w2)), t.Random("b2", {k}, rng)}, {}, {{-1, k}})},
        {}, {{-1, k}});
    t.Output(
        t.Op("Gemm", {h2, t.Random("w3", {k, 4}, rng), t.Random("b3", {4}, rng)}, {}, {{-1, 4}}));
    // Names the report shows.
    for (int n = 0; n < t.graph().num_nodes(); ++n) {
      t.graph().mutable_node(n).name = "node" + std::to_string(n);
    }
    model_ = (dir_ / "fragile.onnx").string();
    ASSERT_TRUE(WriteOnnxModel(*t.Build(), model_).ok());
    OwnedTensor data = RandomTensor(Shape{64, k}, rng, -1, 1);
    const std::string npy = WriteNpy(data.view()).value();
    ASSERT_TRUE(WriteFile((dir_ / "calib" / "inputs.npy").string(), npy, "data").ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  QuantizeOptions Options() {
    QuantizeOptions o;
    o.model = model_;
    o.calib_dir = (dir_ / "calib").string();
    o.out = (dir_ / "fragile.int8.onnx").string();
    return o;
  }

  std::filesystem::path dir_;
  std::string model_;
};

TEST_F(FragileLayerTest, RanksFirstAndKeepFp32KeepsIt) {
  QuantizeOptions o = Options();
  o.keep_fp32 = 1;
  QuantizeReport r = QuantizeModel(o).value();
  ASSERT_EQ(r.layers.size(), 3u);
  // Gemm2 (node2: Gemm1, Relu, Gemm2, ...) has by far the largest output error.
  const LayerReport& fragile = r.layers[1];
  EXPECT_EQ(fragile.name, "node2");
  ASSERT_TRUE(fragile.output_error.has_value());
  for (size_t i : {0u, 2u}) {
    ASSERT_TRUE(r.layers[i].output_error.has_value());
    EXPECT_GT(*fragile.output_error, 10 * *r.layers[i].output_error);
    EXPECT_TRUE(r.layers[i].quantized);
  }
  EXPECT_FALSE(fragile.quantized);
  EXPECT_GT(r.quantized.mean_cosine, 0.999);
  // The written model runs in kiln, and records its source.
  EXPECT_TRUE(ImportOnnxModel(o.out).ok());

  // All layers quantized: the fragile one ruins the output.
  QuantizeReport all = QuantizeModel(Options()).value();
  EXPECT_LT(all.quantized.mean_cosine, r.quantized.mean_cosine);
  EXPECT_FALSE(all.layers[0].output_error.has_value());  // no sensitivity asked for

  // A budget (output error points, no labels) is met by keeping the fragile layer alone.
  QuantizeOptions b = Options();
  b.max_accuracy_drop = 0.1;
  QuantizeReport rb = QuantizeModel(b).value();
  EXPECT_FALSE(rb.layers[1].quantized);
  EXPECT_TRUE(rb.layers[0].quantized);
  EXPECT_LE(100 * (1 - rb.quantized.mean_cosine), 0.1);
  // An impossible budget says so and writes nothing.
  std::filesystem::remove(b.out);
  b.max_accuracy_drop = 0.0;
  b.out = (dir_ / "never.onnx").string();
  Result<QuantizeReport> never = QuantizeModel(b);
  EXPECT_EQ(never.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(never.status().message().find("cannot meet"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(b.out));
}

// --target-cpu: the weight range chosen, recorded in the file and the report, and native
// following the CPU as the kernels see it (ONEDNN_MAX_CPU_ISA lowers it).
TEST_F(FragileLayerTest, TargetCpuChoosesTheWeightRange) {
  const bool vnni = CpuKernelsHaveInt8DotProducts();
  for (const char* target : {"avx2", "vnni", "native"}) {
    SCOPED_TRACE(target);
    QuantizeOptions o = Options();
    o.target_cpu = target;
    QuantizeReport r = QuantizeModel(o).value();
    const bool eight = std::string(target) == "vnni" || (std::string(target) == "native" && vnni);
    EXPECT_EQ(r.target.cpu, eight ? "vnni" : "avx2");
    EXPECT_EQ(r.target.weight_bits, eight ? 8 : 7);
    EXPECT_NE(FormatQuantizeReport(r).find(eight ? "8-bit weights" : "7-bit weights"),
              std::string::npos);
    EXPECT_NE(QuantizeReportJson(r).find(fmt::format("\"weight_bits\": {}", eight ? 8 : 7)),
              std::string::npos);
    // The INT8 weights in the file stay within the range, and reach its end.
    std::shared_ptr<Graph> g = ImportOnnxModel(o.out).value();
    int max_abs = 0;
    for (int v = 0; v < g->num_values(); ++v) {
      const Value& value = g->value(v);
      if (value.constant == nullptr || value.constant->dtype() != DataType::kInt8) continue;
      for (int64_t i = 0; i < value.constant->num_elements(); ++i) {
        max_abs = std::max(max_abs, std::abs(int{value.constant->data<const int8_t>()[i]}));
      }
    }
    EXPECT_EQ(max_abs, eight ? 127 : 64);
    std::ifstream in(o.out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto props = ReadMetadata(bytes).value();
    EXPECT_EQ(props.at(std::string(kTargetCpuKey)), eight ? "vnni" : "avx2");
    EXPECT_EQ(props.at(std::string(kWeightBitsKey)), eight ? "8" : "7");
  }
  QuantizeOptions bad = Options();
  bad.target_cpu = "avx9";
  EXPECT_EQ(QuantizeModel(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::quant
