// SPDX-License-Identifier: Apache-2.0
// qdq_fusion: QDQ graphs built as `kiln quantize` and the ONNX Runtime quantizer write them
// (op/kiln_ops.h's INT8 section states the contract) become QConv / QMatMul. Each test checks
// the structure (the INT8 op is there, no FP32 Conv / MatMul / Gemm is left, INT8 is kept
// between consecutive quantized ops, constant folding left the INT8 weights alone) and the
// numerics: the optimized graph on the default (fastest) kernels against the original graph on
// the reference kernels, on the same random inputs, within 2 steps of the output's quantization
// scale (the INT8 path sums exactly in integers where the original sums in FP32, so a value
// near a rounding boundary may land one step away, and that step can move the next layer's
// output by a fraction of its own step).

#include <gtest/gtest.h>

#include <cmath>

#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

template <typename T>
OwnedTensor TypedTensor(DataType dtype, const Shape& shape, const std::vector<T>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->template data<T>()[i] = values[i];
  return std::move(t).value();
}

// Adds graph pieces in the QDQ format.
class QdqBuilder {
 public:
  QdqBuilder(TestGraph& t, std::mt19937& rng) : t_(t), rng_(rng) {}

  // QuantizeLinear then DequantizeLinear of `x` (FP32, dims `dims`) with scale `s` and a UINT8
  // zero point `zp` (INT8 zero point 0 when `symmetric`).
  int Qdq(int x, float s, int zp, const std::vector<int64_t>& dims, bool symmetric = false) {
    int q = QuantizeOnly(x, s, zp, dims, symmetric);
    return t_.Op("DequantizeLinear", {q, last_scale_, last_zp_}, {}, dims);
  }
  int QuantizeOnly(int x, float s, int zp, const std::vector<int64_t>& dims, bool symmetric) {
    last_scale_ = t_.Scalar(Name("s"), s);
    last_zp_ = symmetric ? t_.Const(Name("zp"), TypedTensor<int8_t>(DataType::kInt8, Shape{}, {0}))
                         : t_.Const(Name("zp"),
                                    TypedTensor<uint8_t>(DataType::kUint8, Shape{}, {uint8_t(zp)}));
    return t_.Op("QuantizeLinear", {x, last_scale_, last_zp_}, {}, dims,
                 symmetric ? DataType::kInt8 : DataType::kUint8);
  }

