// SPDX-License-Identifier: Apache-2.0
// safetensors reader tests: files written here (u64 header length, JSON header padded with
// spaces to a multiple of 8 as Hugging Face's writer does, then the data), single files,
// sharded checkpoints with and without an index, and malformed files of every kind.

#include "llm/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/testing/mutate.h"

namespace kiln::llm {
namespace {

using Bytes = std::vector<uint8_t>;

// A file from a raw JSON header and data bytes.
Bytes FileOf(std::string header, const Bytes& data) {
  while ((8 + header.size()) % 8 != 0) header += ' ';
  const uint64_t n = header.size();
  Bytes out(8 + header.size() + data.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  Bytes data;
};

// A well-formed file: the tensors laid out one after another, in order.
Bytes Write(const std::vector<Tensor>& tensors, const std::string& metadata_json = "") {
  std::string header = "{";
  if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json + ",";
  Bytes data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::string shape;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      shape += (k ? "," : "") + std::to_string(t.shape[k]);
    }
    header += (i ? "," : "") + ("\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" +
                                shape + "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                                std::to_string(data.size() + t.data.size()) + "]}");
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  header += "}";
  return FileOf(header, data);
}

template <typename T>
Bytes Raw(std::initializer_list<T> v) {
  Bytes out(v.size() * sizeof(T));
  std::memcpy(out.data(), std::data(v), out.size());
  return out;
}

Result<std::unique_ptr<SafetensorsFile>> ParseBytes(const Bytes& b) {
  return SafetensorsFile::Parse(std::span<const uint8_t>(b.data(), b.size()));
}

std::string ErrorOf(const Bytes& b) {
  auto r = ParseBytes(b);
  EXPECT_FALSE(r.ok()) << "parsed a malformed file";
  return r.ok() ? "" : r.status().message();
}

#define EXPECT_ERROR_HAS(bytes, text)                      \
  do {                                                     \
    std::string msg_ = ErrorOf(bytes);                     \
    EXPECT_NE(msg_.find(text), std::string::npos) << msg_; \
  } while (0)

std::vector<Tensor> SmallTensors() {
  return {
      {"w", "F32", {2, 2}, Raw<float>({1.0f, 2.0f, 3.0f, 4.0f})},
      {"h", "F16", {3}, Raw<uint16_t>({0x3c00, 0x4000, 0xc000})},  // 1, 2, -2
      {"b", "BF16", {1, 2}, Raw<uint16_t>({0x3f80, 0x4040})},      // 1, 3
      {"ids", "I64", {2}, Raw<int64_t>({7, -1})},
      {"s", "F32", {}, Raw<float>({0.5f})},
      {"empty", "F32", {0, 3}, {}},
  };
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  const Bytes b = Write(SmallTensors(), R"({"format":"pt","note":"x"})");
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SafetensorsFile& f = **r;
  EXPECT_EQ(f.size(), b.size());
  ASSERT_EQ(f.tensors().size(), 6u);
  EXPECT_EQ(f.tensors()[0].name, "w");
  EXPECT_EQ(f.tensors()[5].name, "empty");
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0], (std::pair<std::string, std::string>{"format", "pt"}));

  const SafetensorsTensor* w = f.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w->nbytes, 16u);
  EXPECT_EQ(w->elements(), 4);
  float wv[4];
  std::memcpy(wv, w->data, 16);
  EXPECT_EQ(wv[3], 4.0f);

  const SafetensorsTensor* h = f.FindTensor("h");
  EXPECT_EQ(h->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(h->nbytes, 6u);
  uint16_t hv;
  std::memcpy(&hv, h->data + 4, 2);
  EXPECT_EQ(hv, 0xc000);
  EXPECT_EQ(h->data, w->data + 16);

  EXPECT_EQ(f.FindTensor("b")->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(f.FindTensor("ids")->dtype, SafetensorsDtype::kI64);
  EXPECT_EQ(f.FindTensor("ids")->nbytes, 16u);
  EXPECT_EQ(f.FindTensor("s")->shape.size(), 0u);
  EXPECT_EQ(f.FindTensor("s")->elements(), 1);
  EXPECT_EQ(f.FindTensor("empty")->nbytes, 0u);
  EXPECT_EQ(f.FindTensor("empty")->elements(), 0);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(Safetensors, DtypeNamesAndSizes) {
  const std::pair<SafetensorsDtype, std::pair<const char*, size_t>> cases[] = {
      {SafetensorsDtype::kBool, {"BOOL", 1}},       {SafetensorsDtype::kU8, {"U8", 1}},
      {SafetensorsDtype::kI8, {"I8", 1}},           {SafetensorsDtype::kF8_E4M3, {"F8_E4M3", 1}},
      {SafetensorsDtype::kF8_E5M2, {"F8_E5M2", 1}}, {SafetensorsDtype::kI16, {"I16", 2}},
      {SafetensorsDtype::kU16, {"U16", 2}},         {SafetensorsDtype::kF16, {"F16", 2}},
      {SafetensorsDtype::kBF16, {"BF16", 2}},       {SafetensorsDtype::kI32, {"I32", 4}},
      {SafetensorsDtype::kU32, {"U32", 4}},         {SafetensorsDtype::kF32, {"F32", 4}},
      {SafetensorsDtype::kI64, {"I64", 8}},         {SafetensorsDtype::kU64, {"U64", 8}},
      {SafetensorsDtype::kF64, {"F64", 8}},
  };
  for (const auto& [dtype, expect] : cases) {
    EXPECT_EQ(SafetensorsDtypeName(dtype), expect.first);
    EXPECT_EQ(SafetensorsDtypeSize(dtype), expect.second) << expect.first;
    // A one-element tensor of each parses with that size.
    Bytes b = Write({{"t", expect.first, {1}, Bytes(expect.second, 0)}});
    auto r = ParseBytes(b);
    ASSERT_TRUE(r.ok()) << expect.first << ": " << r.status().ToString();
    EXPECT_EQ((*r)->tensors()[0].dtype, dtype);
  }
}

TEST(Safetensors, EveryTruncationIsAnError) {
  const Bytes full = Write(SmallTensors(), R"({"format":"pt"})");
  ASSERT_TRUE(ParseBytes(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = SafetensorsFile::Parse(std::span<const uint8_t>(prefix.data(), prefix.size()));
    EXPECT_FALSE(r.ok()) << "a prefix of " << n << " of " << full.size() << " bytes parsed";
  }
}

TEST(Safetensors, MutatedFilesNeverCrash) {
  const Bytes seed = Write(SmallTensors(), R"({"format":"pt"})");
  const std::string seed_str(seed.begin(), seed.end());
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string m = testing::MutateBytes(seed_str, rng, "[]{}\",:0123456789FBI");
    const Bytes bytes(m.begin(), m.end());
    auto r = ParseBytes(bytes);
    if (!r.ok()) continue;
    ++accepted;
    for (const SafetensorsTensor& t : (*r)->tensors()) {
      if (t.nbytes == 0) continue;
      ASSERT_GE(t.data, bytes.data());
      ASSERT_LE(t.data + t.nbytes, bytes.data() + bytes.size());
    }
  }
  EXPECT_GT(accepted, 0);  // some mutations (in data bytes) leave the file valid
}

TEST(Safetensors, MalformedHeaders) {
  EXPECT_ERROR_HAS(Bytes({1, 2, 3}), "too short");
  Bytes long_header(8, 0);
  long_header[0] = 100;
  long_header.resize(20, ' ');
  EXPECT_ERROR_HAS(long_header, "the header length is 100 bytes but only 12 bytes follow");
  EXPECT_ERROR_HAS(FileOf("{\"w\": {", {}), "not valid JSON");
  EXPECT_ERROR_HAS(FileOf("[1, 2]", {}), "is an array, not an object");
  EXPECT_ERROR_HAS(FileOf(R"({"w": 3})", {}), "tensor 'w' is a number, not an object");
  EXPECT_ERROR_HAS(FileOf(R"({"w": {"dtype": "F32", "shape": [1]}})", Bytes(4)),
                   "tensor 'w' lacks one of 'dtype', 'shape' and 'data_offsets'");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F4", "shape": [1], "data_offsets": [0, 4]}})", Bytes(4)),
      "tensor 'w' has unknown dtype 'F4'");
  EXPECT_ERROR_HAS(FileOf(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", Bytes(4)),
                   "'dtype' is a number, not a string");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", Bytes(4)),
      "shape dim 0 is not a non-negative integer");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", Bytes(4)),
      "shape dim 0 is not a non-negative integer");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", Bytes(4)),
      "'shape' is a number, not an array");
  EXPECT_ERROR_HAS(
      FileOf(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
          Bytes(4)),
      "overflows 64 bits");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", Bytes(4)),
      "'data_offsets' must be two non-negative integers");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", Bytes(4)),
      "'data_offsets' must be two non-negative integers");
  EXPECT_ERROR_HAS(FileOf(R"({"__metadata__": {"format": 1}})", {}),
                   "'__metadata__' entry 'format' is a number, not a string");
  EXPECT_ERROR_HAS(FileOf(R"({"__metadata__": []})", {}), "'__metadata__' is an array");
}

