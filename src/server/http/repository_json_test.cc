// SPDX-License-Identifier: Apache-2.0
// Model repository JSON (KSERVE-V2.md 1.7): request parsing (empty bodies, unknown keys, every
// error), the index writer (which members appear when), and a deterministic mutation test of
// the three parsers (never a crash; only INVALID_ARGUMENT / UNIMPLEMENTED errors).
#include "server/http/repository_json.h"

#include <gtest/gtest.h>

#include <random>

#include "base/testing/mutate.h"

namespace kiln {
namespace {

TEST(RepositoryJsonTest, IndexRequest) {
  for (const char* body : {"", "  \n", "{}", R"({"ready":false})", R"({"other":[1,2]})",
                           R"({"repository_name":"x","ready":false})"}) {
    Result<bool> r = ParseRepositoryIndexRequest(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().ToString();
    EXPECT_FALSE(*r) << body;
  }
  EXPECT_TRUE(*ParseRepositoryIndexRequest(R"({"ready": true})"));
  struct Bad {
    const char* body;
    const char* message;
  };
  for (const Bad& b : {Bad{R"({"ready":"true"})", "'ready' must be a boolean"},
                       Bad{R"({"ready":1})", "'ready' must be a boolean"},
                       Bad{R"({"ready":null})", "'ready' must be a boolean"},
                       Bad{"[]", "must be a JSON object"}, Bad{"true", "must be a JSON object"},
                       Bad{"{", "not valid JSON"}, Bad{"{} x", "not valid JSON"}}) {
    Result<bool> r = ParseRepositoryIndexRequest(b.body);
    ASSERT_FALSE(r.ok()) << b.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << b.body;
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << r.status().message();
  }
}

TEST(RepositoryJsonTest, LoadRequest) {
  for (const char* body : {"", "{}", R"({"parameters":{}})", R"({"parameters":{"x":1}})"}) {
    Result<ModelLoadOptions> r = ParseRepositoryLoadRequest(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().ToString();
    EXPECT_EQ(r->config_json, "") << body;
  }
  Result<ModelLoadOptions> r =
      ParseRepositoryLoadRequest(R"({"parameters":{"config":"{\"max_batch_size\":2}"}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config_json, R"({"max_batch_size":2})");

  r = ParseRepositoryLoadRequest(R"({"parameters":{"config":{"max_batch_size":2}}})");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'config' must be a string"), std::string::npos);
  r = ParseRepositoryLoadRequest(R"({"parameters":"config"})");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'parameters' must be a JSON object"), std::string::npos);
  // Model files: base64 strings, decoded, the "file:" prefix dropped from the path.
  r = ParseRepositoryLoadRequest(
      R"({"parameters":{"config":"{}","file:1/model.onnx":"AAEC/w==","file:labels.txt":"YQ"}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->files.size(), 2u);
  EXPECT_EQ(r->files[0].path, "1/model.onnx");
  EXPECT_EQ(r->files[0].content, std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(r->files[1].path, "labels.txt");
  EXPECT_EQ(r->files[1].content, "a");
  r = ParseRepositoryLoadRequest(R"({"parameters":{"config":"{}","file:1/model.onnx":"AA!A"}})");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'file:1/model.onnx': invalid base64"), std::string::npos)
      << r.status().message();
  r = ParseRepositoryLoadRequest(R"({"parameters":{"file:1/model.onnx":7}})");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("must be a string holding the file's base64"),
            std::string::npos);
  EXPECT_EQ(ParseRepositoryLoadRequest("[1]").status().code(), StatusCode::kInvalidArgument);
}

TEST(RepositoryJsonTest, UnloadRequest) {
  const std::vector<std::pair<const char*, bool>> cases = {
      {"", false},
      {"{}", false},
      {R"({"parameters":{}})", false},
      {R"({"parameters":{"unload_dependents":true}})", true},
      {R"({"parameters":{"x":"y","unload_dependents":true}})", true},
      {R"({"parameters":{"unload_dependents":false,"x":"y"}})", false},
  };
  for (const auto& [body, dependents] : cases) {
    Result<ModelUnloadOptions> r = ParseRepositoryUnloadRequest(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().ToString();
    EXPECT_EQ(r->unload_dependents, dependents) << body;
  }
  for (const char* body : {R"({"parameters":{"unload_dependents":"yes"}})",
                           R"({"parameters":{"unload_dependents":1}})",
                           R"({"parameters":{"unload_dependents":null}})"}) {
    Status s = ParseRepositoryUnloadRequest(body).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(s.message().find("'unload_dependents' must be a boolean"), std::string::npos) << body;
  }
  EXPECT_EQ(ParseRepositoryUnloadRequest(R"({"parameters":[]})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRepositoryUnloadRequest("nope").status().code(), StatusCode::kInvalidArgument);
}

TEST(RepositoryJsonTest, IndexAnswer) {
  const std::vector<ModelIndexEntry> index = {
      {"fresh", -1, ModelState::kUnknown, ""},
      {"failed", -1, ModelState::kUnavailable, "config.pbtxt:1:1: bad \"x\""},
      {"add_sub", 1, ModelState::kUnavailable, "unloaded"},
      {"add_sub", 2, ModelState::kReady, ""},
      {"loading", -1, ModelState::kLoading, ""},
      {"going", 3, ModelState::kUnloading, ""},
  };
  EXPECT_EQ(RepositoryIndexJson(index, false),
            R"([{"name":"fresh"},)"
            R"({"name":"failed","state":"UNAVAILABLE","reason":"config.pbtxt:1:1: bad \"x\""},)"
            R"({"name":"add_sub","version":"1","state":"UNAVAILABLE","reason":"unloaded"},)"
            R"({"name":"add_sub","version":"2","state":"READY"},)"
            R"({"name":"loading","state":"LOADING"},)"
            R"({"name":"going","version":"3","state":"UNLOADING"}])");
  EXPECT_EQ(RepositoryIndexJson(index, true),
            R"([{"name":"add_sub","version":"2","state":"READY"}])");
  EXPECT_EQ(RepositoryIndexJson({}, false), "[]");
}

TEST(RepositoryJsonTest, MutationsNeverCrash) {
  const std::vector<std::string> seeds = {
      R"({"ready":true})",
      R"({"parameters":{"config":"{\"name\":\"m\",\"max_batch_size\":4}"}})",
      R"({"parameters":{"unload_dependents":false,"other":[1,{"a":null}]}})",
      R"({"repository_name":"","ready":false,"parameters":{"file:1/m.onnx":"QUJD"}})",
  };
  constexpr char kInterestingBytes[] = "[]{}\",:-.0123456789eE+tfn\\u\x00\xff\x80 ";
  const std::string_view interesting(kInterestingBytes, sizeof(kInterestingBytes) - 1);
  std::mt19937 rng(20240612);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string body =
        testing::MutateBytes(seeds[static_cast<size_t>(i) % seeds.size()], rng, interesting);
    const Result<bool> index = ParseRepositoryIndexRequest(body);
    const Result<ModelLoadOptions> load = ParseRepositoryLoadRequest(body);
    const Result<ModelUnloadOptions> unload = ParseRepositoryUnloadRequest(body);
    for (const Status& s : {index.status(), load.status(), unload.status()}) {
      if (s.ok()) {
        ++accepted;
        continue;
      }
      ASSERT_TRUE(s.code() == StatusCode::kInvalidArgument ||
                  s.code() == StatusCode::kUnimplemented)
          << s.ToString() << "\n"
          << body;
      ASSERT_FALSE(s.message().empty());
    }
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace kiln
