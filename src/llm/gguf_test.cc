// SPDX-License-Identifier: Apache-2.0
// GGUF reader tests. The files are written here by a small writer that follows the format's
// description (gguf.h, llama.cpp's docs/gguf.md), independently of the reader; expected sizes
// come from ggml's block layouts (ggml-common.h), written out in kTypes below.

#include "llm/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/testing/mutate.h"

namespace kiln::llm {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void Put(Bytes* out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->insert(out->end(), b, b + sizeof(T));
}

void PutString(Bytes* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

// Writes GGUF files: metadata entries and tensors in the order added; tensor offsets are laid
// out one after another at multiples of the alignment unless given.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  template <typename T>
  GgufWriter& Scalar(std::string_view key, uint32_t type, T v) {
    PutString(&kv_, key);
    Put<uint32_t>(&kv_, type);
    Put<T>(&kv_, v);
    ++n_kv_;
    return *this;
  }
  GgufWriter& String(std::string_view key, std::string_view v) {
    PutString(&kv_, key);
    Put<uint32_t>(&kv_, 8);
    PutString(&kv_, v);
    ++n_kv_;
    return *this;
  }
  template <typename T>
  GgufWriter& Array(std::string_view key, uint32_t element_type, const std::vector<T>& v) {
    PutString(&kv_, key);
    Put<uint32_t>(&kv_, 9);
    Put<uint32_t>(&kv_, element_type);
    Put<uint64_t>(&kv_, v.size());
    for (const T& x : v) Put<T>(&kv_, x);
    ++n_kv_;
    return *this;
  }
  GgufWriter& StringArray(std::string_view key, const std::vector<std::string>& v) {
    PutString(&kv_, key);
    Put<uint32_t>(&kv_, 9);
    Put<uint32_t>(&kv_, 8);
    Put<uint64_t>(&kv_, v.size());
    for (const std::string& s : v) PutString(&kv_, s);
    ++n_kv_;
    return *this;
  }
  // Raw bytes of one entry (for malformed ones).
  GgufWriter& RawKv(const Bytes& b) {
    kv_.insert(kv_.end(), b.begin(), b.end());
    ++n_kv_;
    return *this;
  }
  // A tensor of `nbytes` bytes filled with `fill` (0 bytes: none written, whatever the info
  // says); `offset` < 0 places it after the previous.
  GgufWriter& Tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, size_t nbytes,
                     uint8_t fill = 0, int64_t offset = -1) {
    tensors_.push_back({std::string(name), std::move(ne), type, nbytes, fill, offset});
    return *this;
  }
  GgufWriter& Alignment(size_t a) {
    alignment_ = a;
    return *this;
  }

  Bytes Build() const {
    Bytes out;
    Put<uint32_t>(&out, 0x46554747);  // "GGUF"
    Put<uint32_t>(&out, version_);
    Put<uint64_t>(&out, tensors_.size());
    Put<uint64_t>(&out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const T& t : tensors_) {
      uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = std::max(next, (off + t.nbytes + alignment_ - 1) / alignment_ * alignment_);
      PutString(&out, t.name);
      Put<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) Put<uint64_t>(&out, d);
      Put<uint32_t>(&out, t.type);
      Put<uint64_t>(&out, off);
    }
    while (out.size() % alignment_ != 0) out.push_back(0);
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].nbytes == 0) continue;  // no data written (for malformed infos)
      const size_t end = data_start + offsets[i] + tensors_[i].nbytes;
      if (out.size() < end) out.resize(end, 0);
      std::memset(out.data() + data_start + offsets[i], tensors_[i].fill, tensors_[i].nbytes);
    }
    return out;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    size_t nbytes;
    uint8_t fill;
    int64_t offset;
  };
  uint32_t version_;
  uint64_t n_kv_ = 0;
  Bytes kv_;
  std::vector<T> tensors_;
  size_t alignment_ = 32;
};

// GGUF value type numbers, as the format numbers them.
enum : uint32_t { U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };

Result<std::unique_ptr<GgufFile>> ParseBytes(const Bytes& b) {
  return GgufFile::Parse(std::span<const uint8_t>(b.data(), b.size()));
}

