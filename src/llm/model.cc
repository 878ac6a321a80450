// SPDX-License-Identifier: Apache-2.0
#include "llm/model.h"

#include <simdjson.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string_view>

#include "base/status.h"
#include "llm/ggml_quants.h"
#include "llm/gguf.h"
#include "llm/safetensors.h"
#include "llm/tokenizer.h"

namespace kiln::llm {

namespace {

// What an architecture changes in the Llama layer. Adding one is a row here (plus any new
// difference as a flag read by the forward pass).
struct ArchSpec {
  std::string_view name;      // GGUF general.architecture
  std::string_view hf_class;  // config.json "architectures"[0]
  RopeOrder gguf_rope;        // the RoPE order of the architecture's GGUF files
  bool qkv_bias;              // bias on the Q, K and V projections
  bool qk_norm;               // RMSNorm over each head of Q and K before RoPE
};

constexpr ArchSpec kArchitectures[] = {
    {"llama", "LlamaForCausalLM", RopeOrder::kNormal, false, false},
    {"qwen2", "Qwen2ForCausalLM", RopeOrder::kNeox, true, false},
    {"qwen3", "Qwen3ForCausalLM", RopeOrder::kNeox, false, true},
};

// A tensor's role and its name in each format ("{}" is the layer index).
struct TensorName {
  std::string_view gguf;
  std::string_view hf;
};
constexpr TensorName kTokenEmbd{"token_embd.weight", "model.embed_tokens.weight"};
constexpr TensorName kOutputNorm{"output_norm.weight", "model.norm.weight"};
constexpr TensorName kOutput{"output.weight", "lm_head.weight"};
constexpr TensorName kAttnNorm{"blk.{}.attn_norm.weight", "model.layers.{}.input_layernorm.weight"};
constexpr TensorName kWq{"blk.{}.attn_q.weight", "model.layers.{}.self_attn.q_proj.weight"};
constexpr TensorName kWk{"blk.{}.attn_k.weight", "model.layers.{}.self_attn.k_proj.weight"};
constexpr TensorName kWv{"blk.{}.attn_v.weight", "model.layers.{}.self_attn.v_proj.weight"};
constexpr TensorName kWo{"blk.{}.attn_output.weight", "model.layers.{}.self_attn.o_proj.weight"};
constexpr TensorName kBq{"blk.{}.attn_q.bias", "model.layers.{}.self_attn.q_proj.bias"};
constexpr TensorName kBk{"blk.{}.attn_k.bias", "model.layers.{}.self_attn.k_proj.bias"};
constexpr TensorName kBv{"blk.{}.attn_v.bias", "model.layers.{}.self_attn.v_proj.bias"};
constexpr TensorName kQNorm{"blk.{}.attn_q_norm.weight", "model.layers.{}.self_attn.q_norm.weight"};
constexpr TensorName kKNorm{"blk.{}.attn_k_norm.weight", "model.layers.{}.self_attn.k_norm.weight"};
constexpr TensorName kFfnNorm{"blk.{}.ffn_norm.weight",
                              "model.layers.{}.post_attention_layernorm.weight"};
constexpr TensorName kGate{"blk.{}.ffn_gate.weight", "model.layers.{}.mlp.gate_proj.weight"};
constexpr TensorName kUp{"blk.{}.ffn_up.weight", "model.layers.{}.mlp.up_proj.weight"};
constexpr TensorName kDown{"blk.{}.ffn_down.weight", "model.layers.{}.mlp.down_proj.weight"};

std::string LayerName(std::string_view pattern, int64_t layer) {
  std::string out(pattern);
  const size_t at = out.find("{}");
  if (at != std::string::npos) out.replace(at, 2, std::to_string(layer));
  return out;
}

// A tensor of either format: ggml dimension order (ne[0] innermost).
struct TensorRef {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

std::string DimsString(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

// Builds a Model from either format; one code path for both after tensor lookup.
class ModelLoader {
 public:
  explicit ModelLoader(Model* m) : m_(m) {}

  Status LoadGguf(const std::string& path);
  Status LoadHf(const std::string& dir);

 private:
  // The tensor of `role` (layer -1: not per layer); NotFound naming it when absent.
  Result<TensorRef> Find(const TensorName& role, int64_t layer) const;
  bool Has(const TensorName& role, int64_t layer) const;
  // A matrix of ggml shape [cols, rows] in a type the kernels compute.
  Result<WeightMatrix> Matrix(const TensorName& role, int64_t layer, int64_t rows, int64_t cols);
  // An F32 vector of `n` elements (converted from F16/BF16 when stored so).
  Result<const float*> Vector(const TensorName& role, int64_t layer, int64_t n);
  Status BindWeights();
  Status FinishRope(double factor, double low_freq_factor, double high_freq_factor,
                    double original_context);

  Model* m_;
  bool hf_ = false;
};

Model::Model() = default;
Model::~Model() = default;

std::string Model::SupportedArchitectures() {
  std::string s;
  for (const ArchSpec& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Status::NotFound("model '" + path + "' does not exist");
  }
  std::unique_ptr<Model> model(new Model());
  ModelLoader loader(model.get());
  Status s = std::filesystem::is_directory(status) ? loader.LoadHf(path) : loader.LoadGguf(path);
  // GgufFile's errors name the path already.
  if (!s.ok() && s.message().rfind("'" + path + "'", 0) != 0) {
    return s.WithContext("model '" + path + "'");
  }
  if (!s.ok()) return s;
  return model;
}

Result<TensorRef> ModelLoader::Find(const TensorName& role, int64_t layer) const {
  const std::string name = LayerName(hf_ ? role.hf : role.gguf, layer);
  TensorRef ref;
  ref.name = name;
  if (!hf_) {
    const GgufTensorInfo* t = m_->gguf_->FindTensor(name);
    if (t == nullptr) return Status::NotFound("tensor '" + name + "' is missing");
    ref.type = t->type;
    ref.ne = t->ne;
    ref.data = t->data;
    ref.nbytes = t->nbytes;
    return ref;
  }
  const SafetensorsTensor* t = m_->safetensors_->FindTensor(name);
  if (t == nullptr) return Status::NotFound("tensor '" + name + "' is missing");
  switch (t->dtype) {
    case SafetensorsDtype::kF32:
      ref.type = GgmlType::kF32;
      break;
    case SafetensorsDtype::kF16:
      ref.type = GgmlType::kF16;
      break;
    case SafetensorsDtype::kBF16:
      ref.type = GgmlType::kBF16;
      break;
    default:
      return Status::InvalidArgument("tensor '" + name + "' has dtype " +
                                     std::string(SafetensorsDtypeName(t->dtype)) +
                                     "; supported: F32, F16, BF16");
  }
  ref.ne.assign(t->shape.rbegin(), t->shape.rend());
  ref.data = t->data;
  ref.nbytes = t->nbytes;
  return ref;
}

bool ModelLoader::Has(const TensorName& role, int64_t layer) const {
  const std::string name = LayerName(hf_ ? role.hf : role.gguf, layer);
  return hf_ ? m_->safetensors_->FindTensor(name) != nullptr
             : m_->gguf_->FindTensor(name) != nullptr;
}

Result<WeightMatrix> ModelLoader::Matrix(const TensorName& role, int64_t layer, int64_t rows,
                                         int64_t cols) {
  KILN_ASSIGN_OR_RETURN(TensorRef t, Find(role, layer));
  if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows) {
    return Status::InvalidArgument("tensor '" + t.name + "' has shape " + DimsString(t.ne) +
                                   "; the metadata says [" + std::to_string(cols) + ", " +
                                   std::to_string(rows) + "]");
  }
  if (!GgmlTypeSupported(t.type)) {
    return Status::Unimplemented("tensor '" + t.name + "' has type " +
                                 std::string(GgmlTypeName(t.type)) +
                                 "; supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K");
  }
  WeightMatrix w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  w.row_bytes = RowBytes(t.type, cols);
  m_->weight_bytes_ += t.nbytes;
  return w;
}

Result<const float*> ModelLoader::Vector(const TensorName& role, int64_t layer, int64_t n) {
  KILN_ASSIGN_OR_RETURN(TensorRef t, Find(role, layer));
  int64_t elements = 1;
  for (int64_t d : t.ne) elements *= d;
  if (elements != n) {
    return Status::InvalidArgument("tensor '" + t.name + "' has shape " + DimsString(t.ne) +
                                   "; the metadata says [" + std::to_string(n) + "]");
  }
  m_->weight_bytes_ += t.nbytes;
  if (t.type == GgmlType::kF32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(t.data);
  }
  if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) {
    return Status::Unimplemented("tensor '" + t.name + "' has type " +
                                 std::string(GgmlTypeName(t.type)) +
                                 "; a vector must be f32, f16 or bf16");
  }
  auto owned = std::make_unique<float[]>(static_cast<size_t>(n));
  KILN_RETURN_IF_ERROR(DequantizeRow(t.type, t.data, owned.get(), n));
  m_->owned_.push_back(std::move(owned));
  return m_->owned_.back().get();
}

Status ModelLoader::BindWeights() {
  ModelConfig& c = m_->config_;
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;
  KILN_ASSIGN_OR_RETURN(m_->token_embd_, Matrix(kTokenEmbd, -1, c.vocab, c.hidden));
  KILN_ASSIGN_OR_RETURN(m_->output_norm_, Vector(kOutputNorm, -1, c.hidden));
  c.tied_embeddings = !Has(kOutput, -1);
  if (c.tied_embeddings) {
    m_->output_ = m_->token_embd_;
  } else {
    KILN_ASSIGN_OR_RETURN(m_->output_, Matrix(kOutput, -1, c.vocab, c.hidden));
  }
  m_->layers_.resize(static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = m_->layers_[static_cast<size_t>(i)];
    KILN_ASSIGN_OR_RETURN(l.attn_norm, Vector(kAttnNorm, i, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.wq, Matrix(kWq, i, q_width, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.wk, Matrix(kWk, i, kv_width, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.wv, Matrix(kWv, i, kv_width, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.wo, Matrix(kWo, i, c.hidden, q_width));
    if (c.qkv_bias) {
      KILN_ASSIGN_OR_RETURN(l.bq, Vector(kBq, i, q_width));
      KILN_ASSIGN_OR_RETURN(l.bk, Vector(kBk, i, kv_width));
      KILN_ASSIGN_OR_RETURN(l.bv, Vector(kBv, i, kv_width));
    }
    if (c.qk_norm) {
      KILN_ASSIGN_OR_RETURN(l.q_norm, Vector(kQNorm, i, c.head_dim));
      KILN_ASSIGN_OR_RETURN(l.k_norm, Vector(kKNorm, i, c.head_dim));
    }
    KILN_ASSIGN_OR_RETURN(l.ffn_norm, Vector(kFfnNorm, i, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.w_gate, Matrix(kGate, i, c.ffn, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.w_up, Matrix(kUp, i, c.ffn, c.hidden));
    KILN_ASSIGN_OR_RETURN(l.w_down, Matrix(kDown, i, c.hidden, c.ffn));
  }
  // What the weight matrices are, for messages and bench tables.
  GgmlType first = m_->layers_.empty() ? m_->token_embd_.type : m_->layers_[0].wq.type;
  bool mixed = false;
  for (const LayerWeights& l : m_->layers_) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      mixed |= w->type != first;
    }
  }
  c.file_type = mixed ? "mixed" : std::string(GgmlTypeName(first));
  // Packed copies for the kernels that read them; the file's pages of what was copied leave the
  // resident set (the token embedding's rows are still read from the file, a row per token).
  std::vector<WeightMatrix*> matrices{&m_->output_};
  for (LayerWeights& l : m_->layers_) {
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matrices.push_back(w);
    }
  }
  const GgufFile* gguf = m_->gguf_.get();
  m_->packed_ = PackedWeights::Pack(matrices, [gguf](const WeightMatrix& w) {
    if (gguf != nullptr) gguf->ReleasePages({w.data, static_cast<size_t>(w.rows) * w.row_bytes});
  });
  // How far ahead the packed kernels prefetch, timed on these weights (12 one-token passes over
  // them: about 0.25 s for 590 MiB), since the best distance differs between CPUs.
  if (m_->packed_ != nullptr) TunePackedPrefetch(matrices);
  return Status::OK();
}

// Checks the rotated dimensions and fills rope_freq_factors for Llama-3 frequency scaling: from
// the GGUF tensor rope_freqs.weight, or (factor > 0) computed from config.json's rope_scaling as
// convert_hf_to_gguf computes that tensor.
Status ModelLoader::FinishRope(double factor, double low_freq_factor, double high_freq_factor,
                               double original_context) {
  ModelConfig& c = m_->config_;
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    return Status::InvalidArgument("rope dimension count " + std::to_string(c.n_rot) +
                                   " must be even and in [2, head_dim " +
                                   std::to_string(c.head_dim) + "]");
  }
  const int64_t half = c.n_rot / 2;
  if (!hf_ && m_->gguf_->FindTensor("rope_freqs.weight") != nullptr) {
    const GgufTensorInfo* t = m_->gguf_->FindTensor("rope_freqs.weight");
    if (t->type != GgmlType::kF32 || t->ne.size() != 1 || t->ne[0] != half) {
      return Status::InvalidArgument("tensor 'rope_freqs.weight' must be f32 [" +
                                     std::to_string(half) + "]");
    }
    const float* ff = reinterpret_cast<const float*>(t->data);
    c.rope_freq_factors.assign(ff, ff + half);
  } else if (factor > 0) {
    if (!(low_freq_factor > 0) || !(high_freq_factor > low_freq_factor) ||
        !(original_context > 0)) {
      return Status::InvalidArgument(
          "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
          "original_max_position_embeddings > 0");
    }
    const double low_wavelen = original_context / low_freq_factor;
    const double high_wavelen = original_context / high_freq_factor;
    c.rope_freq_factors.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(c.rope_theta),
                                   -2.0 * static_cast<double>(i) / static_cast<double>(c.n_rot));
      const double wavelen = 2.0 * std::numbers::pi / freq;
      double ff = 1.0;
      if (wavelen > low_wavelen) {
        ff = factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
        ff = 1.0 / ((1.0 - smooth) / factor + smooth);
      }
      c.rope_freq_factors[static_cast<size_t>(i)] = static_cast<float>(ff);
    }
  }
  for (float f : c.rope_freq_factors) {
    if (!(f > 0.0f)) return Status::InvalidArgument("a rope frequency factor is not positive");
  }
  return Status::OK();
}

namespace {

Status CheckShape(const ModelConfig& c) {
  auto positive = [](int64_t v, const char* what) -> Status {
    if (v <= 0) return Status::InvalidArgument(std::string(what) + " must be positive");
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(positive(c.n_layers, "block_count"));
  KILN_RETURN_IF_ERROR(positive(c.hidden, "embedding_length"));
  KILN_RETURN_IF_ERROR(positive(c.n_heads, "attention.head_count"));
  KILN_RETURN_IF_ERROR(positive(c.n_kv_heads, "attention.head_count_kv"));
  KILN_RETURN_IF_ERROR(positive(c.head_dim, "the head dimension"));
  KILN_RETURN_IF_ERROR(positive(c.ffn, "feed_forward_length"));
  KILN_RETURN_IF_ERROR(positive(c.vocab, "the vocabulary size"));
  KILN_RETURN_IF_ERROR(positive(c.context_length, "context_length"));
  if (c.n_heads % c.n_kv_heads != 0) {
    return Status::InvalidArgument("head_count " + std::to_string(c.n_heads) +
                                   " is not a multiple of head_count_kv " +
                                   std::to_string(c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0) return Status::InvalidArgument("the head dimension must be even");
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0)) {
    return Status::InvalidArgument("layer_norm_rms_epsilon and rope.freq_base must be positive");
  }
  // Bounds that keep every size computation far from overflow.
  if (c.n_layers > 4096 || c.hidden > (1 << 20) || c.ffn > (1 << 22) || c.vocab > (1 << 24) ||
      c.n_heads > 4096 || c.head_dim > 4096 || c.context_length > (int64_t{1} << 24)) {
    return Status::InvalidArgument("model hyper-parameters out of range");
  }
  return Status::OK();
}

const ArchSpec* FindArch(std::string_view name, bool hf) {
  for (const ArchSpec& a : kArchitectures) {
    if ((hf ? a.hf_class : a.name) == name) return &a;
  }
  return nullptr;
}

// The TokenizerSpec of a GGUF file's tokenizer.ggml.* keys.
Result<TokenizerSpec> GgufTokenizerSpec(const GgufFile& f) {
  TokenizerSpec spec;
  KILN_ASSIGN_OR_RETURN(std::string_view model, f.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    spec.model = TokenizerSpec::Model::kSpm;
  } else if (model == "gpt2") {
    spec.model = TokenizerSpec::Model::kBpe;
  } else {
    return Status::Unimplemented("tokenizer model '" + std::string(model) +
                                 "' is not supported (supported: llama, gpt2)");
  }
  KILN_ASSIGN_OR_RETURN(std::string_view pre, f.GetStringOr("tokenizer.ggml.pre", "default"));
  spec.pre = std::string(pre);
  KILN_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
                        f.GetStringArray("tokenizer.ggml.tokens"));
  spec.tokens.assign(tokens.begin(), tokens.end());
  if (f.Find("tokenizer.ggml.scores") != nullptr) {
    KILN_ASSIGN_OR_RETURN(spec.scores, f.GetFloatArray("tokenizer.ggml.scores"));
  }
  if (f.Find("tokenizer.ggml.token_type") != nullptr) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> types, f.GetIntArray("tokenizer.ggml.token_type"));
    spec.token_types.assign(types.begin(), types.end());
  }
  if (f.Find("tokenizer.ggml.merges") != nullptr) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string_view> merges,
                          f.GetStringArray("tokenizer.ggml.merges"));
    spec.merges.assign(merges.begin(), merges.end());
  }
  const bool spm = spec.model == TokenizerSpec::Model::kSpm;
  KILN_ASSIGN_OR_RETURN(int64_t bos, f.GetIntOr("tokenizer.ggml.bos_token_id", spm ? 1 : -1));
  KILN_ASSIGN_OR_RETURN(int64_t eos, f.GetIntOr("tokenizer.ggml.eos_token_id", spm ? 2 : -1));
  KILN_ASSIGN_OR_RETURN(int64_t unk, f.GetIntOr("tokenizer.ggml.unknown_token_id", spm ? 0 : -1));
  KILN_ASSIGN_OR_RETURN(int64_t pad, f.GetIntOr("tokenizer.ggml.padding_token_id", -1));
  spec.bos_id = static_cast<int32_t>(bos);
  spec.eos_id = static_cast<int32_t>(eos);
  spec.unk_id = static_cast<int32_t>(unk);
  spec.pad_id = static_cast<int32_t>(pad);
  KILN_ASSIGN_OR_RETURN(spec.add_bos, f.GetBoolOr("tokenizer.ggml.add_bos_token", spm));
  KILN_ASSIGN_OR_RETURN(spec.add_eos, f.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  KILN_ASSIGN_OR_RETURN(spec.add_space_prefix, f.GetBoolOr("tokenizer.ggml.add_space_prefix", spm));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    KILN_ASSIGN_OR_RETURN(int64_t id, f.GetIntOr(key, -1));
    if (id >= 0) spec.eog_ids.push_back(static_cast<int32_t>(id));
  }
  return spec;
}

}  // namespace

