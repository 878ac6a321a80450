// SPDX-License-Identifier: Apache-2.0
// Tests for half-precision weights (half_precision.h) and the fp16/bf16 quantize and validate
// workflows (quantizer.h): which initializers become FLOAT16/BFLOAT16 and where the Casts go,
// the written file (structure, size, metadata), its outputs against the FP32 model with its
// weights rounded here, the digits model's accuracy at fp16 and bf16 against FP32 (top-1
// recomputed here from the labels), and the refused option combinations.

#include "quant/half_precision.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "graph/onnx/exporter.h"
#include "graph/onnx/importer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "opt/opt_test_util.h"
#include "quant/model_metadata.h"
#include "quant/quantizer.h"
#include "runtime/session.h"
#include "tensor/npy.h"

namespace kiln::quant {
namespace {

namespace fs = std::filesystem;
using opt::testing::ExpectSameOutputs;
using opt::testing::OptimizeAll;
using opt::testing::RandomInputs;
using opt::testing::RandomTensor;
using opt::testing::RunGraph;
using opt::testing::TestGraph;

// `t` with every value rounded to `dtype` and back, elementwise through tensor/dtype.h.
OwnedTensor Rounded(const OwnedTensor& t, DataType dtype) {
  OwnedTensor r = OwnedTensor::Allocate(DataType::kFloat32, t.shape()).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = t.data<float>()[i];
    r.data<float>()[i] = dtype == DataType::kFloat16 ? Float16ToFloat(FloatToFloat16(v))
                                                     : BFloat16ToFloat(FloatToBFloat16(v));
  }
  return r;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Node* ProducerOf(const Graph& g, int v) {
  const int p = g.value(v).producer;
  return p < 0 ? nullptr : &g.node(p);
}

// The weights of the test model: w1, w2, w3 are large enough to be converted; the biases and w4
// are not.
struct Weights {
  OwnedTensor w1, b1, w2, w3, b3, w4;