// The error message of parsing `b`, which must fail.
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

// ggml's types with their block geometry, from ggml-common.h's block structs (elements per
// block, bytes per block) and ggml.c's type names.
struct TypeCase {
  uint32_t number;
  const char* name;
  int64_t block;
  size_t block_bytes;
};
constexpr TypeCase kTypes[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},
};

TEST(GgmlType, NamesAndGeometryMatchGgml) {
  for (const TypeCase& c : kTypes) {
    GgmlType t = static_cast<GgmlType>(c.number);
    EXPECT_EQ(GgmlTypeName(t), c.name) << c.number;
    EXPECT_EQ(BlockElements(t), c.block) << c.name;
    EXPECT_EQ(BlockBytes(t), c.block_bytes) << c.name;
  }
  EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(4)), "");  // q4_2, removed from ggml
  EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(99)), "");
}

// A file with one entry of every metadata type and arrays of several.
GgufWriter EveryMetadataType(uint32_t version) {
  GgufWriter w(version);
  w.Scalar<uint8_t>("u8", U8, 200)
      .Scalar<int8_t>("i8", I8, -100)
      .Scalar<uint16_t>("u16", U16, 60000)
      .Scalar<int16_t>("i16", I16, -30000)
      .Scalar<uint32_t>("u32", U32, 4000000000u)
      .Scalar<int32_t>("i32", I32, -2000000000)
      .Scalar<float>("f32", F32, 0.25f)
      .Scalar<uint8_t>("bool", BOOL, 1)
      .String("string", "héllo \"world\"")
      .Scalar<uint64_t>("u64", U64, 1ull << 40)
      .Scalar<int64_t>("i64", I64, -(1ll << 50))
      .Scalar<double>("f64", F64, -1.5)
      .Scalar<uint64_t>("u64.huge", U64, std::numeric_limits<uint64_t>::max())
      .Array<int32_t>("arr.i32", I32, {1, -2, 3})
      .Array<uint8_t>("arr.u8", U8, {7, 8})
      .Array<float>("arr.f32", F32, {0.5f, -1.0f, 3.25f})
      .Array<double>("arr.f64", F64, {2.5})
      .Array<uint64_t>("arr.u64", U64, {5, 6})
      .Array<uint8_t>("arr.bool", BOOL, {1, 0})
      .Array<int32_t>("arr.empty", I32, {})
      .StringArray("arr.str", {"a", "", "<0x0A>", "▁the"});
  return w;
}

class GgufVersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersionTest, ReadsEveryMetadataType) {
  const Bytes b = EveryMetadataType(GetParam()).Build();
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), GetParam());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.size(), b.size());
  EXPECT_TRUE(f.tensors().empty());
  ASSERT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.metadata()[0].key(), "u8");
  EXPECT_EQ(f.metadata()[20].key(), "arr.str");

  EXPECT_EQ(*f.GetInt("u8"), 200);
  EXPECT_EQ(*f.GetInt("i8"), -100);
  EXPECT_EQ(*f.GetInt("u16"), 60000);
  EXPECT_EQ(*f.GetInt("i16"), -30000);
  EXPECT_EQ(*f.GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*f.GetInt("i32"), -2000000000);
  EXPECT_EQ(*f.GetInt("u64"), 1ll << 40);
  EXPECT_EQ(*f.GetInt("i64"), -(1ll << 50));
  EXPECT_EQ(*f.GetFloat("f32"), 0.25);
  EXPECT_EQ(*f.GetFloat("f64"), -1.5);
  EXPECT_EQ(*f.GetFloat("i32"), -2000000000.0);  // integers read as numbers
  EXPECT_EQ(*f.GetBool("bool"), true);
  EXPECT_EQ(*f.GetString("string"), "héllo \"world\"");
  EXPECT_EQ(f.Find("u32")->type(), GgufValueType::kU32);

  EXPECT_EQ(*f.GetIntArray("arr.i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetIntArray("arr.u8"), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(*f.GetIntArray("arr.u64"), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(*f.GetFloatArray("arr.f32"), (std::vector<float>{0.5f, -1.0f, 3.25f}));
  EXPECT_EQ(*f.GetFloatArray("arr.f64"), (std::vector<float>{2.5f}));
  EXPECT_EQ(*f.GetFloatArray("arr.i32"), (std::vector<float>{1, -2, 3}));
  EXPECT_TRUE(f.GetIntArray("arr.empty")->empty());
  EXPECT_EQ(*f.GetStringArray("arr.str"),
            (std::vector<std::string_view>{"a", "", "<0x0A>", "▁the"}));

  const GgufValue* arr = f.Find("arr.str");
  ASSERT_NE(arr, nullptr);
  EXPECT_TRUE(arr->is_array());
  EXPECT_EQ(arr->element_type(), GgufValueType::kString);
  EXPECT_EQ(arr->size(), 4u);
  EXPECT_EQ(*arr->StringAt(3), "▁the");
  EXPECT_EQ(*f.Find("arr.i32")->IntAt(1), -2);
  EXPECT_EQ(*f.Find("arr.f32")->FloatAt(2), 3.25);
  EXPECT_EQ(f.Find("arr.bool")->element_type(), GgufValueType::kBool);

  EXPECT_EQ(f.Find("bool")->ToString(), "true");
  EXPECT_EQ(f.Find("i8")->ToString(), "-100");
  EXPECT_EQ(f.Find("f32")->ToString(), "0.25");
  EXPECT_EQ(f.Find("u64.huge")->ToString(), "18446744073709551615");
  EXPECT_EQ(f.Find("string")->ToString(), "\"héllo \\\"world\\\"\"");
  EXPECT_EQ(f.Find("arr.i32")->ToString(), "[1, -2, 3]");
  EXPECT_EQ(f.Find("arr.i32")->ToString(2), "[1, -2, ... (3 total)]");
  EXPECT_EQ(f.Find("arr.str")->ToString(1), "[\"a\", ... (4 total)]");
  EXPECT_EQ(f.Find("arr.empty")->ToString(), "[]");
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufVersionTest, ::testing::Values(2u, 3u));

TEST(Gguf, GettersNameKeyAndTypes) {
  const Bytes b = EveryMetadataType(3).Build();
  auto f = std::move(ParseBytes(b)).value();

  Result<int64_t> missing = f->GetInt("llama.block_count");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'llama.block_count'"), std::string::npos);

  Result<int64_t> wrong = f->GetInt("string");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(), "GGUF key 'string' holds string; wanted an integer");
  EXPECT_EQ(f->GetString("u32").status().message(), "GGUF key 'u32' holds u32; wanted a string");
  EXPECT_EQ(f->GetBool("u8").status().message(), "GGUF key 'u8' holds u8; wanted a bool");
  EXPECT_EQ(f->GetFloat("bool").status().message(), "GGUF key 'bool' holds bool; wanted a number");
  EXPECT_EQ(f->GetInt("f32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetStringArray("arr.i32").status().message(),
            "GGUF key 'arr.i32' holds an array of i32; wanted an array of strings");
  EXPECT_EQ(f->GetIntArray("arr.f32").status().message(),
            "GGUF key 'arr.f32' holds an array of f32; wanted an array of integers");
  EXPECT_EQ(f->GetFloatArray("string").status().message(),
            "GGUF key 'string' holds string; wanted an array of numbers");
  EXPECT_EQ(f->GetString("arr.str").status().message(),
            "GGUF key 'arr.str' holds an array of string; wanted a string");
  EXPECT_FALSE(f->Find("arr.f32")->IntAt(0).ok());
  EXPECT_FALSE(f->Find("arr.i32")->StringAt(0).ok());

  Result<int64_t> huge = f->GetInt("u64.huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("18446744073709551615"), std::string::npos);
  EXPECT_EQ(*f->GetFloat("u64.huge"), 18446744073709551615.0);

  EXPECT_EQ(*f->GetIntOr("absent", 7), 7);
  EXPECT_EQ(*f->GetIntOr("i16", 7), -30000);
  EXPECT_FALSE(f->GetIntOr("string", 7).ok());
  EXPECT_EQ(*f->GetFloatOr("absent", 1e-5), 1e-5);
  EXPECT_FALSE(f->GetFloatOr("string", 1.0).ok());
  EXPECT_EQ(*f->GetBoolOr("absent", true), true);
  EXPECT_EQ(*f->GetBoolOr("bool", false), true);
  EXPECT_FALSE(f->GetBoolOr("u8", false).ok());
  EXPECT_EQ(*f->GetStringOr("absent", "x"), "x");
  EXPECT_EQ(*f->GetStringOr("string", "x"), "héllo \"world\"");
  EXPECT_FALSE(f->GetStringOr("u8", "x").ok());
}

TEST(Gguf, U64ArrayBeyondInt64IsAnError) {
  Bytes b =
      GgufWriter().Array<uint64_t>("big", U64, {1, std::numeric_limits<uint64_t>::max()}).Build();
  auto f = std::move(ParseBytes(b)).value();
  Result<std::vector<int64_t>> r = f->GetIntArray("big");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("element 1"), std::string::npos) << r.status().message();
  EXPECT_FALSE(f->Find("big")->IntAt(1).ok());
  EXPECT_EQ(*f->Find("big")->IntAt(0), 1);
}

class GgufAlignmentTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufAlignmentTest, TensorsAreAlignedAndHoldTheirBytes) {
  const uint32_t alignment = GetParam();
  GgufWriter w;
  w.Scalar<uint32_t>("general.alignment", U32, alignment)
      .String("general.architecture", "llama")
      .Tensor("a", {4, 3}, 0, 4 * 3 * 4, 0x11)  // f32 [3, 4]: 48 bytes
      .Tensor("b", {64}, 8, 2 * 34, 0x22)       // q8_0: 2 blocks of 34 bytes
      .Tensor("c", {5}, 1, 10, 0x33)            // f16
      .Alignment(alignment);
  const Bytes b = w.Build();
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = **r;
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  ASSERT_EQ(f.tensors().size(), 3u);
  const uint8_t fills[] = {0x11, 0x22, 0x33};
  const size_t sizes[] = {48, 68, 10};
  uint64_t expect_offset = 0;
  for (size_t i = 0; i < 3; ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.nbytes, sizes[i]) << t.name;
    EXPECT_EQ(t.offset, expect_offset) << t.name;
    EXPECT_EQ(static_cast<size_t>(t.data - b.data()) % alignment, 0u) << t.name;
    EXPECT_EQ(t.data, b.data() + f.data_offset() + t.offset);
    for (size_t k = 0; k < t.nbytes; ++k) ASSERT_EQ(t.data[k], fills[i]) << t.name << " " << k;
    expect_offset += (sizes[i] + alignment - 1) / alignment * alignment;
  }
  const GgufTensorInfo* a = f.FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->elements(), 12);
  EXPECT_EQ(f.FindTensor("b")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f.FindTensor("zzz"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufAlignmentTest, ::testing::Values(32u, 64u, 1u, 256u));

TEST(Gguf, EveryTypeIsSizedByItsBlocks) {
  GgufWriter w;
  for (const TypeCase& c : kTypes) {
    // 2 blocks per row, 3 rows, 2 planes: 12 blocks.
    w.Tensor(c.name, {static_cast<uint64_t>(2 * c.block), 3, 2}, c.number, 12 * c.block_bytes);
  }
  const Bytes b = w.Build();
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const TypeCase& c : kTypes) {
    const GgufTensorInfo* t = (*r)->FindTensor(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(static_cast<uint32_t>(t->type), c.number);
    EXPECT_EQ(t->nbytes, 12 * c.block_bytes) << c.name;
    EXPECT_EQ(t->elements(), 12 * c.block) << c.name;
  }
}

TEST(Gguf, FourDimensionsAndZeroTensors) {
  Bytes b = GgufWriter().Tensor("t", {2, 3, 4, 5}, 0, 2 * 3 * 4 * 5 * 4).Build();
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->tensors()[0].elements(), 120);

  Bytes empty = GgufWriter().Build();  // header only: no metadata, no tensors
  empty.resize(24);                    // without the writer's padding
  auto e = ParseBytes(empty);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*e)->metadata().empty());
}