  // A random FP32 weight quantized symmetric INT8 along `axis` (per channel) or per tensor, and
  // its DequantizeLinear. Returns the DQ output; `scales` receives the scales.
  int Weight(const std::vector<int64_t>& dims, int axis, bool per_channel,
             std::vector<float>* scales = nullptr) {
    const Shape shape{std::span<const int64_t>(dims)};
    OwnedTensor w = RandomTensor(shape, rng_, -0.5, 0.5);
    const int64_t channels = per_channel ? dims[size_t(axis)] : 1;
    int64_t inner = 1;
    for (size_t i = size_t(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
    std::vector<float> s(static_cast<size_t>(channels), 0.0f);
    auto channel = [&](int64_t e) { return per_channel ? (e / inner) % channels : 0; };
    for (int64_t e = 0; e < shape.NumElements(); ++e) {
      float& m = s[size_t(channel(e))];
      m = std::max(m, std::abs(w.data<float>()[e]) / 127.0f);
    }
    std::vector<int8_t> q(static_cast<size_t>(shape.NumElements()));
    for (int64_t e = 0; e < shape.NumElements(); ++e) {
      q[size_t(e)] = int8_t(std::nearbyint(w.data<float>()[e] / s[size_t(channel(e))]));
    }
    if (scales) *scales = s;
    const int wq = t_.Const(Name("wq"), TypedTensor<int8_t>(DataType::kInt8, shape, q));
    const Shape ps = per_channel ? Shape{channels} : Shape{};
    const int sv = t_.Const(Name("ws"), FloatTensor(ps, s));
    const int zv = t_.Const(
        Name("wzp"), TypedTensor<int8_t>(DataType::kInt8, ps, std::vector<int8_t>(s.size(), 0)));
    return t_.Op("DequantizeLinear", {wq, sv, zv}, {Attribute::Int("axis", axis)}, dims);
  }

  // INT32 bias quantized with scale x_scale * w_scale[c] (the ONNX Runtime quantizer's
  // convention), and its DequantizeLinear.
  int Bias(int64_t channels, float x_scale, const std::vector<float>& w_scale) {
    std::vector<float> s(static_cast<size_t>(channels));
    std::vector<int32_t> q(static_cast<size_t>(channels));
    std::uniform_real_distribution<float> dist(-0.3f, 0.3f);
    for (int64_t c = 0; c < channels; ++c) {
      s[size_t(c)] = x_scale * w_scale[w_scale.size() == 1 ? 0 : size_t(c)];
      q[size_t(c)] = int32_t(std::nearbyint(dist(rng_) / s[size_t(c)]));
    }
    const int bq = t_.Const(Name("bq"), TypedTensor<int32_t>(DataType::kInt32, Shape{channels}, q));
    const int bs = t_.Const(Name("bs"), FloatTensor(Shape{channels}, s));
    const int bz = t_.Const(Name("bzp"), TypedTensor<int32_t>(DataType::kInt32, Shape{channels},
                                                              std::vector<int32_t>(q.size(), 0)));
    return t_.Op("DequantizeLinear", {bq, bs, bz}, {Attribute::Int("axis", 0)}, {{channels}});
  }

 private:
  std::string Name(const char* base) { return std::string(base) + std::to_string(counter_++); }

  TestGraph& t_;
  std::mt19937& rng_;
  int counter_ = 0;
  int last_scale_ = -1, last_zp_ = -1;
};

// Original on the reference kernels, optimized on the default kernels: every output within
// `tol` absolutely, and at least `min_exact` of the elements bit-identical.
void ExpectWithinQuantization(const Graph& original, const Graph& optimized, double tol,
                              double min_exact = 0.9, int64_t batch = 2) {
  std::mt19937 rng(17);
  std::vector<OwnedTensor> inputs = RandomInputs(original, rng, batch);
  SessionOptions ref_options;
  ref_options.kernel_provider = "ref";
  Result<std::unique_ptr<Session>> a_session =
      Session::Create(std::make_shared<const Graph>(original), ref_options);
  ASSERT_TRUE(a_session.ok()) << a_session.status().ToString();
  Result<std::unique_ptr<Session>> b_session =
      Session::Create(std::make_shared<const Graph>(optimized));
  ASSERT_TRUE(b_session.ok()) << b_session.status().ToString();
  std::vector<Tensor> views;
  views.reserve(inputs.size());
  for (const OwnedTensor& t : inputs) views.push_back(t.view());
  Result<std::vector<OwnedTensor>> a = (*a_session)->Run(views);
  Result<std::vector<OwnedTensor>> b = (*b_session)->Run(views);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const OwnedTensor& x = (*a)[i];
    const OwnedTensor& y = (*b)[i];
    ASSERT_EQ(x.dtype(), DataType::kFloat32);
    ASSERT_EQ(y.dtype(), DataType::kFloat32);
    ASSERT_EQ(x.shape(), y.shape());
    int64_t exact = 0;
    int reported = 0;
    for (int64_t k = 0; k < x.num_elements(); ++k) {
      const double d = std::abs(double(x.data<const float>()[k]) - y.data<const float>()[k]);
      if (d == 0) ++exact;
      if (d > tol && reported++ < 5) {
        ADD_FAILURE() << "output " << i << " element " << k << ": original "
                      << x.data<const float>()[k] << ", optimized " << y.data<const float>()[k];
      }
    }
    EXPECT_GE(double(exact), min_exact * double(x.num_elements())) << "output " << i;
  }
}

const Node* FindOp(const Graph& g, std::string_view op, int nth = 0) {
  for (const Node& n : g.nodes()) {
    if (n.op_type == op && nth-- == 0) return &n;
  }
  return nullptr;
}

// x -> QDQ -> Conv(3x3, INT32 bias) -> Relu -> QDQ -> Conv(1x1, stride 2, FP32 bias) -> QDQ ->
// output; the first conv grouped when `group` > 1.
std::shared_ptr<const Graph> ConvChain(std::mt19937& rng, int64_t group) {
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const int64_t c = 16;
  const int x = t.Input("x", {-1, c, 10, 10});
  const float xs = 2.0f / 255;
  const int xd = q.Qdq(x, xs, 128, {-1, c, 10, 10});
  std::vector<float> w1s;
  const int w1 = q.Weight({24, c / group, 3, 3}, 0, true, &w1s);
  const int b1 = q.Bias(24, xs, w1s);
  std::vector<Attribute> a1 = {Attribute::Ints("pads", {1, 1, 1, 1})};
  if (group != 1) a1.push_back(Attribute::Int("group", group));
  const int conv1 = t.Op("Conv", {xd, w1, b1}, a1, {{-1, 24, 10, 10}});
  const int relu = t.Op("Relu", {conv1}, {}, {{-1, 24, 10, 10}});
  const float ys1 = 0.02f;
  const int r1 = q.Qdq(relu, ys1, 0, {-1, 24, 10, 10});
  const int w2 = q.Weight({20, 24, 1, 1}, 0, true);
  const int b2 = t.Random("b2", {20}, rng, -0.2, 0.2);
  const int conv2 =
      t.Op("Conv", {r1, w2, b2}, {Attribute::Ints("strides", {2, 2})}, {{-1, 20, 5, 5}});
  t.Output(q.Qdq(conv2, 0.03f, 120, {-1, 20, 5, 5}));
  return t.Build();
}

TEST(QdqFusionTest, ConvChainBecomesInt8AndStaysInt8Between) {
  for (int64_t group : {1, 8}) {
    SCOPED_TRACE(group);
    std::mt19937 rng(1);
    std::shared_ptr<const Graph> g = ConvChain(rng, group);
    OptimizedGraph o = OptimizeAll(g);
    const Graph& og = *o.graph;
    EXPECT_EQ(CountOps(og, "Conv"), 0);
    EXPECT_EQ(CountOps(og, "FusedConv", "ai.kiln"), 0);
    EXPECT_EQ(CountOps(og, "Relu"), 0);
    ASSERT_EQ(CountOps(og, "QConv", "ai.kiln"), 2);
    // What is left of QDQ: the input's QuantizeLinear and the output's DequantizeLinear.
    EXPECT_EQ(CountOps(og, "QuantizeLinear"), 1);
    EXPECT_EQ(CountOps(og, "DequantizeLinear"), 1);
    const Node* first = FindOp(og, "QConv", 0);
    const Node* second = FindOp(og, "QConv", 1);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->GetString("activation", "?"), "Relu");
    // The tensor between the two convs is the first one's UINT8 output, read directly.
    EXPECT_EQ(og.value(first->outputs[0]).type.dtype, DataType::kUint8);
    EXPECT_EQ(second->inputs[0], first->outputs[0]);
    // ... stored channels-last: the first writes it so, the second reads it so.
    EXPECT_EQ(first->GetInt("y_channels_last", 0), 1);
    EXPECT_EQ(second->GetInt("x_channels_last", 0), 1);
    EXPECT_EQ(first->GetInt("x_channels_last", 0), 0);
    EXPECT_EQ(second->GetInt("y_channels_last", 0), 0);
    const ValueType& between = og.value(first->outputs[0]).type;
    ASSERT_EQ(between.dims.size(), 4u);
    EXPECT_EQ(between.dims[1].value, 10);
    EXPECT_EQ(between.dims[3].value, 24);
    // INT8 weights were not folded into FP32 constants: W is INT8, the first bias INT32
    // (its scale is x_scale * w_scale), the second stays FP32.
    EXPECT_EQ(og.value(first->inputs[3]).constant->dtype(), DataType::kInt8);
    ASSERT_EQ(first->inputs.size(), 9u);
    EXPECT_EQ(og.value(first->inputs[8]).constant->dtype(), DataType::kInt32);
    EXPECT_EQ(og.value(second->inputs[8]).constant->dtype(), DataType::kFloat32);
    // Both run on the oneDNN INT8 kernels.
    Result<std::unique_ptr<Session>> session = Session::Create(o.graph);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    for (int i = 0; i < og.num_nodes(); ++i) {
      if (og.node(i).op_type == "QConv") {
        EXPECT_EQ((*session)->provider(i), "cpu");
      }
    }
    // Numerics: 2 output steps (output scale 0.03).
    ExpectWithinQuantization(*g, og, 2 * 0.03 + 1e-6);
  }
}

