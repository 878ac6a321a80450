// SPDX-License-Identifier: Apache-2.0
// Reference kernels for the optimizer ops of the ONNX training domain
// ("ai.onnx.preview.training", version 1): Adagrad, Adam and Momentum (standard and Nesterov).
// Each node updates one or more tensors in one step; rows in table_training.inc.
//
// NOTE on the layout: the inputs are R (learning rate, FLOAT or DOUBLE, one element), T (update
// count, INT64, one element) and then k groups of n tensors each: X_1..X_n, G_1..G_n and the
// per-op state (Adagrad: H; Adam: V then H; Momentum: V), so a node has 2 + k * n inputs with
// k = 3, 4, 3. The outputs are the new values in the same grouped order without G (X_new, then
// H_new / V_new, H_new / V_new), (k - 1) * n in all; omitted outputs are allowed. G and the state
// tensors must have their X's shape (the ONNX reference applies the update element-wise to
// equal shapes), and every X, G and state tensor has one dtype, FLOAT or DOUBLE. Every update is
// computed in double per element and rounded to the dtype once, following the pseudo code of
// the ONNX operator documents:
//   Adagrad:  r = R / (1 + T * decay_factor);  g = norm_coefficient * X + G;
//             H_new = H + g * g;  X_new = X - r * g / (sqrt(H_new) + epsilon)
//   Adam:     g = norm_coefficient * X + G;  V_new = alpha * V + (1 - alpha) * g;
//             H_new = beta * H + (1 - beta) * g * g;
//             r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R;
//             X_new = (1 - norm_coefficient_post) * (X - r * V_new / (sqrt(H_new) + epsilon))
//   Momentum: g = norm_coefficient * X + G;  V_new = alpha * V + (T > 0 ? beta : 1) * g;
//             X_new = X - R * V_new                      (mode "standard")
//             X_new = X - R * (g + alpha * V_new)        (mode "nesterov")
// Degenerate attributes (a zero denominator) give inf / NaN as IEEE arithmetic does.

#include <cmath>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class Optimizer { kAdagrad, kAdam, kMomentum };

struct OptimizerParams {
  Optimizer kind = Optimizer::kAdagrad;
  double norm_coefficient = 0;
  double norm_coefficient_post = 0;  // Adam
  double decay_factor = 0;           // Adagrad
  double epsilon = 0;                // Adagrad, Adam
  double alpha = 0;                  // Adam, Momentum
  double beta = 0;                   // Adam, Momentum
  bool nesterov = false;             // Momentum
};

std::string_view OpName(Optimizer kind) {
  switch (kind) {
    case Optimizer::kAdagrad:
      return "Adagrad";
    case Optimizer::kAdam:
      return "Adam";
    case Optimizer::kMomentum:
      return "Momentum";
  }
  return "?";
}

// Tensors per optimized variable among the inputs (X, G and the state).
int GroupCount(Optimizer kind) { return kind == Optimizer::kAdam ? 4 : 3; }

class OptimizerKernel final : public Kernel {
 public:
  // `num_tensors`: n, the number of optimized tensors.
  OptimizerKernel(const OptimizerParams& params, int num_tensors) : p_(params), n_(num_tensors) {}