// A small file touching every part of the format, whose last tensor ends the file.
Bytes SmallFile() {
  return GgufWriter()
      .String("general.architecture", "llama")
      .Scalar<uint32_t>("general.alignment", U32, 32)
      .Array<float>("scores", F32, {1.0f, 2.0f})
      .StringArray("tokens", {"<s>", "a"})
      .Scalar<uint8_t>("flag", BOOL, 0)
      .Tensor("w", {32, 2}, 2, 2 * 18, 0x5a)  // q4_0: 2 blocks
      .Tensor("n", {3}, 0, 12, 0x01)
      .Build();
}

TEST(Gguf, EveryTruncationIsAnError) {
  const Bytes full = SmallFile();
  ASSERT_TRUE(ParseBytes(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    // An exact-size heap copy, so that a sanitizer build sees any read past the end.
    Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = GgufFile::Parse(std::span<const uint8_t>(prefix.data(), prefix.size()));
    EXPECT_FALSE(r.ok()) << "a prefix of " << n << " of " << full.size() << " bytes parsed";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

TEST(Gguf, MutatedFilesNeverCrash) {
  const Bytes seed = SmallFile();
  const std::string seed_str(seed.begin(), seed.end());
  std::mt19937 rng(18);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string m = testing::MutateBytes(seed_str, rng, std::string("\0\1\x20\x40\xff", 5));
    const Bytes bytes(m.begin(), m.end());
    auto r = ParseBytes(bytes);
    if (!r.ok()) continue;
    ++accepted;
    for (const GgufValue& v : (*r)->metadata()) (void)v.ToString();
    for (const GgufTensorInfo& t : (*r)->tensors()) {
      ASSERT_GE(t.data, bytes.data());
      ASSERT_LE(t.data + t.nbytes, bytes.data() + bytes.size());
    }
  }
  EXPECT_GT(accepted, 0);  // some mutations (in data bytes) leave the file valid
}

TEST(Gguf, WrongMagic) {
  Bytes b = SmallFile();
  b[0] = 'X';
  EXPECT_ERROR_HAS(b, "not a GGUF file: the magic is 'XGUF'");
  EXPECT_ERROR_HAS(Bytes({'G', 'G'}), "too short");
  EXPECT_ERROR_HAS(Bytes({0x89, 'P', 'N', 'G', 0, 0, 0, 0}), "\\x89PNG");
}

TEST(Gguf, VersionOneIsRefused) {
  Bytes b = SmallFile();
  b[4] = 1;
  EXPECT_ERROR_HAS(b, "GGUF version 1 is not supported");
}

TEST(Gguf, UnknownVersion) {
  Bytes b = SmallFile();
  b[4] = 4;
  EXPECT_ERROR_HAS(b, "unsupported GGUF version 4");
}

TEST(Gguf, BigEndianIsNamed) {
  Bytes b = SmallFile();
  // A big-endian writer stores the version 3 as 00 00 00 03.
  b[4] = 0;
  b[7] = 3;
  EXPECT_ERROR_HAS(b, "big-endian");
  Bytes swapped = SmallFile();
  std::memcpy(swapped.data(), "FUGG", 4);
  EXPECT_ERROR_HAS(swapped, "big-endian");
}

Bytes Header(uint64_t n_tensors, uint64_t n_kv) {
  Bytes b = {'G', 'G', 'U', 'F'};
  Put<uint32_t>(&b, 3);
  Put<uint64_t>(&b, n_tensors);
  Put<uint64_t>(&b, n_kv);
  return b;
}

TEST(Gguf, HugeCountsAreRefusedBeforeAllocating) {
  EXPECT_ERROR_HAS(Header(0, 1ull << 62), "claims");
  EXPECT_ERROR_HAS(Header(std::numeric_limits<uint64_t>::max(), 0), "claims");
  EXPECT_ERROR_HAS(Header(1ull << 40, 1ull << 40), "claims");
  Bytes one = Header(0, 1);  // one entry, but no bytes for it
  EXPECT_ERROR_HAS(one, "claims");
}

TEST(Gguf, HugeLengthsAreRefused) {
  Bytes key;
  Put<uint64_t>(&key, 1ull << 63);  // key length
  key.insert(key.end(), 16, 'k');
  EXPECT_ERROR_HAS(GgufWriter().RawKv(key).Build(), "truncated");

  Bytes str;
  PutString(&str, "s");
  Put<uint32_t>(&str, STRING);
  Put<uint64_t>(&str, std::numeric_limits<uint64_t>::max());
  str.insert(str.end(), 16, 'x');
  EXPECT_ERROR_HAS(GgufWriter().RawKv(str).Build(), "GGUF key 's'");

  Bytes arr;
  PutString(&arr, "arr");
  Put<uint32_t>(&arr, ARRAY);
  Put<uint32_t>(&arr, U32);
  Put<uint64_t>(&arr, 1ull << 62);
  arr.insert(arr.end(), 16, 0);
  EXPECT_ERROR_HAS(GgufWriter().RawKv(arr).Build(), "claims an array of 4611686018427387904 u32");

  Bytes strs;
  PutString(&strs, "strs");
  Put<uint32_t>(&strs, ARRAY);
  Put<uint32_t>(&strs, STRING);
  Put<uint64_t>(&strs, 1ull << 62);
  strs.insert(strs.end(), 16, 0);
  EXPECT_ERROR_HAS(GgufWriter().RawKv(strs).Build(),
                   "claims an array of 4611686018427387904 "
                   "strings");
}

TEST(Gguf, MalformedMetadata) {
  Bytes unknown;
  PutString(&unknown, "k");
  Put<uint32_t>(&unknown, 13);
  Put<uint32_t>(&unknown, 0);
  EXPECT_ERROR_HAS(GgufWriter().RawKv(unknown).Build(), "GGUF key 'k' has unknown value type 13");

  Bytes nested;
  PutString(&nested, "nested");
  Put<uint32_t>(&nested, ARRAY);
  Put<uint32_t>(&nested, ARRAY);
  Put<uint64_t>(&nested, 1);
  Put<uint32_t>(&nested, U8);
  Put<uint64_t>(&nested, 1);
  nested.push_back(0);
  EXPECT_ERROR_HAS(GgufWriter().RawKv(nested).Build(), "'nested' is an array of arrays");

  Bytes bad_elem;
  PutString(&bad_elem, "e");
  Put<uint32_t>(&bad_elem, ARRAY);
  Put<uint32_t>(&bad_elem, 77);
  Put<uint64_t>(&bad_elem, 0);
  EXPECT_ERROR_HAS(GgufWriter().RawKv(bad_elem).Build(), "array of unknown value type 77");

  EXPECT_ERROR_HAS(GgufWriter().Scalar<uint32_t>("a", U32, 1).Scalar<uint32_t>("a", U32, 2).Build(),
                   "GGUF key 'a' appears twice");
}

TEST(Gguf, BadAlignment) {
  EXPECT_ERROR_HAS(GgufWriter().Scalar<uint32_t>("general.alignment", U32, 48).Build(),
                   "power of two");
  EXPECT_ERROR_HAS(GgufWriter().Scalar<uint32_t>("general.alignment", U32, 0).Build(),
                   "power of two");
  EXPECT_ERROR_HAS(GgufWriter().Scalar<uint64_t>("general.alignment", U64, 32).Build(),
                   "'general.alignment' has type u64");
}

TEST(Gguf, BadTensorInfos) {
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {}, 0, 0).Build(), "tensor 'x' has 0 dimensions");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {1, 1, 1, 1, 1}, 0, 4).Build(),
                   "tensor 'x' has 5 dimensions");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {4, 0}, 0, 0).Build(), "tensor 'x' has ne[1] = 0");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {1ull << 63}, 0, 4).Build(), "ne[0]");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {1ull << 40, 1ull << 40}, 0, 4).Build(),
                   "too many elements");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {1ull << 61}, 0, 4).Build(),
                   "needs more bytes than the whole file");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {32}, 99, 32).Build(),
                   "tensor 'x' has unknown ggml type 99");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {32}, 4, 32).Build(),
                   "tensor 'x' has unknown ggml type 4");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {48}, 2, 36).Build(),
                   "tensor 'x' (q4_0) has ne[0] = 48, not a multiple of the 32-element blocks");
  EXPECT_ERROR_HAS(GgufWriter().Tensor("x", {4}, 0, 16).Tensor("x", {4}, 0, 16).Build(),
                   "tensor 'x' appears twice");
}