Status ModelLoader::LoadGguf(const std::string& path) {
  hf_ = false;
  KILN_ASSIGN_OR_RETURN(m_->gguf_, GgufFile::Open(path));
  const GgufFile& f = *m_->gguf_;
  m_->file_bytes_ = f.size();
  ModelConfig& c = m_->config_;
  KILN_ASSIGN_OR_RETURN(std::string_view arch, f.GetString("general.architecture"));
  const ArchSpec* spec = FindArch(arch, /*hf=*/false);
  if (spec == nullptr) {
    return Status::Unimplemented(
        "architecture '" + std::string(arch) +
        "' is not supported (supported: " + Model::SupportedArchitectures() + ")");
  }
  c.architecture = std::string(arch);
  KILN_ASSIGN_OR_RETURN(std::string_view name, f.GetStringOr("general.name", ""));
  c.name = name.empty() ? std::filesystem::path(path).stem().string() : std::string(name);
  const std::string a = c.architecture + ".";
  KILN_ASSIGN_OR_RETURN(c.n_layers, f.GetInt(a + "block_count"));
  KILN_ASSIGN_OR_RETURN(c.hidden, f.GetInt(a + "embedding_length"));
  KILN_ASSIGN_OR_RETURN(c.ffn, f.GetInt(a + "feed_forward_length"));
  KILN_ASSIGN_OR_RETURN(c.n_heads, f.GetInt(a + "attention.head_count"));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, f.GetIntOr(a + "attention.head_count_kv", c.n_heads));
  KILN_ASSIGN_OR_RETURN(c.context_length, f.GetInt(a + "context_length"));
  const int64_t default_head = c.n_heads > 0 ? c.hidden / c.n_heads : 0;
  KILN_ASSIGN_OR_RETURN(c.head_dim, f.GetIntOr(a + "attention.key_length", default_head));
  KILN_ASSIGN_OR_RETURN(int64_t value_dim, f.GetIntOr(a + "attention.value_length", c.head_dim));
  if (value_dim != c.head_dim) {
    return Status::Unimplemented("attention.value_length " + std::to_string(value_dim) +
                                 " differs from key_length " + std::to_string(c.head_dim));
  }
  KILN_ASSIGN_OR_RETURN(double eps, f.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  c.rms_eps = static_cast<float>(eps);
  KILN_ASSIGN_OR_RETURN(double theta, f.GetFloatOr(a + "rope.freq_base", 10000.0));
  c.rope_theta = static_cast<float>(theta);
  KILN_ASSIGN_OR_RETURN(c.n_rot, f.GetIntOr(a + "rope.dimension_count", c.head_dim));
  KILN_ASSIGN_OR_RETURN(std::string_view scaling, f.GetStringOr(a + "rope.scaling.type", "none"));
  if (scaling != "none") {
    return Status::Unimplemented("rope scaling '" + std::string(scaling) + "' is not supported");
  }
  c.rope_order = spec->gguf_rope;
  c.qkv_bias = spec->qkv_bias;
  c.qk_norm = spec->qk_norm;
  KILN_ASSIGN_OR_RETURN(TokenizerSpec tspec, GgufTokenizerSpec(f));
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return Status::NotFound("tensor 'token_embd.weight' is missing");
  c.vocab = embd->ne.size() == 2 ? embd->ne[1] : 0;
  if (static_cast<int64_t>(tspec.tokens.size()) != c.vocab) {
    return Status::InvalidArgument("the vocabulary has " + std::to_string(tspec.tokens.size()) +
                                   " tokens but token_embd.weight has " + std::to_string(c.vocab) +
                                   " rows");
  }
  KILN_RETURN_IF_ERROR(CheckShape(c));
  KILN_ASSIGN_OR_RETURN(m_->tokenizer_, Tokenizer::Create(std::move(tspec)));
  KILN_ASSIGN_OR_RETURN(std::string_view tmpl, f.GetStringOr("tokenizer.chat_template", ""));
  m_->chat_template_ = std::string(tmpl);
  KILN_RETURN_IF_ERROR(FinishRope(0, 0, 0, 0));
  return BindWeights();
}