  Status Compute(KernelContext& ctx) const override {
    const std::string_view op = OpName(p_.kind);
    const int k = GroupCount(p_.kind);
    const int num_inputs = 2 + k * n_;
    if (ctx.num_inputs() != num_inputs) {
      return OpError(op, "expects {} inputs (R, T and {} groups of {}), got {}", num_inputs, k, n_,
                     ctx.num_inputs());
    }
    for (int i = 0; i < num_inputs; ++i) KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
    const Tensor& r = ctx.input(0);
    const Tensor& t = ctx.input(1);
    if ((r.dtype() != DataType::kFloat32 && r.dtype() != DataType::kFloat64) ||
        r.num_elements() != 1) {
      return OpError(op, "R must be one FLOAT or DOUBLE value, got {}{}", DataTypeName(r.dtype()),
                     r.shape().ToString());
    }
    if (t.dtype() != DataType::kInt64 || t.num_elements() != 1) {
      return OpError(op, "T must be one INT64 value, got {}{}", DataTypeName(t.dtype()),
                     t.shape().ToString());
    }
    const double rate = ElementAsDouble(r, 0);
    const int64_t step = t.data<const int64_t>()[0];
    const DataType dtype = ctx.input(2).dtype();
    for (int g = 0; g < k; ++g) {
      for (int i = 0; i < n_; ++i) {
        const Tensor& x = ctx.input(2 + i);
        const Tensor& v = ctx.input(2 + g * n_ + i);
        if (v.dtype() != dtype) {
          return OpError(op, "input {} is {}, expected {} like input 2", 2 + g * n_ + i,
                         DataTypeName(v.dtype()), DataTypeName(dtype));
        }
        if (!(v.shape() == x.shape())) {
          return OpError(op, "input {} has shape {}, expected {} like X input {}", 2 + g * n_ + i,
                         v.shape().ToString(), x.shape().ToString(), 2 + i);
        }
      }
    }
    return DispatchType<float, double>(dtype, op, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      for (int i = 0; i < n_; ++i) KILN_RETURN_IF_ERROR(Update<T>(ctx, i, rate, step));
      return Status::OK();
    });
  }

 private:
  // Updates tensor i: reads X_i, G_i and its state, writes every output slot the context has.
  template <typename T>
  Status Update(KernelContext& ctx, int i, double rate, int64_t step) const {
    const Tensor& x = ctx.input(2 + i);
    const int64_t count = x.num_elements();
    const T* px = x.data<const T>();
    const T* pg = ctx.input(2 + n_ + i).data<const T>();
    const T* ps1 = ctx.input(2 + 2 * n_ + i).data<const T>();
    const T* ps2 =
        p_.kind == Optimizer::kAdam ? ctx.input(2 + 3 * n_ + i).data<const T>() : nullptr;
    // Output slots: X_new at i, the first state at n + i, Adam's H_new at 2n + i.
    T* out[3] = {nullptr, nullptr, nullptr};
    const int num_out = GroupCount(p_.kind) - 1;
    for (int o = 0; o < num_out; ++o) {
      const int slot = o * n_ + i;
      if (slot >= ctx.num_outputs()) continue;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(slot, x.dtype(), x.shape()));
      out[o] = y.data<T>();
    }
    auto store = [&](int o, int64_t e, double value) {
      if (out[o] != nullptr) out[o][e] = static_cast<T>(value);
    };

    const double alpha = p_.alpha, beta = p_.beta;
    switch (p_.kind) {
      case Optimizer::kAdagrad: {
        const double r = rate / (1 + static_cast<double>(step) * p_.decay_factor);
        for (int64_t e = 0; e < count; ++e) {
          const double xe = static_cast<double>(px[e]);
          const double g = p_.norm_coefficient * xe + static_cast<double>(pg[e]);
          const double h = static_cast<double>(ps1[e]) + g * g;
          store(0, e, xe - r * g / (std::sqrt(h) + p_.epsilon));
          store(1, e, h);
        }
        break;
      }
      case Optimizer::kAdam: {
        const double t = static_cast<double>(step);
        const double r =
            step > 0 ? rate * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : rate;
        for (int64_t e = 0; e < count; ++e) {
          const double xe = static_cast<double>(px[e]);
          const double g = p_.norm_coefficient * xe + static_cast<double>(pg[e]);
          const double v = alpha * static_cast<double>(ps1[e]) + (1 - alpha) * g;
          const double h = beta * static_cast<double>(ps2[e]) + (1 - beta) * g * g;
          const double x_new = xe - r * v / (std::sqrt(h) + p_.epsilon);
          store(0, e, (1 - p_.norm_coefficient_post) * x_new);
          store(1, e, v);
          store(2, e, h);
        }
        break;
      }
      case Optimizer::kMomentum: {
        const double beta_adjusted = step > 0 ? beta : 1;
        for (int64_t e = 0; e < count; ++e) {
          const double xe = static_cast<double>(px[e]);
          const double g = p_.norm_coefficient * xe + static_cast<double>(pg[e]);
          const double v = alpha * static_cast<double>(ps1[e]) + beta_adjusted * g;
          store(0, e, p_.nesterov ? xe - rate * (g + alpha * v) : xe - rate * v);
          store(1, e, v);
        }
        break;
      }
    }
    return Status::OK();
  }

  OptimizerParams p_;
  int n_;
};

// A FLOAT attribute as double; when `required`, its absence is an error.
Result<double> ReadFloat(const AttrReader& attrs, std::string_view name, float default_value,
                         bool required) {
  if (required && !attrs.Has(name)) {
    return OpError(attrs.op(), "required attribute '{}' is missing", name);
  }
  KILN_ASSIGN_OR_RETURN(float v, attrs.Float(name, default_value));
  return static_cast<double>(v);
}