TEST(Gguf, BadOffsets) {
  // Past the end: the file is cut 1 byte short of the second tensor's end.
  Bytes cut = GgufWriter().Tensor("a", {4}, 0, 16).Tensor("b", {4}, 0, 16).Build();
  cut.pop_back();
  EXPECT_ERROR_HAS(cut,
                   "tensor 'b' (f32 [4], 16 bytes at data offset 32) ends past the end of the "
                   "file: the data section holds 47 bytes");
  // Misaligned.
  Bytes mis = GgufWriter().Tensor("a", {4}, 0, 16).Tensor("b", {4}, 0, 16, 0, 16).Build();
  EXPECT_ERROR_HAS(mis, "tensor 'b' has offset 16, not a multiple of the alignment 32");
  // Overlapping (both at 0; and a larger one running into the next).
  EXPECT_ERROR_HAS(GgufWriter().Tensor("a", {4}, 0, 16).Tensor("b", {4}, 0, 16, 0, 0).Build(),
                   "overlap");
  EXPECT_ERROR_HAS(
      GgufWriter().Tensor("a", {16}, 0, 64, 0, 0).Tensor("b", {4}, 0, 16, 0, 32).Build(),
      "tensors 'a' (data bytes [0, 64)) and 'b' (data bytes [32, 48)) overlap");
  // A huge offset does not wrap around.
  EXPECT_ERROR_HAS(
      GgufWriter().Tensor("a", {4}, 0, 0, 0, std::numeric_limits<int64_t>::max() / 32 * 32).Build(),
      "ends past the end");
}