  static Weights Random(std::mt19937& rng) {
    Weights w;
    w.w1 = RandomTensor(Shape{16, 8, 3, 3}, rng, -0.5, 0.5);  // 1152 values
    w.b1 = RandomTensor(Shape{16}, rng, -0.1, 0.1);
    // 272000 values: 1.09 MB in FP32, too large for the optimizer to fold its Cast.
    w.w2 = RandomTensor(Shape{1600, 170}, rng, -0.05, 0.05);
    w.w3 = RandomTensor(Shape{170, 10}, rng, -0.3, 0.3);  // 1700 values
    w.b3 = RandomTensor(Shape{10}, rng, -0.1, 0.1);
    w.w4 = RandomTensor(Shape{10, 4}, rng, -1, 1);  // 40 values
    return w;
  }
  Weights RoundedTo(DataType dtype) const {
    Weights r = *this;
    r.w1 = Rounded(w1, dtype);
    r.w2 = Rounded(w2, dtype);
    r.w3 = Rounded(w3, dtype);
    return r;
  }
};

// Conv(+bias) -> Relu -> Flatten -> MatMul -> Gemm(+bias) -> Gemm: weight-dominated.
std::shared_ptr<const Graph> BuildModel(const Weights& w, int64_t opset = 13) {
  TestGraph t(opset);
  const int x = t.Input("x", {-1, 8, 10, 10});
  const int c = t.Op("Conv", {x, t.Const("w1", w.w1), t.Const("b1", w.b1)},
                     {Attribute::Ints("pads", {1, 1, 1, 1})}, {{-1, 16, 10, 10}});
  const int r = t.Op("Relu", {c}, {}, {{-1, 16, 10, 10}});
  const int f = t.Op("Flatten", {r}, {Attribute::Int("axis", 1)}, {{-1, 1600}});
  const int m = t.Op("MatMul", {f, t.Const("w2", w.w2)}, {}, {{-1, 170}});
  const int g = t.Op("Gemm", {m, t.Const("w3", w.w3), t.Const("b3", w.b3)}, {}, {{-1, 10}});
  t.Output(t.Op("Gemm", {g, t.Const("w4", w.w4)}, {}, {{-1, 4}}));
  return t.Build();
}

class HalfModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_half_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "val");
    std::mt19937 rng(11);
    weights_ = Weights::Random(rng);
    model_ = (dir_ / "model.onnx").string();
    ASSERT_TRUE(WriteOnnxModel(*BuildModel(weights_), model_).ok());
    OwnedTensor data = RandomTensor(Shape{16, 8, 10, 10}, rng);
    ASSERT_TRUE(
        WriteFile((dir_ / "val" / "inputs.npy").string(), WriteNpy(data.view()).value(), "data")
            .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  QuantizeOptions Options(const std::string& precision) {
    QuantizeOptions o;
    o.model = model_;
    o.out = (dir_ / ("model." + precision + ".onnx")).string();
    o.precision = precision;
    return o;
  }

  fs::path dir_;
  std::string model_;
  Weights weights_;
};

TEST_F(HalfModelTest, WritesHalfWeightsBehindCasts) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    const std::string p(HalfPrecisionName(dtype));
    SCOPED_TRACE(p);
    const QuantizeOptions o = Options(p);
    Result<QuantizeReport> r = QuantizeModel(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->precision, p);
    EXPECT_EQ(r->tensors_converted, 3);
    EXPECT_EQ(r->elements_converted, 1152 + 272000 + 1700);
    EXPECT_EQ(r->overflows, 0);
    EXPECT_FALSE(r->evaluated);  // no data given
    EXPECT_EQ(r->out_bytes, static_cast<int64_t>(fs::file_size(o.out)));
    EXPECT_EQ(r->fp32_bytes, static_cast<int64_t>(fs::file_size(model_)));
    // Weight-dominated: about half the FP32 file.
    EXPECT_LE(static_cast<double>(r->out_bytes), 0.55 * static_cast<double>(r->fp32_bytes));
    EXPECT_NE(r->compute_note.find("computed in FP32"), std::string::npos);
    // BF16 weights on a CPU with BF16 dot products: the convolutions compute in BF16.
    const bool bf16_compute = p == "bf16" && DetectCpuHalfSupport().avx512bf16;
    EXPECT_EQ(r->compute_note.find("convolutions and matrix products computed in BF16") !=
                  std::string::npos,
              bf16_compute)
        << r->compute_note;

    std::shared_ptr<Graph> g = ImportOnnxModel(o.out).value();
    int casts = 0;
    for (const Node& n : g->nodes()) casts += n.op_type == "Cast";
    EXPECT_EQ(casts, 3);
    for (const auto& [name, fp32] : {std::pair<std::string, const OwnedTensor*>{"w1", &weights_.w1},
                                     {"w2", &weights_.w2},
                                     {"w3", &weights_.w3}}) {
      SCOPED_TRACE(name);
      const int v = g->FindValue(name);
      ASSERT_GE(v, 0);
      EXPECT_FALSE(g->value(v).is_constant());
      const Node* cast = ProducerOf(*g, v);
      ASSERT_NE(cast, nullptr);
      EXPECT_EQ(cast->op_type, "Cast");
      EXPECT_EQ(cast->GetInt("to", 0), 1);  // FLOAT
      const Value& h = g->value(cast->inputs[0]);
      std::string want_name = name;
      want_name += "_";
      want_name += p;
      EXPECT_EQ(h.name, want_name);
      ASSERT_TRUE(h.is_constant());
      ASSERT_EQ(h.constant->dtype(), dtype);
      ASSERT_EQ(h.constant->shape(), fp32->shape());
      // Bit-exact round to nearest even.
      for (int64_t i = 0; i < fp32->num_elements(); ++i) {
        const float x = fp32->data<float>()[i];
        const uint16_t want =
            dtype == DataType::kFloat16 ? FloatToFloat16(x).bits : FloatToBFloat16(x).bits;
        const uint16_t got = dtype == DataType::kFloat16 ? h.constant->data<Float16>()[i].bits
                                                         : h.constant->data<BFloat16>()[i].bits;
        if (want != got) {
          ADD_FAILURE() << "element " << i << ": " << got << " instead of " << want;
          break;
        }
      }
    }
    for (const std::string name : {"b1", "b3", "w4"}) {
      const int v = g->FindValue(name);
      ASSERT_GE(v, 0) << name;
      ASSERT_TRUE(g->value(v).is_constant()) << name;
      EXPECT_EQ(g->value(v).constant->dtype(), DataType::kFloat32) << name;
    }