TEST(Safetensors, BadOffsetsAndSizes) {
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", Bytes(4)),
      "tensor 'w' has data_offsets [4, 0]: end before begin");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", Bytes(4)),
      "tensor 'w' has data_offsets [0, 8], past the end of the 4 data bytes");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})",
             Bytes(4)),
      "'data_offsets' must be two non-negative integers");
  EXPECT_ERROR_HAS(
      FileOf(R"({"w": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}})", Bytes(8)),
      "tensor 'w' (F16 [3]) spans 8 bytes; its shape and dtype need 3 x 2");
  EXPECT_ERROR_HAS(FileOf(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                          Bytes(8)),
                   "tensors 'a' (data bytes [0, 8)) and 'b' (data bytes [4, 8)) overlap");
  EXPECT_ERROR_HAS(FileOf(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                              "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                          Bytes(8)),
                   "tensor 'a' is named twice");
  // Gaps are allowed, and an empty tensor overlaps nothing.
  auto gap = ParseBytes(FileOf(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                                   "e": {"dtype": "F32", "shape": [0], "data_offsets": [6, 6]}})",
                               Bytes(8)));
  EXPECT_TRUE(gap.ok()) << gap.status().ToString();
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "kiln_st_test_XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Put(const std::string& name, const Bytes& b) const {
    const std::string p = path_ + "/" + name;
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
  }
  std::string Put(const std::string& name, const std::string& s) const {
    return Put(name, Bytes(s.begin(), s.end()));
  }

 private:
  std::string path_;
};