TEST(Gguf, UnsupportedTypesParse) {
  // Types kiln does not compute are the model loader's to refuse, but they must be sized.
  Bytes b = GgufWriter().Tensor("q5", {32, 2}, 6, 2 * 22).Tensor("iq", {256}, 16, 66).Build();
  auto r = ParseBytes(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(GgmlTypeSupported((*r)->FindTensor("q5")->type));
  EXPECT_EQ((*r)->FindTensor("iq")->nbytes, 66u);
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "kiln_gguf_test_XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Gguf, OpenMapsTheFile) {
  TempDir dir;
  const std::string path = dir.path() + "/m.gguf";
  const Bytes b = SmallFile();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->path(), path);
  EXPECT_EQ((*r)->size(), b.size());
  const GgufTensorInfo* w = (*r)->FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 32, 0u);
  EXPECT_EQ(w->data[0], 0x5a);
  EXPECT_EQ(*(*r)->GetString("general.architecture"), "llama");

  // A malformed file's error names the path.
  Bytes bad = b;
  bad[0] = 'X';
  const std::string bad_path = dir.path() + "/bad.gguf";
  {
    std::ofstream out(bad_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bad.data()), static_cast<std::streamsize>(bad.size()));
  }
  auto e = GgufFile::Open(bad_path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message().rfind("'" + bad_path + "': not a GGUF file", 0), 0u)
      << e.status().message();

  const std::string empty_path = dir.path() + "/empty.gguf";
  { std::ofstream out(empty_path, std::ios::binary); }
  auto empty = GgufFile::Open(empty_path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("0 bytes"), std::string::npos);
}

TEST(Gguf, OpenMissingPathAndDirectory) {
  TempDir dir;
  auto missing = GgufFile::Open(dir.path() + "/nope.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.path() + "/nope.gguf"), std::string::npos);
  EXPECT_NE(missing.status().message().find("No such file or directory"), std::string::npos)
      << missing.status().message();

  auto d = GgufFile::Open(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("is a directory"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace kiln::llm
