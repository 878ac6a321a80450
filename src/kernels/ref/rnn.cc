// SPDX-License-Identifier: Apache-2.0
// Reference recurrent kernels: RNN, GRU (with linear_before_reset) and LSTM (peepholes,
// input_forget), every optional input and output, directions forward / reverse /
// bidirectional, the `activations` / `activation_alpha` / `activation_beta` / `clip`
// attributes, and `layout` (batch-major tensors) from opset 14.
//
// NOTE on the approach: one kernel class for the three cells. Per direction and batch item the
// hidden (and cell) state is kept in double and stepped through time in the direction's order
// (reverse walks t = seq_len - 1 .. 0); each step computes the gate pre-activations as plain dot
// products with the rows of W and R (gate order: RNN i; GRU z, r, h; LSTM i, o, f, c), adds the
// biases and peepholes, clips them to [-clip, clip] when `clip` is set, and applies the
// direction's activations. Steps at or past a batch item's sequence_lens entry write zeros to Y
// and leave the state alone, so Y_h / Y_c hold the last valid state. Activation parameters are
// consumed in order by the activations that take them (as onnxruntime does): LeakyRelu,
// ThresholdedRelu and Elu take alpha; Affine, ScaledTanh and HardSigmoid take alpha and beta.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class Cell { kRnn, kGru, kLstm };

std::string_view CellName(Cell cell) {
  switch (cell) {
    case Cell::kRnn:
      return "RNN";
    case Cell::kGru:
      return "GRU";
    case Cell::kLstm:
      return "LSTM";
  }
  return "";
}

int NumGates(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }

enum class ActKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case ActKind::kRelu:
        return std::max(x, 0.0);
      case ActKind::kTanh:
        return std::tanh(x);
      case ActKind::kSigmoid:
        return 1.0 / (1.0 + std::exp(-x));
      case ActKind::kAffine:
        return alpha * x + beta;
      case ActKind::kLeakyRelu:
        return x >= 0 ? x : alpha * x;
      case ActKind::kThresholdedRelu:
        return x > alpha ? x : 0.0;
      case ActKind::kScaledTanh:
        return alpha * std::tanh(beta * x);
      case ActKind::kHardSigmoid:
        return std::clamp(alpha * x + beta, 0.0, 1.0);
      case ActKind::kElu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActKind::kSoftsign:
        return x / (1 + std::fabs(x));
      case ActKind::kSoftplus:
        return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
    }
    return x;
  }
};

struct ActSpec {
  std::string_view name;
  ActKind kind;
  int params;  // 0: none, 1: alpha, 2: alpha and beta
  double alpha, beta;
};

constexpr ActSpec kActSpecs[] = {
    {"relu", ActKind::kRelu, 0, 0, 0},
    {"tanh", ActKind::kTanh, 0, 0, 0},
    {"sigmoid", ActKind::kSigmoid, 0, 0, 0},
    {"affine", ActKind::kAffine, 2, 1.0, 0.0},
    {"leakyrelu", ActKind::kLeakyRelu, 1, 0.01, 0},
    {"thresholdedrelu", ActKind::kThresholdedRelu, 1, 1.0, 0},
    {"scaledtanh", ActKind::kScaledTanh, 2, 1.0, 1.0},
    {"hardsigmoid", ActKind::kHardSigmoid, 2, 0.2, 0.5},
    {"elu", ActKind::kElu, 1, 1.0, 0},
    {"softsign", ActKind::kSoftsign, 0, 0, 0},
    {"softplus", ActKind::kSoftplus, 0, 0, 0},
};

struct Options {
  Cell cell = Cell::kRnn;
  int64_t hidden = 0;  // 0: taken from R
  int dirs = 1;
  bool reverse_only = false;  // direction == reverse
  bool batch_major = false;   // layout == 1
  bool clip_set = false;
  double clip = 0;
  bool linear_before_reset = false;
  bool input_forget = false;
  std::vector<Activation> acts;  // per direction: RNN 1, GRU 2, LSTM 3
};

