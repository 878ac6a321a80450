// SPDX-License-Identifier: Apache-2.0
#include "repo/repository.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::MakeDirs;
using ::kiln::testing::ParseConfigOrDie;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

TEST(ParseVersionDirName, Rules) {
  EXPECT_EQ(ParseVersionDirName("1"), 1);
  EXPECT_EQ(ParseVersionDirName("42"), 42);
  EXPECT_EQ(ParseVersionDirName("9223372036854775807"), INT64_MAX);
  for (std::string_view bad : {"", "0", "01", "007", "-1", "+1", "1a", "v1", " 1", "1.0",
                               "9223372036854775808", "99999999999999999999"}) {
    EXPECT_FALSE(ParseVersionDirName(bad).has_value()) << bad;
  }
}

TEST(ScanVersionDirs, IgnoresNonVersions) {
  TempDir tmp;
  for (const char* d : {"1", "2", "10", "01", "0", "abc", "3x"}) MakeDirs(tmp.path() / d);
  WriteFile(tmp.path() / "5", "a file, not a version dir");
  WriteFile(tmp.path() / "config.pbtxt", "");
  Result<V> v = ScanVersionDirs(tmp.path());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, (V{1, 2, 10}));

  Result<V> missing = ScanVersionDirs(tmp.path() / "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
}

TEST(ListModelDirs, SortedSkipsHiddenAndFiles) {
  TempDir tmp;
  for (const char* d : {"b", "a", ".hidden", "c"}) MakeDirs(tmp.path() / d);
  WriteFile(tmp.path() / "README.md", "x");
  Result<std::vector<std::string>> m = ListModelDirs(tmp.path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(SelectVersions, Policies) {
  const V available{1, 2, 5, 9};
  inference::ModelVersionPolicy none;
  EXPECT_EQ(SelectVersions(none, available), V{9});

  inference::ModelVersionPolicy latest2 =
      ParseConfigOrDie("version_policy { latest { num_versions: 2 } }").version_policy();
  EXPECT_EQ(SelectVersions(latest2, available), (V{5, 9}));
  inference::ModelVersionPolicy latest10 =
      ParseConfigOrDie("version_policy { latest { num_versions: 10 } }").version_policy();
  EXPECT_EQ(SelectVersions(latest10, available), available);

  inference::ModelVersionPolicy all =
      ParseConfigOrDie("version_policy: { all { } }").version_policy();
  EXPECT_EQ(SelectVersions(all, available), available);
  EXPECT_TRUE(SelectVersions(all, V{}).empty());

  inference::ModelVersionPolicy specific =
      ParseConfigOrDie("version_policy: { specific: { versions: [9, 3, 1, 9] } }").version_policy();
  V missing;
  EXPECT_EQ(SelectVersions(specific, available, &missing), (V{1, 9}));
  EXPECT_EQ(missing, V{3});
}

TEST(ResolveModelFile, FileDirectoryAndCustomName) {
  TempDir tmp;
  inference::ModelConfig config;
  WriteFile(tmp.path() / "1" / "model.onnx", "x");
  Result<std::filesystem::path> p = ResolveModelFile(tmp.path() / "1", config);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, tmp.path() / "1" / "model.onnx");

  WriteFile(tmp.path() / "2" / "model.onnx" / "model.onnx", "x");
  p = ResolveModelFile(tmp.path() / "2", config);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, tmp.path() / "2" / "model.onnx" / "model.onnx");

  config.set_default_model_filename("net.onnx");
  WriteFile(tmp.path() / "3" / "net.onnx", "x");
  EXPECT_TRUE(ResolveModelFile(tmp.path() / "3", config).ok());
  p = ResolveModelFile(tmp.path() / "1", config);
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("net.onnx"));
}

TEST(FingerprintModelDir, AttributesChangesToTheModelOrOneVersion) {
  TempDir tmp;
  const auto& d = tmp.path();
  WriteFile(d / "config.pbtxt", "max_batch_size: 4");
  WriteFile(d / "warmup" / "x.bin", "abcd");
  WriteFile(d / "1" / "model.onnx", "one");
  WriteFile(d / "2" / "model.onnx" / "model.onnx", "two");
  WriteFile(d / "01" / "model.onnx", "not a version");
  MakeDirs(d / "3");
  const auto fingerprint = [&] {
    Result<ModelDirFingerprint> f = FingerprintModelDir(d);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : ModelDirFingerprint();
  };
  const ModelDirFingerprint a = fingerprint();
  EXPECT_EQ(a, fingerprint());  // stable
  ASSERT_EQ(a.versions.size(), 3u);
  EXPECT_THAT(a.versions.at(1), HasSubstr("model.onnx\t3\t"));
  EXPECT_THAT(a.versions.at(2), HasSubstr("model.onnx/model.onnx\t3\t"));
  EXPECT_EQ(a.versions.at(3), "");  // an empty version directory still counts
  EXPECT_THAT(a.model, HasSubstr("config.pbtxt"));
  EXPECT_THAT(a.model, HasSubstr("warmup/x.bin"));
  EXPECT_THAT(a.model, HasSubstr("01/model.onnx"));

  // A version's file: only that version changes.
  WriteFile(d / "1" / "model.onnx", "one, longer");
  const ModelDirFingerprint b = fingerprint();
  EXPECT_NE(b.versions.at(1), a.versions.at(1));
  EXPECT_EQ(b.versions.at(2), a.versions.at(2));
  EXPECT_EQ(b.model, a.model);

  // config.pbtxt with the same size (and possibly the same timestamp): seen by its contents.
  WriteFile(d / "config.pbtxt", "max_batch_size: 8");
  const ModelDirFingerprint c = fingerprint();
  EXPECT_NE(c.model, b.model);
  EXPECT_EQ(c.versions, b.versions);

  // Added and removed versions.
  WriteFile(d / "4" / "model.onnx", "four");
  std::filesystem::remove_all(d / "2");
  const ModelDirFingerprint e = fingerprint();
  EXPECT_EQ(e.versions.count(2), 0u);
  EXPECT_EQ(e.versions.count(4), 1u);

  Result<ModelDirFingerprint> missing = FingerprintModelDir(d / "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
}

}  // namespace
}  // namespace kiln