    // Metadata: the FP32 source, its hash and the method.
    const auto props = ReadMetadata(ReadAll(o.out)).value();
    EXPECT_EQ(props.at(std::string(kMethodKey)), p);
    EXPECT_EQ(props.at(std::string(kSourceKey)), fs::absolute(model_).string());
    EXPECT_EQ(props.at(std::string(kSourceHashKey)), ContentHash(ReadAll(model_)));
    // The JSON report names the precision and the sizes under it.
    const std::string json = QuantizeReportJson(*r);
    EXPECT_NE(json.find("\"precision\": \"" + p + "\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"" + p + "\": " + std::to_string(r->out_bytes)), std::string::npos)
        << json;
  }
}

TEST_F(HalfModelTest, ComputesTheFp32ModelWithRoundedWeights) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    const std::string p(HalfPrecisionName(dtype));
    SCOPED_TRACE(p);
    const QuantizeOptions o = Options(p);
    ASSERT_TRUE(QuantizeModel(o).ok());
    std::shared_ptr<const Graph> half = ImportOnnxModel(o.out).value();
    std::shared_ptr<const Graph> rounded = BuildModel(weights_.RoundedTo(dtype));
    // As written (reference kernels), and as kiln serves it (full optimizer).
    ExpectSameOutputs(*rounded, *half, 1e-5);
    // Served, BF16 convolutions and matrix products compute in BF16 where the CPU has BF16 dot
    // products (their inputs rounded too, 2^-8 relative): that rounding's bound, else FP32's.
    const bool bf16_compute = dtype == DataType::kBFloat16 && CpuKernelsComputeBf16();
    ExpectSameOutputs(*OptimizeAll(rounded).graph, *OptimizeAll(half).graph,
                      bf16_compute ? 2e-2 : 1e-5);

    // The tolerance tells rounded weights from unrounded ones.
    std::mt19937 rng(7);
    const std::vector<OwnedTensor> inputs = RandomInputs(*half, rng);
    const OwnedTensor a = RunGraph(BuildModel(weights_), inputs)[0];
    const OwnedTensor b = RunGraph(half, inputs)[0];
    double max_diff = 0;
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      max_diff = std::max(max_diff, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    }
    EXPECT_GT(max_diff, 1e-4);
  }
}