int ActsPerDirection(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3; }

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(Options o) : o_(std::move(o)) {}

  Status Compute(KernelContext& ctx) const override {
    const std::string_view op = CellName(o_.cell);
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, op));
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor& r = ctx.input(2);
    if (x.rank() != 3) return OpError(op, "X {} must be 3-D", x.shape().ToString());
    const int64_t seq = o_.batch_major ? x.dim(1) : x.dim(0);
    const int64_t batch = o_.batch_major ? x.dim(0) : x.dim(1);
    const int64_t input = x.dim(2);
    const int64_t g = NumGates(o_.cell);
    if (r.rank() != 3) return OpError(op, "R {} must be 3-D", r.shape().ToString());
    const int64_t hidden = o_.hidden > 0 ? o_.hidden : r.dim(2);
    const int64_t dirs = o_.dirs;
    auto expect = [&](const Tensor& t, std::string_view what,
                      const std::vector<int64_t>& dims) -> Status {
      const Shape want{std::span<const int64_t>(dims)};
      if (t.dtype() != x.dtype()) {
        return OpError(op, "{} has dtype {}, X has {}", what, DataTypeName(t.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (!(t.shape() == want)) {
        return OpError(op, "{} {} must be {}", what, t.shape().ToString(), want.ToString());
      }
      return Status::OK();
    };
    KILN_RETURN_IF_ERROR(expect(w, "W", {dirs, g * hidden, input}));
    KILN_RETURN_IF_ERROR(expect(r, "R", {dirs, g * hidden, hidden}));
    const Tensor* b = nullptr;
    if (ctx.has_input(3)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 3, op));
      b = &ctx.input(3);
      KILN_RETURN_IF_ERROR(expect(*b, "B", {dirs, 2 * g * hidden}));
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
    if (ctx.has_input(4)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 4, op));
      const Tensor& sl = ctx.input(4);
      if (sl.dtype() != DataType::kInt32 || !(sl.shape() == Shape{batch})) {
        return OpError(op, "sequence_lens must be INT32 [{}], got {}{}", batch,
                       DataTypeName(sl.dtype()), sl.shape().ToString());
      }
      for (int64_t i = 0; i < batch; ++i) {
        const int32_t v = sl.data<const int32_t>()[i];
        if (v < 0 || v > seq) {
          return OpError(op, "sequence_lens[{}] = {} is out of range [0, {}]", i, v, seq);
        }
        lens[static_cast<size_t>(i)] = v;
      }
    }
    const std::vector<int64_t> state_dims = o_.batch_major
                                                ? std::vector<int64_t>{batch, dirs, hidden}
                                                : std::vector<int64_t>{dirs, batch, hidden};
    const Tensor* h0 = nullptr;
    const Tensor* c0 = nullptr;
    const Tensor* p = nullptr;
    if (ctx.has_input(5)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 5, op));
      h0 = &ctx.input(5);
      KILN_RETURN_IF_ERROR(expect(*h0, "initial_h", state_dims));
    }
    if (o_.cell == Cell::kLstm && ctx.has_input(6)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 6, op));
      c0 = &ctx.input(6);
      KILN_RETURN_IF_ERROR(expect(*c0, "initial_c", state_dims));
    }
    if (o_.cell == Cell::kLstm && ctx.has_input(7)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 7, op));
      p = &ctx.input(7);
      KILN_RETURN_IF_ERROR(expect(*p, "P", {dirs, 3 * hidden}));
    }
    return DispatchType<float, double>(x.dtype(), op, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Tensor y, yh, yc;
      const std::vector<int64_t> y_dims = o_.batch_major
                                              ? std::vector<int64_t>{batch, seq, dirs, hidden}
                                              : std::vector<int64_t>{seq, dirs, batch, hidden};
      KILN_ASSIGN_OR_RETURN(Shape y_shape, Shape::Create(y_dims));
      KILN_ASSIGN_OR_RETURN(Shape s_shape, Shape::Create(state_dims));
      if (ctx.num_outputs() > 0) {
        KILN_ASSIGN_OR_RETURN(y, ctx.AllocateOutput(0, x.dtype(), y_shape));
      }
      if (ctx.num_outputs() > 1) {
        KILN_ASSIGN_OR_RETURN(yh, ctx.AllocateOutput(1, x.dtype(), s_shape));
      }
      if (o_.cell == Cell::kLstm && ctx.num_outputs() > 2) {
        KILN_ASSIGN_OR_RETURN(yc, ctx.AllocateOutput(2, x.dtype(), s_shape));
      }
      Run<T>(x.data<const T>(), w.data<const T>(), r.data<const T>(),
             b != nullptr ? b->data<const T>() : nullptr, lens,
             h0 != nullptr ? h0->data<const T>() : nullptr,
             c0 != nullptr ? c0->data<const T>() : nullptr,
             p != nullptr ? p->data<const T>() : nullptr, y.valid() ? y.data<T>() : nullptr,
             yh.valid() ? yh.data<T>() : nullptr, yc.valid() ? yc.data<T>() : nullptr, seq, batch,
             input, hidden);
      return Status::OK();
    });
  }

 private:
  double Clip(double v) const { return o_.clip_set ? std::clamp(v, -o_.clip, o_.clip) : v; }

  template <typename T>
  void Run(const T* x, const T* w, const T* r, const T* b, const std::vector<int64_t>& lens,
           const T* h0, const T* c0, const T* p, T* y, T* yh, T* yc, int64_t seq, int64_t batch,
           int64_t input, int64_t hidden) const {
    const int64_t g = NumGates(o_.cell), dirs = o_.dirs;
    const int nact = ActsPerDirection(o_.cell);
    std::vector<double> h(static_cast<size_t>(hidden)), c(static_cast<size_t>(hidden));
    std::vector<double> hn(static_cast<size_t>(hidden));
    std::vector<double> gx(static_cast<size_t>(g * hidden)), gh(static_cast<size_t>(g * hidden));
    auto x_at = [&](int64_t t, int64_t bi) {
      return x + (o_.batch_major ? (bi * seq + t) : (t * batch + bi)) * input;
    };
    auto state_off = [&](int64_t d, int64_t bi) {
      return (o_.batch_major ? (bi * dirs + d) : (d * batch + bi)) * hidden;
    };
    auto y_off = [&](int64_t t, int64_t d, int64_t bi) {
      return (o_.batch_major ? ((bi * seq + t) * dirs + d) : ((t * dirs + d) * batch + bi)) *
             hidden;
    };
    for (int64_t d = 0; d < dirs; ++d) {
      const bool reverse = (dirs == 2 && d == 1) || o_.reverse_only;
      const Activation* act = o_.acts.data() + d * nact;
      const T* wd = w + d * g * hidden * input;
      const T* rd = r + d * g * hidden * hidden;
      const T* wb = b != nullptr ? b + d * 2 * g * hidden : nullptr;
      const T* rb = b != nullptr ? wb + g * hidden : nullptr;
      const T* pd = p != nullptr ? p + d * 3 * hidden : nullptr;
      for (int64_t bi = 0; bi < batch; ++bi) {
        for (int64_t j = 0; j < hidden; ++j) {
          const size_t ju = static_cast<size_t>(j);
          h[ju] = h0 != nullptr ? static_cast<double>(h0[state_off(d, bi) + j]) : 0.0;
          c[ju] = c0 != nullptr ? static_cast<double>(c0[state_off(d, bi) + j]) : 0.0;
        }
        const int64_t len = lens[static_cast<size_t>(bi)];
        for (int64_t step = 0; step < len; ++step) {
          const int64_t t = reverse ? len - 1 - step : step;
          const T* xt = x_at(t, bi);
          // gx = W xt + Wb, gh = R h + Rb, one row per gate unit.
          for (int64_t row = 0; row < g * hidden; ++row) {
            double sx = wb != nullptr ? static_cast<double>(wb[row]) : 0.0;
            for (int64_t i = 0; i < input; ++i) {
              sx += static_cast<double>(wd[row * input + i]) * static_cast<double>(xt[i]);
            }
            double sh = rb != nullptr ? static_cast<double>(rb[row]) : 0.0;
            // GRU's h gate multiplies R_h by (r . h) unless linear_before_reset: done below.
            if (!(o_.cell == Cell::kGru && row >= 2 * hidden && !o_.linear_before_reset)) {
              for (int64_t k = 0; k < hidden; ++k) {
                sh += static_cast<double>(rd[row * hidden + k]) * h[static_cast<size_t>(k)];
              }
            }
            gx[static_cast<size_t>(row)] = sx;
            gh[static_cast<size_t>(row)] = sh;
          }
          Step(act, pd, rd, gx, gh, h, c, hn, hidden);
          if (y != nullptr) {
            for (int64_t j = 0; j < hidden; ++j) {
              y[y_off(t, d, bi) + j] = static_cast<T>(h[static_cast<size_t>(j)]);
            }
          }
        }
        if (yh != nullptr) {
          for (int64_t j = 0; j < hidden; ++j) {
            yh[state_off(d, bi) + j] = static_cast<T>(h[static_cast<size_t>(j)]);
          }
        }
        if (yc != nullptr) {
          for (int64_t j = 0; j < hidden; ++j) {
            yc[state_off(d, bi) + j] = static_cast<T>(c[static_cast<size_t>(j)]);
          }
        }
      }
    }
  }

  // One cell update of h (and c) from the gate sums gx (input side) and gh (recurrent side).
  template <typename T>
  void Step(const Activation* act, const T* pd, const T* rd, const std::vector<double>& gx,
            const std::vector<double>& gh, std::vector<double>& h, std::vector<double>& c,
            std::vector<double>& hn, int64_t hidden) const {
    auto at = [](const std::vector<double>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
    switch (o_.cell) {
      case Cell::kRnn:
        for (int64_t j = 0; j < hidden; ++j)
          hn[static_cast<size_t>(j)] = act[0](Clip(at(gx, j) + at(gh, j)));
        break;
      case Cell::kGru: {
        // r first: the h gate needs r . h_prev.
        std::vector<double>& rh = c;  // scratch (GRU has no cell state)
        for (int64_t j = 0; j < hidden; ++j) {
          const double rj = act[0](Clip(at(gx, hidden + j) + at(gh, hidden + j)));
          rh[static_cast<size_t>(j)] = rj;
        }
        for (int64_t j = 0; j < hidden; ++j) {
          const double z = act[0](Clip(at(gx, j) + at(gh, j)));
          const double rj = rh[static_cast<size_t>(j)];
          double pre;
          if (o_.linear_before_reset) {
            pre = at(gx, 2 * hidden + j) + rj * at(gh, 2 * hidden + j);
          } else {
            double s = at(gh, 2 * hidden + j);  // Rbh only
            for (int64_t k = 0; k < hidden; ++k) {
              s += static_cast<double>(rd[(2 * hidden + j) * hidden + k]) *
                   (at(rh, k) * h[static_cast<size_t>(k)]);
            }
            pre = at(gx, 2 * hidden + j) + s;
          }
          const double ht = act[1](Clip(pre));
          hn[static_cast<size_t>(j)] = (1 - z) * ht + z * h[static_cast<size_t>(j)];
        }
        std::fill(c.begin(), c.end(), 0.0);
        break;
      }
      case Cell::kLstm:
        for (int64_t j = 0; j < hidden; ++j) {
          const double cp = c[static_cast<size_t>(j)];
          const double pi = pd != nullptr ? static_cast<double>(pd[j]) : 0.0;
          const double po = pd != nullptr ? static_cast<double>(pd[hidden + j]) : 0.0;
          const double pf = pd != nullptr ? static_cast<double>(pd[2 * hidden + j]) : 0.0;
          const double i = act[0](Clip(at(gx, j) + at(gh, j) + pi * cp));
          const double f =
              o_.input_forget
                  ? 1 - i
                  : act[0](Clip(at(gx, 2 * hidden + j) + at(gh, 2 * hidden + j) + pf * cp));
          const double cc = act[1](Clip(at(gx, 3 * hidden + j) + at(gh, 3 * hidden + j)));
          const double cn = f * cp + i * cc;
          const double o = act[0](Clip(at(gx, hidden + j) + at(gh, hidden + j) + po * cn));
          c[static_cast<size_t>(j)] = cn;
          hn[static_cast<size_t>(j)] = o * act[2](cn);
        }
        break;
    }
    h.swap(hn);
  }

  Options o_;
};

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