namespace {

Result<std::string> ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return Status::NotFound("cannot read '" + p.string() + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Status ModelLoader::LoadHf(const std::string& dir) {
  hf_ = true;
  namespace fs = std::filesystem;
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFile(fs::path(dir) / "config.json"));
  ModelConfig& c = m_->config_;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS || !root.is_object()) {
    return Status::InvalidArgument("config.json is not a JSON object");
  }
  std::string_view arch_class;
  simdjson::dom::array archs;
  if (root["architectures"].get(archs) != simdjson::SUCCESS || archs.size() == 0 ||
      archs.at(0).get(arch_class) != simdjson::SUCCESS) {
    return Status::InvalidArgument("config.json has no \"architectures\" list");
  }
  const ArchSpec* spec = FindArch(arch_class, /*hf=*/true);
  if (spec == nullptr) {
    std::string supported;
    for (const ArchSpec& a : kArchitectures) {
      supported += (supported.empty() ? "" : ", ") + std::string(a.hf_class);
    }
    return Status::Unimplemented("architecture '" + std::string(arch_class) +
                                 "' is not supported (supported: " + supported + ")");
  }
  auto get_int = [&](const char* key, int64_t fallback, bool required) -> Result<int64_t> {
    simdjson::dom::element e;
    if (root[key].get(e) != simdjson::SUCCESS || e.is_null()) {
      if (required)
        return Status::InvalidArgument(std::string("config.json lacks \"") + key + "\"");
      return fallback;
    }
    int64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS) {
      return Status::InvalidArgument(std::string("config.json \"") + key + "\" is not an integer");
    }
    return v;
  };
  auto get_double = [&](simdjson::dom::element obj, const char* key,
                        double fallback) -> Result<double> {
    simdjson::dom::element e;
    if (obj[key].get(e) != simdjson::SUCCESS || e.is_null()) return fallback;
    double v = 0;
    if (e.get(v) != simdjson::SUCCESS) {
      int64_t i = 0;
      if (e.get(i) != simdjson::SUCCESS) {
        return Status::InvalidArgument(std::string("config.json \"") + key + "\" is not a number");
      }
      v = static_cast<double>(i);
    }
    return v;
  };
  c.architecture = std::string(spec->name);
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  KILN_ASSIGN_OR_RETURN(c.n_layers, get_int("num_hidden_layers", 0, true));
  KILN_ASSIGN_OR_RETURN(c.hidden, get_int("hidden_size", 0, true));
  KILN_ASSIGN_OR_RETURN(c.ffn, get_int("intermediate_size", 0, true));
  KILN_ASSIGN_OR_RETURN(c.n_heads, get_int("num_attention_heads", 0, true));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, get_int("num_key_value_heads", c.n_heads, false));
  KILN_ASSIGN_OR_RETURN(c.context_length, get_int("max_position_embeddings", 0, true));
  KILN_ASSIGN_OR_RETURN(c.vocab, get_int("vocab_size", 0, true));
  KILN_ASSIGN_OR_RETURN(c.head_dim,
                        get_int("head_dim", c.n_heads > 0 ? c.hidden / c.n_heads : 0, false));
  KILN_ASSIGN_OR_RETURN(double eps, get_double(root, "rms_norm_eps", 1e-6));
  c.rms_eps = static_cast<float>(eps);
  KILN_ASSIGN_OR_RETURN(double theta, get_double(root, "rope_theta", 10000.0));
  c.rope_theta = static_cast<float>(theta);
  c.n_rot = c.head_dim;
  c.rope_order = RopeOrder::kNeox;  // HF checkpoints keep rotate_half's order
  c.qkv_bias = spec->qkv_bias;
  bool attention_bias = false;
  if (root["attention_bias"].get(attention_bias) == simdjson::SUCCESS && attention_bias) {
    c.qkv_bias = true;
  }
  c.qk_norm = spec->qk_norm;
  double factor = 0, low = 0, high = 0, original = 0;
  simdjson::dom::element scaling;
  if (root["rope_scaling"].get(scaling) == simdjson::SUCCESS && scaling.is_object()) {
    std::string_view type;
    if (scaling["rope_type"].get(type) != simdjson::SUCCESS &&
        scaling["type"].get(type) != simdjson::SUCCESS) {
      return Status::InvalidArgument("config.json rope_scaling has no rope_type");
    }
    if (type != "llama3" && type != "default") {
      return Status::Unimplemented("rope scaling '" + std::string(type) +
                                   "' is not supported (supported: llama3)");
    }
    if (type == "llama3") {
      KILN_ASSIGN_OR_RETURN(factor, get_double(scaling, "factor", 0));
      KILN_ASSIGN_OR_RETURN(low, get_double(scaling, "low_freq_factor", 1));
      KILN_ASSIGN_OR_RETURN(high, get_double(scaling, "high_freq_factor", 4));
      KILN_ASSIGN_OR_RETURN(original,
                            get_double(scaling, "original_max_position_embeddings", 8192));
      if (!(factor > 0)) return Status::InvalidArgument("llama3 rope scaling needs factor > 0");
    }
  }
  // Untied (the default of these architectures' configs) needs lm_head.weight.
  bool tie = false;
  if (root["tie_word_embeddings"].get(tie) != simdjson::SUCCESS) tie = false;
  KILN_RETURN_IF_ERROR(CheckShape(c));
  KILN_ASSIGN_OR_RETURN(m_->safetensors_, SafetensorsSet::OpenDirectory(dir));
  m_->file_bytes_ = m_->safetensors_->total_bytes();
  KILN_ASSIGN_OR_RETURN(TokenizerSpec tspec, LoadHfTokenizer(dir));
  if (static_cast<int64_t>(tspec.tokens.size()) > c.vocab) {
    return Status::InvalidArgument("tokenizer.json has " + std::to_string(tspec.tokens.size()) +
                                   " tokens but config.json's vocab_size is " +
                                   std::to_string(c.vocab));
  }
  KILN_ASSIGN_OR_RETURN(m_->tokenizer_, Tokenizer::Create(std::move(tspec)));
  // The chat template: tokenizer_config.json's "chat_template" (a string).
  Result<std::string> tc = ReadFile(fs::path(dir) / "tokenizer_config.json");
  if (tc.ok()) {
    simdjson::padded_string tpad(*tc);
    simdjson::dom::parser tparser;  // `root` stays valid in `parser`
    simdjson::dom::element troot;
    std::string_view tmpl;
    if (tparser.parse(tpad).get(troot) == simdjson::SUCCESS &&
        troot["chat_template"].get(tmpl) == simdjson::SUCCESS) {
      m_->chat_template_ = std::string(tmpl);
    }
  }
  KILN_RETURN_IF_ERROR(FinishRope(factor, low, high, original));
  if (!tie && !Has(kOutput, -1)) return Status::NotFound("tensor 'lm_head.weight' is missing");
  return BindWeights();
}

}  // namespace kiln::llm
