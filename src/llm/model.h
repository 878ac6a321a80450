// SPDX-License-Identifier: Apache-2.0
#pragma once
// A decoder-only language model as kiln runs it: hyper-parameters, weights (views into the
// memory-mapped file, converted only where a kernel needs another form), the tokenizer and the
// chat template, loaded from a GGUF file or a Hugging Face checkpoint directory.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load("tinyllama.Q4_0.gguf"));
//   model->config().n_layers;  model->tokenizer().Encode(...);
//
// Architectures are a table (kArchitectures in model.cc): `llama` (Llama 2/3/3.x, TinyLlama,
// Mistral without sliding window, SmolLM), `qwen2` (bias on Q/K/V) and `qwen3` (RMSNorm on each
// head of Q and K). An entry says how the architecture differs from the Llama layer; the forward
// pass (engine.cc) is one, reading those differences from ModelConfig.
//
// Thread safety: immutable after Load; any number of threads may read it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "llm/llm_matmul.h"

namespace kiln::llm {

class Tokenizer;
class GgufFile;
class SafetensorsSet;

// How RoPE pairs the dimensions of a head: kNormal rotates (2i, 2i+1) (ggml mode 0, the order
// of GGUF `llama` files, whose Q/K rows the converter permuted), kNeox rotates (i, i + n_rot/2)
// (ggml mode 2, Hugging Face's rotate_half; qwen2/qwen3 GGUF files and every HF checkpoint).
enum class RopeOrder { kNormal, kNeox };

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "qwen3"
  std::string name;          // general.name / the directory's name
  int64_t n_layers = 0;
  int64_t hidden = 0;      // embedding width
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int64_t head_dim = 0;    // width of a query/key head
  int64_t ffn = 0;         // feed-forward width
  int64_t vocab = 0;
  int64_t context_length = 0;  // the longest sequence the model allows
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t n_rot = 0;  // rotated dimensions of a head (<= head_dim)
  RopeOrder rope_order = RopeOrder::kNormal;
  // Llama-3 frequency scaling: the angle of pair i is divided by rope_freq_factors[i]
  // ([n_rot / 2]; from the GGUF tensor rope_freqs.weight or config.json's rope_scaling). Empty:
  // no scaling.
  std::vector<float> rope_freq_factors;
  bool qkv_bias = false;  // qwen2
  bool qk_norm = false;   // qwen3
  bool tied_embeddings = false;
  std::string file_type;  // "Q4_0", "F16", "mixed", ... (what the weight matrices are)
};

// One layer's weights. Matrices are [out, in] views (WeightMatrix); vectors are F32.
struct LayerWeights {
  WeightMatrix wq, wk, wv, wo;
  WeightMatrix w_gate, w_up, w_down;
  const float* attn_norm = nullptr;  // [hidden]
  const float* ffn_norm = nullptr;   // [hidden]
  const float* bq = nullptr;         // [n_heads * head_dim]   (qkv_bias)
  const float* bk = nullptr;         // [n_kv_heads * head_dim] (qkv_bias)
  const float* bv = nullptr;         // [n_kv_heads * head_dim] (qkv_bias)
  const float* q_norm = nullptr;     // [head_dim] (qk_norm)
  const float* k_norm = nullptr;     // [head_dim] (qk_norm)
};

class Model {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // A GGUF file (a regular file) or a Hugging Face checkpoint directory (config.json,
  // *.safetensors, tokenizer.json). Errors name the problem: not a GGUF file, an unsupported
  // architecture or tensor type, a missing tensor, a shape that disagrees with the metadata.
  static Result<std::unique_ptr<Model>> Load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The Jinja chat template the model carries ("" when none).
  const std::string& chat_template() const { return chat_template_; }
  const WeightMatrix& token_embedding() const { return token_embd_; }  // [vocab, hidden]
  const WeightMatrix& output() const { return output_; }  // [vocab, hidden] (tied: the embedding)
  const float* output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Bytes of the weights as stored (what one decode step reads, roughly).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // The model file's size (the GGUF file, or the sum of the safetensors files).
  uint64_t file_bytes() const { return file_bytes_; }
  // Bytes of the packed weight copies (llm_matmul.h PackedWeights; 0 when none).
  uint64_t packed_bytes() const { return packed_ ? packed_->bytes() : 0; }

  // The architectures kiln runs, for messages: "llama, qwen2, qwen3".
  static std::string SupportedArchitectures();

 private:
  Model();
  friend class ModelLoader;

  ModelConfig config_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsSet> safetensors_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string chat_template_;
  WeightMatrix token_embd_{};
  WeightMatrix output_{};
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  // Packed copies of the matrices the active kernels read packed (null: none).
  std::unique_ptr<PackedWeights> packed_;
  // F32 copies of vectors stored in another type (norms and biases of F16/BF16 checkpoints).
  std::vector<std::unique_ptr<float[]>> owned_;
  uint64_t weight_bytes_ = 0;
  uint64_t file_bytes_ = 0;
};

}  // namespace kiln::llm