Result<std::unique_ptr<Kernel>> CreateRecurrent(const KernelInfo& info, Cell cell) {
  const std::string_view op = CellName(cell);
  // Every output is optional (Y is often omitted), so RequireInputs (which wants output 0) is
  // not used.
  for (int i = 0; i < 3; ++i) {
    if (!info.has_input(i)) return OpError(op, "required input {} is missing", i);
  }
  AttrReader attrs(info);
  Options o;
  o.cell = cell;
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("output_sequence", 7));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("layout", 14));
  KILN_ASSIGN_OR_RETURN(int64_t hidden, attrs.Int("hidden_size", 0));
  if (hidden < 0 || hidden > (int64_t{1} << 24)) {
    return OpError(op, "attribute 'hidden_size' is {}, expected [1, 2^24]", hidden);
  }
  o.hidden = hidden;
  KILN_ASSIGN_OR_RETURN(std::string direction, attrs.String("direction", "forward"));
  if (direction == "bidirectional") {
    o.dirs = 2;
  } else if (direction == "reverse") {
    o.reverse_only = true;
  } else if (direction != "forward") {
    return OpError(op, "attribute 'direction' is '{}', expected forward, reverse or bidirectional",
                   direction);
  }
  KILN_ASSIGN_OR_RETURN(o.batch_major, attrs.Bool("layout", false));
  if (attrs.Has("clip")) {
    KILN_ASSIGN_OR_RETURN(float clip, attrs.Float("clip", 0));
    if (!(clip >= 0)) return OpError(op, "attribute 'clip' is {}, expected >= 0", clip);
    o.clip_set = true;
    o.clip = clip;
  }
  if (cell == Cell::kGru) {
    KILN_ASSIGN_OR_RETURN(o.linear_before_reset, attrs.Bool("linear_before_reset", false));
  } else if (attrs.Has("linear_before_reset")) {
    return OpError(op, "attribute 'linear_before_reset' is GRU only");
  }
  if (cell == Cell::kLstm) {
    KILN_ASSIGN_OR_RETURN(o.input_forget, attrs.Bool("input_forget", false));
  }
  // Activations: explicit list (one set per direction) or the defaults.
  const int nact = ActsPerDirection(cell);
  std::vector<std::string> names;
  if (const Attribute* a = info.node().FindAttribute("activations")) {
    if (a->type != AttributeType::kStrings) {
      return OpError(op, "attribute 'activations' must be a STRINGS");
    }
    names = a->strings;
    if (static_cast<int>(names.size()) != nact * o.dirs) {
      return OpError(op, "attribute 'activations' has {} entries, expected {} ({} per direction)",
                     names.size(), nact * o.dirs, nact);
    }
  } else {
    const std::vector<std::string> defaults =
        cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
        : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                             : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < o.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  std::vector<float> alphas, betas;
  for (std::string_view key : {"activation_alpha", "activation_beta"}) {
    if (const Attribute* a = info.node().FindAttribute(key)) {
      if (a->type != AttributeType::kFloats)
        return OpError(op, "attribute '{}' must be a FLOATS", key);
      (key == "activation_alpha" ? alphas : betas) = a->floats;
    }
  }
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const std::string lower = Lower(name);
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActSpecs) {
      if (s.name == lower) spec = &s;
    }
    if (spec == nullptr) return OpError(op, "unsupported activation '{}'", name);
    Activation act{spec->kind, spec->alpha, spec->beta};
    if (spec->params >= 1 && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (spec->params >= 2 && next_beta < betas.size()) act.beta = betas[next_beta++];
    o.acts.push_back(act);
  }
  return std::make_unique<RecurrentKernel>(std::move(o));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateRNN(const KernelInfo& info) {
  return CreateRecurrent(info, Cell::kRnn);
}
Result<std::unique_ptr<Kernel>> CreateGRU(const KernelInfo& info) {
  return CreateRecurrent(info, Cell::kGru);
}
Result<std::unique_ptr<Kernel>> CreateLSTM(const KernelInfo& info) {
  return CreateRecurrent(info, Cell::kLstm);
}

}  // namespace kiln::ref
