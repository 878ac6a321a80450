// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CUDA kernel table, one part per group of ops (each in its own file).

#include <vector>

#include "kernels/registry.h"

namespace kiln::cuda {

std::vector<KernelDef> ElementwiseKernelDefs();  // elementwise.cc
std::vector<KernelDef>
ReduceKernelDefs();  // reduce.cc: normalization, reductions, pools, attention
std::vector<KernelDef>
DataKernelDefs();  // data.cc: views, Transpose, Gather, Concat, Slice, Resize
std::vector<KernelDef> BlasKernelDefs();  // blas.cc: MatMul, Gemm and fused forms (cuBLASLt)
std::vector<KernelDef> DnnKernelDefs();   // dnn.cc: Conv and FusedConv (cuDNN); empty without it

}  // namespace kiln::cuda