Result<std::unique_ptr<Kernel>> CreateOptimizer(const KernelInfo& info, Optimizer kind) {
  const std::string_view op = OpName(kind);
  const int k = GroupCount(kind);
  const int num_inputs = info.num_inputs();
  if (num_inputs < 2 + k || (num_inputs - 2) % k != 0) {
    return OpError(op, "expects R, T and then {} groups of n >= 1 tensors, got {} inputs", k,
                   num_inputs);
  }
  const int n = (num_inputs - 2) / k;
  for (int i = 0; i < num_inputs; ++i) {
    if (!info.has_input(i)) return OpError(op, "input {} is missing", i);
  }
  KILN_RETURN_IF_ERROR(LimitOutputs(
      info, (k - 1) * n, fmt::format("{} optimized tensors have {} outputs", n, (k - 1) * n)));
  // Declared types, where known: R FLOAT/DOUBLE, T INT64, the rest one dtype (the registry has
  // checked input 2 against FLOAT/DOUBLE).
  const DataType r_type = info.input_type(0).dtype;
  if (r_type != DataType::kInvalid && r_type != DataType::kFloat32 &&
      r_type != DataType::kFloat64) {
    return OpError(op, "R must be FLOAT or DOUBLE, declared {}", DataTypeName(r_type));
  }
  const DataType t_type = info.input_type(1).dtype;
  if (t_type != DataType::kInvalid && t_type != DataType::kInt64) {
    return OpError(op, "T must be INT64, declared {}", DataTypeName(t_type));
  }
  const DataType x_type = info.input_type(2).dtype;
  for (int i = 3; i < num_inputs; ++i) {
    const DataType d = info.input_type(i).dtype;
    if (d != DataType::kInvalid && x_type != DataType::kInvalid && d != x_type) {
      return OpError(op, "input {} is declared {}, expected {} like input 2", i, DataTypeName(d),
                     DataTypeName(x_type));
    }
  }

  AttrReader attrs(info);
  OptimizerParams p;
  p.kind = kind;
  switch (kind) {
    case Optimizer::kAdagrad: {
      KILN_ASSIGN_OR_RETURN(p.norm_coefficient, ReadFloat(attrs, "norm_coefficient", 0.0f, false));
      KILN_ASSIGN_OR_RETURN(p.decay_factor, ReadFloat(attrs, "decay_factor", 0.0f, false));
      KILN_ASSIGN_OR_RETURN(p.epsilon, ReadFloat(attrs, "epsilon", 1e-6f, false));
      break;
    }
    case Optimizer::kAdam: {
      KILN_ASSIGN_OR_RETURN(p.norm_coefficient, ReadFloat(attrs, "norm_coefficient", 0.0f, false));
      KILN_ASSIGN_OR_RETURN(p.norm_coefficient_post,
                            ReadFloat(attrs, "norm_coefficient_post", 0.0f, false));
      KILN_ASSIGN_OR_RETURN(p.alpha, ReadFloat(attrs, "alpha", 0.9f, false));
      KILN_ASSIGN_OR_RETURN(p.beta, ReadFloat(attrs, "beta", 0.999f, false));
      KILN_ASSIGN_OR_RETURN(p.epsilon, ReadFloat(attrs, "epsilon", 1e-6f, false));
      break;
    }
    case Optimizer::kMomentum: {
      // Every Momentum attribute is required.
      KILN_ASSIGN_OR_RETURN(p.norm_coefficient, ReadFloat(attrs, "norm_coefficient", 0.0f, true));
      KILN_ASSIGN_OR_RETURN(p.alpha, ReadFloat(attrs, "alpha", 0.0f, true));
      KILN_ASSIGN_OR_RETURN(p.beta, ReadFloat(attrs, "beta", 0.0f, true));
      if (!attrs.Has("mode")) return OpError(op, "required attribute 'mode' is missing");
      KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", ""));
      if (mode != "standard" && mode != "nesterov") {
        return OpError(op, "attribute 'mode' is '{}', expected standard or nesterov", mode);
      }
      p.nesterov = mode == "nesterov";
      break;
    }
  }
  return std::make_unique<OptimizerKernel>(p, n);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateAdagrad(const KernelInfo& info) {
  return CreateOptimizer(info, Optimizer::kAdagrad);
}

Result<std::unique_ptr<Kernel>> CreateAdam(const KernelInfo& info) {
  return CreateOptimizer(info, Optimizer::kAdam);
}

Result<std::unique_ptr<Kernel>> CreateMomentum(const KernelInfo& info) {
  return CreateOptimizer(info, Optimizer::kMomentum);
}

}  // namespace kiln::ref