TEST(QdqFusionTest, ResidualBlockAddBecomesQAdd) {
  // x -> QDQ -> Conv -> Relu -> QDQ -> Conv -> QDQ; Add(that, x's DQ) -> Relu -> QDQ -> output.
  std::mt19937 rng(7);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const std::vector<int64_t> d = {-1, 16, 8, 8};
  const int x = t.Input("x", d);
  const int xd = q.Qdq(x, 0.02f, 128, d);
  const std::vector<Attribute> pads = {Attribute::Ints("pads", {1, 1, 1, 1})};
  const int c1 = t.Op("Conv", {xd, q.Weight({16, 16, 3, 3}, 0, true)}, pads, d);
  const int r1 = q.Qdq(t.Op("Relu", {c1}, {}, d), 0.02f, 0, d);
  const int c2 =
      q.Qdq(t.Op("Conv", {r1, q.Weight({16, 16, 3, 3}, 0, true)}, pads, d), 0.03f, 125, d);
  const int sum = t.Op("Add", {c2, xd}, {}, d);
  t.Output(q.Qdq(t.Op("Relu", {sum}, {}, d), 0.025f, 0, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Add"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Relu"), 0);
  EXPECT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 2);
  ASSERT_EQ(CountOps(*o.graph, "QAdd", "ai.kiln"), 1);
  // Only the input's QuantizeLinear and the output's DequantizeLinear are left.
  EXPECT_EQ(CountOps(*o.graph, "QuantizeLinear"), 1);
  EXPECT_EQ(CountOps(*o.graph, "DequantizeLinear"), 1);
  const Node* add = FindOp(*o.graph, "QAdd");
  EXPECT_EQ(add->GetString("activation", "?"), "Relu");
  EXPECT_EQ(o.graph->value(add->inputs[0]).type.dtype, DataType::kUint8);
  // conv1 -> conv2 stays channels-last; the QAdd's operands cannot (x's QuantizeLinear writes
  // channels-first), so conv2 writes channels-first for it.
  EXPECT_EQ(FindOp(*o.graph, "QConv", 0)->GetInt("y_channels_last", 0) +
                FindOp(*o.graph, "QConv", 1)->GetInt("y_channels_last", 0),
            1);
  EXPECT_EQ(CountOps(*o.graph, "Transpose"), 0);
  ExpectWithinQuantization(*g, *o.graph, 2 * 0.025 + 1e-6);
}