const std::string kIndex = R"({"metadata": {"total_size": 24},
  "weight_map": {"a": "model-00001-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"}})";

void WriteShards(const TempDir& dir) {
  dir.Put("model-00001-of-00002.safetensors",
          Write({{"a", "F32", {2}, Raw<float>({1, 2})}, {"b", "F16", {2}, Raw<uint16_t>({0, 0})}}));
  dir.Put("model-00002-of-00002.safetensors", Write({{"c", "BF16", {1}, Raw<uint16_t>({0x3f80})}}));
}

TEST(SafetensorsSet, SingleFile) {
  TempDir dir;
  const Bytes b = Write(SmallTensors());
  dir.Put("model.safetensors", b);
  dir.Put("other.safetensors", Write({{"w", "F32", {1}, Raw<float>({9})}}));  // ignored
  dir.Put("config.json", std::string("{}"));
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->files().size(), 1u);
  EXPECT_EQ((*r)->files()[0]->path(), dir.path() + "/model.safetensors");
  EXPECT_EQ((*r)->tensors().size(), 6u);
  EXPECT_EQ((*r)->tensors()[0]->name, "b");  // sorted by name
  EXPECT_EQ((*r)->total_bytes(), b.size());
  const SafetensorsTensor* w = (*r)->FindTensor("w");
  ASSERT_NE(w, nullptr);
  float v;
  std::memcpy(&v, w->data + 8, 4);
  EXPECT_EQ(v, 3.0f);
}