TEST_F(HalfModelTest, ValidatesAgainstTheRecordedSourceOrItself) {
  const std::string val = (dir_ / "val").string();
  const QuantizeOptions o = Options("bf16");
  ASSERT_TRUE(QuantizeModel(o).ok());

  // The written model: auto-detected, compared with its recorded FP32 source.
  ValidateOptions v;
  v.model = o.out;
  v.data_dir = val;
  Result<ValidateReport> file = ValidateModel(v);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->precision, "bf16");
  EXPECT_FALSE(file->converted_at_load);
  EXPECT_EQ(file->reference_model, fs::absolute(model_).string());
  ASSERT_TRUE(file->reference.has_value());
  EXPECT_GT(file->metrics.mean_cosine, 0.999);
  EXPECT_LT(file->metrics.mean_cosine, 1.0);  // the rounding shows
  EXPECT_NE(ValidateReportJson(*file).find("\"precision\": \"bf16\""), std::string::npos);

  // The FP32 model converted at load computes what the written file does.
  ValidateOptions c;
  c.model = model_;
  c.data_dir = val;
  c.precision = "bf16";
  Result<ValidateReport> at_load = ValidateModel(c);
  ASSERT_TRUE(at_load.ok()) << at_load.status().ToString();
  EXPECT_TRUE(at_load->converted_at_load);
  EXPECT_EQ(at_load->reference_model, model_);
  ASSERT_TRUE(at_load->reference.has_value());
  EXPECT_NEAR(at_load->metrics.mean_cosine, file->metrics.mean_cosine, 1e-9);
  EXPECT_EQ(at_load->metrics.agreement_top1, file->metrics.agreement_top1);

  // Precision mismatches and a --reference for a model compared with itself are refused.
  for (const std::string bad : {"fp32", "fp16", "int8"}) {
    ValidateOptions w = v;
    w.precision = bad;
    EXPECT_EQ(ValidateModel(w).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  ValidateOptions r = c;
  r.reference = model_;
  EXPECT_EQ(ValidateModel(r).status().code(), StatusCode::kInvalidArgument);
  ValidateOptions unknown = c;
  unknown.precision = "fp8";
  EXPECT_EQ(ValidateModel(unknown).status().code(), StatusCode::kInvalidArgument);

  // Half initializers without metadata: detected, measured alone, or against --reference.
  const std::string bare = (dir_ / "bare.onnx").string();
  HalfWeights h = ConvertWeightsToHalf(*BuildModel(weights_), DataType::kFloat16).value();
  ASSERT_TRUE(WriteOnnxModel(*h.graph, bare).ok());
  ValidateOptions b;
  b.model = bare;
  b.data_dir = val;
  Result<ValidateReport> alone = ValidateModel(b);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->precision, "fp16");
  EXPECT_FALSE(alone->reference.has_value());
  b.reference = model_;
  Result<ValidateReport> against = ValidateModel(b);
  ASSERT_TRUE(against.ok()) << against.status().ToString();
  ASSERT_TRUE(against->reference.has_value());
  EXPECT_GT(against->metrics.mean_cosine, 0.9999);
  EXPECT_LT(against->metrics.mean_cosine, 1.0);
}