TEST(QdqFusionTest, ResidualTrunkStaysChannelsLast) {
  // x -> QDQ -> Conv a -> QDQ (the trunk t0); t1 = QAdd(Conv b(t0), t0); t2 = QAdd(Conv c(t1),
  // t1); output DQ(t2) and an FP32 Neg of DQ(t1). Every trunk value is a QConv / QAdd output, so
  // the trunk is channels-last, and the FP32 readers get Transposes back.
  std::mt19937 rng(8);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const std::vector<int64_t> d = {-1, 8, 6, 6};
  const int x = t.Input("x", d);
  const std::vector<Attribute> pads = {Attribute::Ints("pads", {1, 1, 1, 1})};
  auto conv = [&](int in) { return t.Op("Conv", {in, q.Weight({8, 8, 3, 3}, 0, true)}, pads, d); };
  const int t0 = q.Qdq(conv(q.Qdq(x, 0.02f, 128, d)), 0.03f, 128, d);
  const int t1 = q.Qdq(t.Op("Add", {q.Qdq(conv(t0), 0.03f, 128, d), t0}, {}, d), 0.04f, 128, d);
  const int t2 = q.Qdq(t.Op("Add", {q.Qdq(conv(t1), 0.03f, 128, d), t1}, {}, d), 0.05f, 128, d);
  t.Output(t2);
  t.Output(t.Op("Neg", {t1}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  ASSERT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 3);
  ASSERT_EQ(CountOps(*o.graph, "QAdd", "ai.kiln"), 2);
  for (const Node& n : o.graph->nodes()) {
    if (n.op_type != "QConv") continue;
    EXPECT_EQ(n.GetInt("y_channels_last", 0), 1) << n.name;
    // The first conv reads x's QuantizeLinear output (channels-first).
    EXPECT_EQ(n.GetInt("x_channels_last", 0),
              o.graph->value(n.inputs[0]).type.dims.back().value == 8 ? 1 : 0)
        << n.name;
  }
  EXPECT_EQ(CountOps(*o.graph, "Transpose"), 2);  // before t1's and t2's DequantizeLinear
  ExpectWithinQuantization(*g, *o.graph, 2 * 0.05 + 1e-6);
}

TEST(QdqFusionTest, QLinearConvChainBecomesQConvChannelsLast) {
  // A model in the operator format: x -> QuantizeLinear -> QLinearConv -> QLinearConv ->
  // DequantizeLinear.
  std::mt19937 rng(9);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const std::vector<int64_t> d = {-1, 8, 6, 6};
  const int xq = q.QuantizeOnly(t.Input("x", d), 0.02f, 128, d, false);
  int layer = 0;
  auto qlinear = [&](int in, float in_scale, int in_zp, float out_scale) {
    const std::string p = "l" + std::to_string(layer++) + "_";
    std::vector<int8_t> w(8 * 8 * 9);
    std::uniform_int_distribution<int> dist(-127, 127);
    for (int8_t& v : w) v = int8_t(dist(rng));
    std::vector<int> ins = {
        in,
        t.Scalar(p + "xs", in_scale),
        t.Const(p + "xzp", TypedTensor<uint8_t>(DataType::kUint8, Shape{}, {uint8_t(in_zp)})),
        t.Const(p + "w", TypedTensor<int8_t>(DataType::kInt8, Shape{8, 8, 3, 3}, w)),
        t.Const(p + "ws", FloatTensor(Shape{8}, std::vector<float>(8, 0.004f))),
        t.Const(p + "wzp",
                TypedTensor<int8_t>(DataType::kInt8, Shape{8}, std::vector<int8_t>(8, 0))),
        t.Scalar(p + "ys", out_scale),
        t.Const(p + "yzp", TypedTensor<uint8_t>(DataType::kUint8, Shape{}, {120}))};
    return t.Op("QLinearConv", ins, {Attribute::Ints("pads", {1, 1, 1, 1})}, d, DataType::kUint8);
  };
  const int c1 = qlinear(xq, 0.02f, 128, 0.05f);
  const int c2 = qlinear(c1, 0.05f, 120, 0.08f);
  t.Output(t.Op("DequantizeLinear",
                {c2, t.Scalar("os", 0.08f),
                 t.Const("ozp", TypedTensor<uint8_t>(DataType::kUint8, Shape{}, {120}))},
                {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "QLinearConv"), 0);
  ASSERT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 2);
  EXPECT_EQ(FindOp(*o.graph, "QConv", 0)->GetInt("y_channels_last", 0) +
                FindOp(*o.graph, "QConv", 1)->GetInt("x_channels_last", 0),
            2);
  // QConv without activation or FP32 bias is QLinearConv: within 1 output step (0.08).
  ExpectWithinQuantization(*g, *o.graph, 0.08 + 1e-6);
}

TEST(QdqFusionTest, ClipIsFusedAndSymmetricInt8Activations) {
  std::mt19937 rng(2);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const int x = t.Input("x", {-1, 8, 7, 7});
  const float xs = 1.0f / 127;
  const int xd = q.Qdq(x, xs, 0, {-1, 8, 7, 7}, /*symmetric=*/true);
  const int w = q.Weight({17, 8, 3, 3}, 0, false);
  const int conv = t.Op("Conv", {xd, w}, {}, {{-1, 17, 5, 5}});
  const int clip =
      t.Op("Clip", {conv, t.Scalar("lo", 0.0f), t.Scalar("hi", 6.0f)}, {}, {{-1, 17, 5, 5}});
  t.Output(q.Qdq(clip, 6.0f / 255, 0, {-1, 17, 5, 5}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  ASSERT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Clip"), 0);
  const Node* qc = FindOp(*o.graph, "QConv");
  EXPECT_EQ(qc->GetString("activation", "?"), "Clip");
  EXPECT_EQ(o.graph->value(qc->inputs[0]).type.dtype, DataType::kInt8);
  ExpectWithinQuantization(*g, *o.graph, 2 * 6.0 / 255 + 1e-6);
}

TEST(QdqFusionTest, MatMulAndGemmBecomeQMatMul) {
  for (int variant = 0; variant < 3; ++variant) {  // MatMul, Gemm transB=1, Gemm transB=0
    SCOPED_TRACE(variant);
    std::mt19937 rng(3);
    TestGraph t(13);
    QdqBuilder q(t, rng);
    const int64_t k = 48, n = 33;
    const bool matmul = variant == 0;
    const std::vector<int64_t> adims =
        matmul ? std::vector<int64_t>{-1, 7, k} : std::vector<int64_t>{7, k};
    const int x = t.Input("x", adims);
    const float xs = 2.0f / 255;
    const int xd = q.Qdq(x, xs, 131, adims);
    std::vector<float> ws;
    int y;
    std::vector<int64_t> ydims =
        matmul ? std::vector<int64_t>{-1, 7, n} : std::vector<int64_t>{7, n};
    if (matmul) {
      y = t.Op("MatMul", {xd, q.Weight({k, n}, 1, true)}, {}, ydims);
    } else if (variant == 1) {
      const int w = q.Weight({n, k}, 0, true, &ws);
      y = t.Op("Gemm", {xd, w, q.Bias(n, xs, ws)}, {Attribute::Int("transB", 1)}, ydims);
    } else {
      const int w = q.Weight({k, n}, 1, false, &ws);
      y = t.Op("Gemm", {xd, w, t.Random("c", {n}, rng, -0.1, 0.1)}, {}, ydims);
    }
    t.Output(y);  // FP32 output: no QuantizeLinear follows
    std::shared_ptr<const Graph> g = t.Build();
    OptimizedGraph o = OptimizeAll(g);
    EXPECT_EQ(CountOps(*o.graph, "MatMul") + CountOps(*o.graph, "Gemm"), 0);
    ASSERT_EQ(CountOps(*o.graph, "QMatMul", "ai.kiln"), 1);
    const Node* qm = FindOp(*o.graph, "QMatMul");
    EXPECT_EQ(o.graph->value(qm->outputs[0]).type.dtype, DataType::kFloat32);
    EXPECT_EQ(o.graph->value(qm->inputs[3]).constant->shape(), (Shape{k, n}));
    // FP32 output: both sides compute the same products; only FP32 summation order differs.
    ExpectWithinQuantization(*g, *o.graph, 1e-4, 0.0);
  }
}

TEST(QdqFusionTest, MatMulBiasAddJoinsQMatMul) {
  // DQ -> MatMul -> Add(bias [1, 1, N]) -> Relu, FP32 out (the ONNX Runtime quantizer's layout).
  std::mt19937 rng(10);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const std::vector<int64_t> d = {-1, 5, 64}, y = {-1, 5, 40};
  const int xd = q.Qdq(t.Input("x", d), 2.0f / 255, 128, d);
  const int m = t.Op("MatMul", {xd, q.Weight({64, 40}, 1, true)}, {}, y);
  const int b = t.Op("Add", {m, t.Random("bias", {1, 1, 40}, rng)}, {}, y);
  t.Output(t.Op("Relu", {b}, {}, y));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(o.graph->num_nodes(), 2);  // QuantizeLinear, QMatMul
  ASSERT_EQ(CountOps(*o.graph, "QMatMul", "ai.kiln"), 1);
  const Node* qm = FindOp(*o.graph, "QMatMul");
  ASSERT_EQ(qm->inputs.size(), 9u);
  EXPECT_EQ(o.graph->value(qm->inputs[8]).constant->shape(), Shape{40});
  EXPECT_EQ(qm->GetString("activation", "?"), "Relu");
  ExpectWithinQuantization(*g, *o.graph, 1e-4, 0.0);
}

TEST(QdqFusionTest, LeavesWhatItCannotProve) {
  std::mt19937 rng(4);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const int x = t.Input("x", {2, 4, 6, 6});
  const int xd = q.Qdq(x, 0.01f, 128, {2, 4, 6, 6});
  // A weight that is not quantized (FP32 constant): the Conv stays FP32.
  const int conv = t.Op("Conv", {xd, t.Random("w", {4, 4, 1, 1}, rng)}, {}, {{2, 4, 6, 6}});
  // The conv output has a second reader before the QuantizeLinear of the next conv's input.
  const int cd = q.Qdq(conv, 0.05f, 128, {2, 4, 6, 6});
  const int conv2 = t.Op("Conv", {cd, q.Weight({4, 4, 1, 1}, 0, true)}, {}, {{2, 4, 6, 6}});
  t.Output(t.Op("Neg", {conv2}, {}, {{2, 4, 6, 6}}));
  t.Output(q.Qdq(conv2, 0.05f, 128, {2, 4, 6, 6}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Conv"), 1);
  ASSERT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 1);
  // conv2 keeps its FP32 output (it has two readers), so its QuantizeLinear stays.
  EXPECT_EQ(o.graph->value(FindOp(*o.graph, "QConv")->outputs[0]).type.dtype, DataType::kFloat32);
  ExpectWithinQuantization(*g, *o.graph, 0.05 + 1e-6, 0.0);
}

TEST(QdqFusionTest, AsymmetricWeightStaysFp32) {
  // W with a nonzero zero point: no INT8 kernel takes it fast, so the Conv stays FP32 and its
  // weight DequantizeLinear folds into an FP32 constant.
  std::mt19937 rng(11);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const std::vector<int64_t> d = {-1, 4, 5, 5};
  const int xd = q.Qdq(t.Input("x", d), 0.02f, 128, d);
  std::vector<int8_t> w(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int(i) * 7 - 50);
  const int wd = t.Op(
      "DequantizeLinear",
      {t.Const("wq", TypedTensor<int8_t>(DataType::kInt8, Shape{4, 4, 1, 1}, w)),
       t.Scalar("ws", 0.01f), t.Const("wzp", TypedTensor<int8_t>(DataType::kInt8, Shape{}, {3}))},
      {}, {{4, 4, 1, 1}});
  t.Output(t.Op("Conv", {xd, wd}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "QConv", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Conv"), 1);
  EXPECT_EQ(CountOps(*o.graph, "DequantizeLinear"), 1);  // the activation's only
  ExpectSameOutputs(*g, *o.graph, 1e-5);
}

TEST(QdqFusionTest, DisabledLeavesFoldingToConstantFolding) {
  std::mt19937 rng(5);
  std::shared_ptr<const Graph> g = ConvChain(rng, 1);
  OptimizerOptions options;
  options.disabled_passes = {"qdq_fusion"};
  Result<OptimizedGraph> o = OptimizeGraph(g, options);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(CountOps(*o->graph, "QConv", "ai.kiln"), 0);
  // The weight and bias DequantizeLinear nodes were folded: only the activations' remain.
  EXPECT_EQ(CountOps(*o->graph, "DequantizeLinear"), 3);
  ExpectSameOutputs(*g, *o->graph, 1e-4);
}

TEST(QdqFusionTest, RequantizeOfSameParametersIsRemoved) {
  std::mt19937 rng(6);
  TestGraph t(13);
  QdqBuilder q(t, rng);
  const int x = t.Input("x", {3, 40});
  const int d = q.Qdq(x, 0.02f, 100, {3, 40});
  const Node& dq = t.graph().nodes().back();
  const int s = dq.inputs[1], z = dq.inputs[2];
  const int rq = t.Op("QuantizeLinear", {d, s, z}, {}, {{3, 40}}, DataType::kUint8);
  t.Output(t.Op("DequantizeLinear", {rq, s, z}, {}, {{3, 40}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"qdq_fusion", "dead_code_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "QuantizeLinear"), 1);
  EXPECT_EQ(CountOps(*o.graph, "DequantizeLinear"), 1);
  ExpectSameOutputs(*g, *o.graph, 0);
}

}  // namespace
}  // namespace kiln::opt::testing