TEST(SafetensorsSet, ShardedWithIndex) {
  TempDir dir;
  WriteShards(dir);
  dir.Put("model.safetensors.index.json", kIndex);
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->files().size(), 2u);
  ASSERT_EQ((*r)->tensors().size(), 3u);
  EXPECT_EQ((*r)->tensors()[2]->name, "c");
  EXPECT_EQ((*r)->FindTensor("c")->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ((*r)->FindTensor("b")->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ((*r)->FindTensor("d"), nullptr);
  uint64_t sum = 0;
  for (const auto& f : (*r)->files()) sum += std::filesystem::file_size(f->path());
  EXPECT_EQ((*r)->total_bytes(), sum);
}

TEST(SafetensorsSet, ShardsWithoutIndex) {
  TempDir dir;
  WriteShards(dir);
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->files().size(), 2u);
  EXPECT_NE((*r)->FindTensor("a"), nullptr);
  EXPECT_NE((*r)->FindTensor("c"), nullptr);
}

TEST(SafetensorsSet, MissingShard) {
  TempDir dir;
  dir.Put("model-00001-of-00002.safetensors",
          Write({{"a", "F32", {2}, Raw<float>({1, 2})}, {"b", "F16", {2}, Raw<uint16_t>({0, 0})}}));
  dir.Put("model.safetensors.index.json", kIndex);
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("model-00002-of-00002.safetensors"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("model.safetensors.index.json"), std::string::npos)
      << r.status().message();
}

TEST(SafetensorsSet, IndexDisagreesWithShards) {
  TempDir dir;
  WriteShards(dir);
  dir.Put("model.safetensors.index.json",
          std::string(R"({"weight_map": {"a": "model-00002-of-00002.safetensors",
                                         "c": "model-00002-of-00002.safetensors"}})"));
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "maps tensor 'a' to 'model-00002-of-00002.safetensors', which has no such tensor"),
            std::string::npos)
      << r.status().message();
}

TEST(SafetensorsSet, BadIndexes) {
  TempDir dir;
  WriteShards(dir);
  const auto error = [&](const std::string& index) {
    dir.Put("model.safetensors.index.json", index);
    auto r = SafetensorsSet::OpenDirectory(dir.path());
    EXPECT_FALSE(r.ok()) << index;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(error("{\"weight_map\": ").find("is not valid JSON"), std::string::npos);
  EXPECT_NE(error("{\"metadata\": {}}").find("no \"weight_map\" object"), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": 1}})").find("entry 'a' is a number"), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "../x.safetensors"}})").find("not a relative path"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "/etc/x.safetensors"}})").find("not a relative path"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {}})").find("names no tensors"), std::string::npos);
}

TEST(SafetensorsSet, DuplicateTensorAcrossFiles) {
  TempDir dir;
  dir.Put("a.safetensors", Write({{"x", "F32", {1}, Raw<float>({1})}}));
  dir.Put("b.safetensors", Write({{"x", "F32", {1}, Raw<float>({2})}}));
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'x' is in both '" + dir.path() +
                                      "/a.safetensors' and '" + dir.path() + "/b.safetensors'"),
            std::string::npos)
      << r.status().message();
}

TEST(SafetensorsSet, MalformedShardIsNamed) {
  TempDir dir;
  dir.Put("model.safetensors", Bytes({1, 2, 3}));
  auto r = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.safetensors': not a safetensors file"),
            std::string::npos)
      << r.status().message();
}

TEST(SafetensorsSet, MissingEmptyOrNotADirectory) {
  TempDir dir;
  auto missing = SafetensorsSet::OpenDirectory(dir.path() + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  auto empty = SafetensorsSet::OpenDirectory(dir.path());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("no safetensors weights"), std::string::npos);

  const std::string file = dir.Put("f.txt", std::string("x"));
  auto not_dir = SafetensorsSet::OpenDirectory(file);
  ASSERT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.status().message().find("is not a directory"), std::string::npos);

  auto open_missing = SafetensorsFile::Open(dir.path() + "/nope.safetensors");
  EXPECT_EQ(open_missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::llm