TEST_F(HalfModelTest, RefusesInt8Settings) {
  struct Case {
    std::string flag;
    void (*set)(QuantizeOptions&);
  };
  const std::vector<Case> cases = {
      {"--calib-dir", [](QuantizeOptions& o) { o.calib_dir = "calib"; }},
      {"--calib-samples", [](QuantizeOptions& o) { o.calib_samples = 10; }},
      {"--method", [](QuantizeOptions& o) { o.method = CalibrationMethod::kEntropy; }},
      {"--per-channel", [](QuantizeOptions& o) { o.per_channel = true; }},
      {"--symmetric-activations",
       [](QuantizeOptions& o) { o.activation_type = ActivationType::kInt8; }},
      {"--keep-fp32", [](QuantizeOptions& o) { o.keep_fp32 = 1; }},
      {"--max-accuracy-drop", [](QuantizeOptions& o) { o.max_accuracy_drop = 0.5; }},
      {"--sensitivity", [](QuantizeOptions& o) { o.sensitivity = true; }},
  };
  for (const std::string p : {"fp16", "bf16"}) {
    for (const Case& c : cases) {
      QuantizeOptions o = Options(p);
      c.set(o);
      Result<QuantizeReport> r = QuantizeModel(o);
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << p << " " << c.flag;
      EXPECT_NE(r.status().message().find(c.flag + " does not apply to --precision " + p),
                std::string::npos)
          << r.status().message();
      EXPECT_FALSE(fs::exists(o.out)) << c.flag;
    }
  }
  QuantizeOptions o = Options("fp8");
  EXPECT_EQ(QuantizeModel(o).status().code(), StatusCode::kInvalidArgument);
  // INT8 still needs its calibration data.
  o = Options("int8");
  EXPECT_EQ(QuantizeModel(o).status().code(), StatusCode::kInvalidArgument);
  // A converted model is not converted again.
  ASSERT_TRUE(QuantizeModel(Options("fp16")).ok());
  QuantizeOptions again = Options("bf16");
  again.model = Options("fp16").out;
  EXPECT_EQ(QuantizeModel(again).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ConvertWeightsToHalfTest, ChoosesWeightsAndPlacesOneCastBeforeTheFirstReader) {
  std::mt19937 rng(3);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 8, 6, 6});
  const int a = t.Input("a", {-1, 64});
  const int b = t.Input("b", {64, 64});
  const int shared = t.Random("shared", {64, 64}, rng);
  const int act_weight = t.Op("Relu", {b}, {}, {{64, 64}});  // a computed MatMul input 1
  const int deconv_w = t.Random("deconv_w", {8, 16, 3, 3}, rng);
  const int y0 = t.Op("ConvTranspose", {x, deconv_w}, {}, {{-1, 16, 8, 8}});
  const int m1 = t.Op("MatMul", {a, shared}, {}, {{-1, 64}});
  const int m2 = t.Op("MatMul", {m1, shared}, {}, {{-1, 64}});          // read again
  const int m3 = t.Op("MatMul", {shared, act_weight}, {}, {{64, 64}});  // as input 0
  const int m4 = t.Op("MatMul", {m1, act_weight}, {}, {{-1, 64}});
  for (int o : {y0, m2, m3, m4}) t.Output(o);
  std::shared_ptr<const Graph> g = t.Build();

  Result<HalfWeights> h = ConvertWeightsToHalf(*g, DataType::kFloat16);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->tensors, 2);  // shared, deconv_w
  EXPECT_EQ(h->elements, 64 * 64 + 8 * 16 * 3 * 3);
  const Graph& out = *h->graph;
  int casts = 0;
  int first_reader_of_shared = -1;
  for (int n = 0; n < out.num_nodes(); ++n) {
    const Node& node = out.node(n);
    if (node.op_type == "Cast") {
      ++casts;
      continue;
    }
    for (int in : node.inputs) {
      if (in == shared && first_reader_of_shared < 0) first_reader_of_shared = n;
    }
  }
  EXPECT_EQ(casts, 2);
  // Ids are kept: every reader (input 0 of m3 included) reads the one Cast's output.
  ASSERT_NE(ProducerOf(out, shared), nullptr);
  EXPECT_EQ(ProducerOf(out, shared)->op_type, "Cast");
  EXPECT_EQ(out.value(shared).producer, first_reader_of_shared - 1);
  EXPECT_EQ(out.value(ProducerOf(out, shared)->inputs[0]).name, "shared_fp16");
  EXPECT_EQ(ProducerOf(out, deconv_w)->op_type, "Cast");
  EXPECT_EQ(out.inputs, g->inputs);
  EXPECT_EQ(out.outputs, g->outputs);
  // Standard ONNX that kiln reads back and runs like the rounded graph.
  const std::string bytes = ExportOnnxModel(out).value();
  EXPECT_TRUE(ImportOnnxModelFromString(bytes, "converted").ok());
  ExpectSameOutputs(*h->graph, *ImportOnnxModelFromString(bytes, "converted").value(), 0);

  // BFLOAT16 needs Cast-13; FLOAT16 is fine at opset 12.
  TestGraph old(12);
  const int ox = old.Input("x", {-1, 64});
  old.Output(old.Op("MatMul", {ox, old.Random("w", {64, 64}, rng)}, {}, {{-1, 64}}));
  EXPECT_EQ(ConvertWeightsToHalf(*old.Build(), DataType::kBFloat16).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ConvertWeightsToHalf(*old.Build(), DataType::kFloat16).ok());
  EXPECT_EQ(ConvertWeightsToHalf(*old.Build(), DataType::kFloat32).status().code(),
            StatusCode::kInvalidArgument);
  // Nothing large enough: nothing to do is said, not written silently.
  EXPECT_EQ(ConvertWeightsToHalf(*old.Build(), DataType::kFloat16, 5000).status().code(),
            StatusCode::kFailedPrecondition);
}

// Overflow beyond the FP16 range is counted (BF16 has FP32's range).
TEST(ConvertWeightsToHalfTest, CountsOverflows) {
  std::mt19937 rng(4);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 32});
  OwnedTensor w = RandomTensor(Shape{32, 32}, rng);
  w.data<float>()[5] = 1e5f;
  w.data<float>()[7] = -7e4f;
  t.Output(t.Op("MatMul", {x, t.Const("w", std::move(w))}, {}, {{-1, 32}}));
  EXPECT_EQ(ConvertWeightsToHalf(*t.Build(), DataType::kFloat16).value().overflows, 2);
  EXPECT_EQ(ConvertWeightsToHalf(*t.Build(), DataType::kBFloat16).value().overflows, 0);
}

// The digits model (tests/data/digits): FP16 and BF16 keep the FP32 top-1 on the held-out split.
TEST(HalfDigitsTest, TopOneWithinBudgetOfFp32) {
  const fs::path data = KILN_DIGITS_DATA_DIR;
  const std::string model = (data / "digits.onnx").string();
  const std::string val = (data / "val").string();
  // FP32 top-1 computed here from the labels and kiln's outputs.
  const OwnedTensor inputs = ReadNpy(ReadAll((data / "val" / "inputs.npy").string())).value();
  const OwnedTensor labels = ReadNpy(ReadAll((data / "val" / "labels.npy").string())).value();
  ASSERT_EQ(labels.dtype(), DataType::kInt64);
  const OwnedTensor logits = RunGraph(ImportOnnxModel(model).value(), {inputs})[0];
  const int64_t n = labels.num_elements();
  ASSERT_EQ(logits.shape().dim(0), n);
  const int64_t classes = logits.shape().dim(1);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data<float>() + i * classes;
    correct += std::max_element(row, row + classes) - row == labels.data<int64_t>()[i];
  }
  const double fp32_top1 = 100.0 * static_cast<double>(correct) / static_cast<double>(n);
  ASSERT_GT(fp32_top1, 90.0);

  const fs::path dir =
      fs::temp_directory_path() / ("kiln_half_digits_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& [p, budget] : {std::pair<std::string, double>{"fp16", 0.5}, {"bf16", 1.0}}) {
    SCOPED_TRACE(p);
    QuantizeOptions o;
    o.model = model;
    o.out = (dir / ("digits." + p + ".onnx")).string();
    o.precision = p;
    o.data_dir = val;
    Result<QuantizeReport> r = QuantizeModel(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->fp32.top1.has_value());
    ASSERT_TRUE(r->quantized.top1.has_value());
    EXPECT_NEAR(*r->fp32.top1, fp32_top1, 1e-9);
    EXPECT_LE(std::abs(*r->quantized.top1 - fp32_top1), budget);
    EXPECT_EQ(r->quantized.samples, n);
    EXPECT_LE(static_cast<double>(r->out_bytes), 0.55 * static_cast<double>(r->fp32_bytes));

    ValidateOptions v;
    v.model = o.out;
    v.data_dir = val;
    v.precision = p;
    Result<ValidateReport> vr = ValidateModel(v);
    ASSERT_TRUE(vr.ok()) << vr.status().ToString();
    ASSERT_TRUE(vr->reference.has_value());
    EXPECT_NEAR(vr->reference->top1.value_or(-1), fp32_top1, 1e-9);
    EXPECT_LE(std::abs(vr->metrics.top1.value_or(-100) - fp32_top1), budget);
    EXPECT_GE(vr->metrics.agreement_top1, 100.0 - 2 * budget);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::quant
