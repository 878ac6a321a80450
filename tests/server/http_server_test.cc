// SPDX-License-Identifier: Apache-2.0
// In-process HTTP server test: a real HttpServer on a free port, a FAKE ModelManager with fake
// models (one doubles its input, one always fails, one answers from another thread after a
// delay, one drops its callback), and a small synchronous Beast client. Covers health, metadata,
// inference numbers, the error bodies (400/404/405/413/429/500/501/503), keep-alive,
// concurrency, malformed HTTP, statistics, the repository index / load / unload endpoints,
// draining (StartDraining) and Stop() while an inference is in flight.
#include "server/http/http_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "queue_model.h"
#include "repo/model_manager.h"

namespace kiln {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace dom = simdjson::dom;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Fakes.

ModelSignature FloatSignature(const std::string& name, int max_batch_size) {
  ModelSignature sig;
  sig.name = name;
  sig.platform = "onnxruntime_onnx";
  sig.backend = "onnxruntime";
  sig.max_batch_size = max_batch_size;
  sig.inputs = {{"INPUT", DataType::kFloat32, {4}}};
  sig.outputs = {{"OUTPUT", DataType::kFloat32, {4}}, {"NEGATED", DataType::kFloat32, {4}}};
  sig.output_labels["OUTPUT"] = {"zero", "one"};
  return sig;
}

// Computes OUTPUT = 2 * INPUT and NEGATED = -INPUT (the requested ones, or both).
Result<InferResponse> DoubleIt(const InferRequest& request) {
  if (request.inputs.size() != 1 || request.inputs[0].name != "INPUT" ||
      request.inputs[0].tensor.dtype() != DataType::kFloat32) {
    return Status::InvalidArgument("expected one FP32 input 'INPUT'");
  }
  // The model validates the requested outputs (LoadedModel::Infer), the server does not.
  for (const RequestedOutput& o : request.outputs) {
    if (o.name != "OUTPUT" && o.name != "NEGATED") {
      return Status::InvalidArgument(fmt::format("unexpected inference output '{}'", o.name));
    }
  }
  const OwnedTensor& in = request.inputs[0].tensor;
  InferResponse response;
  for (const char* name : {"OUTPUT", "NEGATED"}) {
    bool wanted = request.outputs.empty();
    for (const RequestedOutput& o : request.outputs) wanted |= o.name == name;
    if (!wanted) continue;
    auto out = OwnedTensor::Allocate(DataType::kFloat32, in.shape());
    if (!out.ok()) return out.status();
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      const float x = in.data<float>()[i];
      out->data<float>()[i] = std::string_view(name) == "OUTPUT" ? 2 * x : -x;
    }
    response.outputs.push_back({name, std::move(out).value()});
  }
  return response;
}

class FakeModel : public LoadedModel {
 public:
  enum class Behavior { kDouble, kFail, kSlow, kDrop };
  FakeModel(std::string name, int64_t version, Behavior behavior, Status failure = Status::OK())
      : name_(std::move(name)),
        version_(version),
        behavior_(behavior),
        failure_(std::move(failure)),
        signature_(FloatSignature(name_, 8)) {}
  ~FakeModel() override {
    for (std::thread& t : threads_) t.join();
  }

  const std::string& name() const override { return name_; }
  int64_t version() const override { return version_; }
  const ModelSignature& signature() const override { return signature_; }
  // A final response names the model, its version and the request (LoadedModel::Infer).
  Result<InferResponse> Named(Result<InferResponse> r, const InferRequest& request) const {
    if (r.ok()) {
      r->model_name = name_;
      r->model_version = version_;
      r->id = request.id;
    }
    return r;
  }
  // Numbers that identify the model: inference_count = 100 * version + calls so far.
  ModelStatistics Statistics() const override {
    ModelStatistics s;
    s.inference_count = static_cast<uint64_t>(100 * version_ + calls_.load());
    s.execution_count = 1;
    s.inference.success = {2, 5000};
    s.batches[4] = {{1, 1}, {1, 2}, {1, 3}};
    return s;
  }

  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    ++calls_;
    switch (behavior_) {
      case Behavior::kDouble:
        sink->Finish(Named(DoubleIt(*request), *request));
        return;
      case Behavior::kFail:
        sink->Finish(failure_);
        return;
      case Behavior::kDrop:
        return;  // `sink` is destroyed without being called
      case Behavior::kSlow: {
        MutexLock lock(mu_);
        started_.fetch_add(1);
        threads_.emplace_back([this, request = std::shared_ptr<InferRequest>(std::move(request)),
                               sink = std::move(sink)] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
          sink->Finish(Named(DoubleIt(*request), *request));
        });
        return;
      }
    }
  }

  std::atomic<int> calls_{0};
  std::atomic<int> started_{0};
  std::atomic<int64_t> delay_ms_{300};

 private:
  const std::string name_;
  const int64_t version_;
  const Behavior behavior_;
  const Status failure_;
  const ModelSignature signature_;
  Mutex mu_;
  std::vector<std::thread> threads_ KILN_GUARDED_BY(mu_);
};

class FakeManager : public ModelManager {
 public:
  FakeManager() {
    Add(std::make_shared<FakeModel>("double", 1, FakeModel::Behavior::kDouble));
    Add(std::make_shared<FakeModel>("double", 2, FakeModel::Behavior::kDouble));
    Add(std::make_shared<FakeModel>(
        "fail", 1, FakeModel::Behavior::kFail,
        Status::InvalidArgument("input 'INPUT' has shape [3] but the model needs [-1,4]")));
    Add(std::make_shared<FakeModel>("busy", 1, FakeModel::Behavior::kFail,
                                    Status::ResourceExhausted("queue of model 'busy' is full")));
    Add(std::make_shared<FakeModel>("slow", 1, FakeModel::Behavior::kSlow));
    Add(std::make_shared<FakeModel>("drop", 1, FakeModel::Behavior::kDrop));
  }
  void Add(std::shared_ptr<FakeModel> m) { models_[m->name()][m->version()] = std::move(m); }
  // A real scheduler behind a held executor (queue_model.h), served as "queue".
  std::shared_ptr<testing::QueueModel> queue =
      std::make_shared<testing::QueueModel>("queue", FloatSignature("queue", 8));
  FakeModel* Get(const std::string& name, int64_t version) {
    return models_.at(name).at(version).get();
  }

  Status LoadInitialModels() override { return Status::OK(); }
  Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                int64_t version) const override {
    if (name == "loading") return Status::Unavailable("model 'loading' is not ready: LOADING");
    if (name == "queue") return std::shared_ptr<LoadedModel>(queue);
    auto it = models_.find(std::string(name));
    if (it == models_.end()) {
      return Status::NotFound("Request for unknown model: '" + std::string(name) +
                              "' is not found");
    }
    if (version == -1) return std::shared_ptr<LoadedModel>(it->second.rbegin()->second);
    auto v = it->second.find(version);
    if (v == it->second.end()) {
      return Status::NotFound("Request for unknown model: '" + std::string(name) + "' version " +
                              std::to_string(version) + " is not found");
    }
    return std::shared_ptr<LoadedModel>(v->second);
  }
  std::vector<int64_t> ReadyVersions(std::string_view name) const override {
    std::vector<int64_t> out;
    auto it = models_.find(std::string(name));
    if (it != models_.end()) {
      for (const auto& [v, m] : it->second) out.push_back(v);
    }
    return out;
  }
  std::vector<ModelIndexEntry> Index() const override {
    std::vector<ModelIndexEntry> out;
    for (const auto& [name, versions] : models_) {
      for (const auto& [v, m] : versions) out.push_back({name, v, ModelState::kReady, ""});
    }
    out.push_back({"broken", 1, ModelState::kUnavailable, "model.onnx: parse error"});
    out.push_back({"fresh", -1, ModelState::kUnknown, ""});
    return out;
  }
  bool AllModelsReady() const override { return all_ready_.load(); }
  void Shutdown() override {}
  // Records the call, blocks while `control_gate_` is closed, answers `control_status_`.
  Status LoadModel(std::string_view name, const ModelLoadOptions& options) override {
    return Control("load " + std::string(name) + " " + options.config_json);
  }
  Status UnloadModel(std::string_view name, const ModelUnloadOptions& options) override {
    return Control("unload " + std::string(name) +
                   (options.unload_dependents ? " dependents" : ""));
  }
  using ModelManager::UnloadModel;
  Status Poll() override { return Status::FailedPrecondition("not polling"); }

  Status Control(std::string call) {
    MutexLock lock(control_mu_);
    control_calls_.push_back(std::move(call));
    control_cv_.Wait(control_mu_, [&]() KILN_REQUIRES(control_mu_) { return control_open_; });
    return control_status_;
  }
  void SetControl(bool open, Status status = Status::OK()) {
    MutexLock lock(control_mu_);
    control_open_ = open;
    control_status_ = std::move(status);
    control_cv_.NotifyAll();
  }
  std::vector<std::string> ControlCalls() {
    MutexLock lock(control_mu_);
    return control_calls_;
  }

  std::atomic<bool> all_ready_{true};

 private:
  std::map<std::string, std::map<int64_t, std::shared_ptr<FakeModel>>> models_;
  Mutex control_mu_;
  CondVar control_cv_;  // with control_mu_: notified when the control gate changes
  bool control_open_ KILN_GUARDED_BY(control_mu_) = true;
  Status control_status_ KILN_GUARDED_BY(control_mu_);
  std::vector<std::string> control_calls_ KILN_GUARDED_BY(control_mu_);
};

// ---------------------------------------------------------------------------------------------
// A small synchronous client.

struct Reply {
  int status = 0;
  std::string body;
  http::response<http::string_body> raw;
  std::string header(std::string_view name) const {
    auto v = raw[beast::string_view(name.data(), name.size())];
    return std::string(v.data(), v.size());
  }
};

class Client {
 public:
  explicit Client(int port, const std::string& host = "127.0.0.1") : socket_(ioc_) {
    tcp::resolver resolver(ioc_);
    net::connect(socket_, resolver.resolve(host, std::to_string(port)));
  }

  Reply Do(http::verb method, const std::string& target, const std::string& body = "",
           const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    if (method == http::verb::post || !body.empty()) req.prepare_payload();
    http::write(socket_, req);
    return Read(method == http::verb::head);
  }
  Reply Get(const std::string& target) { return Do(http::verb::get, target); }
  Reply Post(const std::string& target, const std::string& body) {
    return Do(http::verb::post, target, body, {{"Content-Type", "application/json"}});
  }

  void WriteRaw(std::string_view bytes) {
    net::write(socket_, net::buffer(bytes.data(), bytes.size()));
  }
  // Writes as much as the server takes; returns the error that stopped it (if any).
  beast::error_code TryWriteRaw(std::string_view bytes) {
    beast::error_code ec;
    net::write(socket_, net::buffer(bytes.data(), bytes.size()), ec);
    return ec;
  }

  Reply Read(bool head = false) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(1u << 30);
    parser.skip(head);
    http::read(socket_, buffer_, parser);
    Reply r;
    r.raw = parser.release();
    r.status = static_cast<int>(r.raw.result_int());
    r.body = r.raw.body();
    return r;
  }

  // True when the server has closed the connection (EOF or reset, with nothing more to read).
  // Sends a request and does not wait for its answer.
  void SendOnly(const std::string& target, const std::string& body) {
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket_, req);
  }
  // Closes the connection (the client goes away).
  void Close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  bool ClosedByPeer() {
    beast::error_code ec;
    char c;
    socket_.read_some(net::buffer(&c, 1), ec);
    return ec == net::error::eof || ec == net::error::connection_reset;
  }

 private:
  net::io_context ioc_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string InferBody(const std::vector<float>& values, int batch, const std::string& extra = "") {
  std::string data;
  for (size_t i = 0; i < values.size(); ++i) data += (i ? "," : "") + std::to_string(values[i]);
  return R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[)" + std::to_string(batch) +
         R"(,4],"data":[)" + data + "]}]" + extra + "}";
}

// The "error" string of an error body; fails the test when the body is not {"error": string}.
std::string ErrorOf(const Reply& r) {
  EXPECT_EQ(r.header("Content-Type"), "application/json") << r.body;
  dom::parser parser;
  dom::element root;
  std::string_view msg;
  EXPECT_EQ(parser.parse(r.body).get(root), simdjson::SUCCESS) << r.body;
  dom::object obj;
  EXPECT_EQ(root.get_object().get(obj), simdjson::SUCCESS) << r.body;
  EXPECT_EQ(obj.size(), 1u) << r.body;
  EXPECT_EQ(obj["error"].get_string().get(msg), simdjson::SUCCESS) << r.body;
  return std::string(msg);
}

std::vector<float> FloatData(dom::element output) {
  std::vector<float> out;
  dom::array data;
  EXPECT_EQ(output["data"].get_array().get(data), simdjson::SUCCESS);
  for (dom::element e : data) {
    double d = 0;
    EXPECT_EQ(e.get_double().get(d), simdjson::SUCCESS);
    out.push_back(static_cast<float>(d));
  }
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(1u << 20); }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void StartServer(size_t max_request_bytes) {
    HttpServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.max_request_bytes = max_request_bytes;
    options.server_version = "1.2.3";
    auto server = HttpServer::Create(options, &manager_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }

  int port() const { return server_->port(); }

  FakeManager manager_;
  std::unique_ptr<HttpServer> server_;
};

// ---------------------------------------------------------------------------------------------

TEST_F(HttpServerTest, Health) {
  Client c(port());
  Reply live = c.Get("/v2/health/live");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "");
  EXPECT_EQ(c.Get("/v2/health/ready").status, 200);
  manager_.all_ready_ = false;
  Reply not_ready = c.Get("/v2/health/ready");
  EXPECT_EQ(not_ready.status, 400);
  EXPECT_EQ(not_ready.body, "");
  manager_.all_ready_ = true;
  server_->SetReady(false);
  EXPECT_EQ(c.Get("/v2/health/ready").status, 400);
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
  Reply model_ready = c.Get("/v2/models/double/ready");
  EXPECT_EQ(model_ready.status, 503);
  EXPECT_NE(ErrorOf(model_ready).find("not ready"), std::string::npos);
  server_->SetReady(true);
  EXPECT_EQ(c.Get("/v2/health/ready").status, 200);
}

TEST_F(HttpServerTest, ServerMetadata) {
  Client c(port());
  Reply r = c.Get("/v2");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.body, R"({"name":"kiln","version":"1.2.3",)"
                    R"("extensions":["classification","model_repository","binary_tensor_data",)"
                    R"("statistics","trace","logging"]})");
}

TEST_F(HttpServerTest, ModelMetadata) {
  Client c(port());
  Reply r = c.Get("/v2/models/double");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"name":"double","versions":["1","2"],"platform":"onnxruntime_onnx",)"
                    R"("inputs":[{"name":"INPUT","datatype":"FP32","shape":[-1,4]}],)"
                    R"("outputs":[{"name":"OUTPUT","datatype":"FP32","shape":[-1,4]},)"
                    R"({"name":"NEGATED","datatype":"FP32","shape":[-1,4]}]})");
  Reply v1 = c.Get("/v2/models/double/versions/1");
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_NE(v1.body.find(R"("versions":["1"])"), std::string::npos) << v1.body;

  Reply unknown = c.Get("/v2/models/nope");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(ErrorOf(unknown).find("'nope'"), std::string::npos);
  Reply unknown_version = c.Get("/v2/models/double/versions/7");
  EXPECT_EQ(unknown_version.status, 404);
  EXPECT_NE(ErrorOf(unknown_version).find("7"), std::string::npos);
  Reply loading = c.Get("/v2/models/loading");
  EXPECT_EQ(loading.status, 503);
  EXPECT_NE(ErrorOf(loading).find("not ready"), std::string::npos);
}

TEST_F(HttpServerTest, ModelReady) {
  Client c(port());
  Reply r = c.Get("/v2/models/double/ready");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(c.Get("/v2/models/double/versions/2/ready").status, 200);
  EXPECT_EQ(c.Get("/v2/models/double/versions/3/ready").status, 404);
  EXPECT_EQ(c.Get("/v2/models/nope/ready").status, 404);
  EXPECT_EQ(c.Get("/v2/models/loading/ready").status, 503);
}

TEST_F(HttpServerTest, InferNumbers) {
  Client c(port());
  Reply r = c.Post("/v2/models/double/infer",
                   InferBody({1, 2, 3, 4, -1, 0.5f, 0, 100}, 2, R"(,"id":"my-id-1")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.header("Inference-Header-Content-Length"), "");
  dom::parser parser;
  dom::element root;
  ASSERT_EQ(parser.parse(r.body).get(root), simdjson::SUCCESS) << r.body;
  std::string_view s;
  ASSERT_EQ(root["id"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "my-id-1");
  ASSERT_EQ(root["model_name"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "double");
  ASSERT_EQ(root["model_version"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "2");
  dom::array outputs;
  ASSERT_EQ(root["outputs"].get_array().get(outputs), simdjson::SUCCESS);
  ASSERT_EQ(outputs.size(), 2u);
  ASSERT_EQ(outputs.at(0)["name"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "OUTPUT");
  ASSERT_EQ(outputs.at(0)["datatype"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, "FP32");
  dom::array shape;
  ASSERT_EQ(outputs.at(0)["shape"].get_array().get(shape), simdjson::SUCCESS);
  ASSERT_EQ(shape.size(), 2u);
  EXPECT_EQ(int64_t(shape.at(0).get_int64().value_unsafe()), 2);
  EXPECT_EQ(int64_t(shape.at(1).get_int64().value_unsafe()), 4);
  EXPECT_EQ(FloatData(outputs.at(0)), (std::vector<float>{2, 4, 6, 8, -2, 1, 0, 200}));
  EXPECT_EQ(FloatData(outputs.at(1)), (std::vector<float>{-1, -2, -3, -4, 1, -0.5f, -0.f, -100}));

  // Explicit version; no id -> no "id" key.
  Reply v1 = c.Post("/v2/models/double/versions/1/infer", InferBody({1, 1, 1, 1}, 1));
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_EQ(v1.body.find("\"id\""), std::string::npos) << v1.body;
  EXPECT_NE(v1.body.find(R"("model_version":"1")"), std::string::npos) << v1.body;
}

TEST_F(HttpServerTest, OutputSelection) {
  Client c(port());
  Reply r = c.Post("/v2/models/double/infer",
                   InferBody({1, 2, 3, 4}, 1, R"(,"outputs":[{"name":"NEGATED"}])"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body,
            R"({"model_name":"double","model_version":"2","outputs":[)"
            R"({"name":"NEGATED","datatype":"FP32","shape":[1,4],"data":[-1.0,-2.0,-3.0,-4.0]}]})");
  Reply bad = c.Post("/v2/models/double/infer",
                     InferBody({1, 2, 3, 4}, 1, R"(,"outputs":[{"name":"NOPE"}])"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("'NOPE'"), std::string::npos);
}

TEST_F(HttpServerTest, InferErrors) {
  Client c(port());
  struct Case {
    std::string target;
    std::string body;
    int status;
    std::string message_part;
  };
  const Case cases[] = {
      {"/v2/models/double/infer", "{not json", 400, "malformed JSON"},
      {"/v2/models/double/infer", "", 400, "empty"},
      {"/v2/models/double/infer",
       R"({"inputs":[{"name":"INPUT","datatype":"FP99","shape":[1,4],"data":[1,2,3,4]}]})", 400,
       "invalid datatype 'FP99'"},
      {"/v2/models/double/infer",
       R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,4],"data":[1,2,3]}]})", 400,
       "3 elements"},
      {"/v2/models/double/infer",
       R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[-1,4],"data":[1,2,3,4]}]})", 400,
       "non-negative"},
      {"/v2/models/double/infer",
       R"({"inputs":[{"name":"INPUT","datatype":"FP16","shape":[1],"data":[1]}]})", 400, "binary"},
      {"/v2/models/double/infer", std::string(100000, '['), 400, "malformed JSON"},
      {"/v2/models/nope/infer", InferBody({1, 2, 3, 4}, 1), 404, "'nope'"},
      {"/v2/models/double/versions/9/infer", InferBody({1, 2, 3, 4}, 1), 404, "9"},
      {"/v2/models/double/versions/99999999999999999999/infer", InferBody({1, 2, 3, 4}, 1), 400,
       "out of range"},
      {"/v2/models/loading/infer", InferBody({1, 2, 3, 4}, 1), 503, "not ready"},
      {"/v2/models/fail/infer", InferBody({1, 2, 3, 4}, 1), 400, "input 'INPUT' has shape"},
      {"/v2/models/drop/infer", InferBody({1, 2, 3, 4}, 1), 500, "without answering"},
      {"/v2/models/double/infer",
       R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1],)"
       R"("parameters":{"binary_data_size":4}}]})",
       400, "unexpected size for input 'INPUT'"},
      {"/v2/models/double/infer", InferBody({1, 2, 3, 4}, 1, R"(,"parameters":{"sequence_id":7})"),
       400, "sequence batching is not supported"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.target + " " + k.body.substr(0, 80));
    Reply r = c.Post(k.target, k.body);
    EXPECT_EQ(r.status, k.status) << r.body;
    EXPECT_NE(ErrorOf(r).find(k.message_part), std::string::npos) << r.body;
  }
  // The connection survived all of that.
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
}

TEST_F(HttpServerTest, FullQueueIs429WithRetryAfter) {
  Client c(port());
  Reply r = c.Post("/v2/models/busy/infer", InferBody({1, 2, 3, 4}, 1));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_NE(ErrorOf(r).find("full"), std::string::npos);
}

// The trace extension: GET answers the settings, a bad POST names the setting (the tracer's
// behaviour is server/trace_test.cc's and tracing_integration's).
TEST_F(HttpServerTest, TraceSettings) {
  Client c(port());
  for (const char* target : {"/v2/trace/setting", "/v2/models/double/trace/setting"}) {
    Reply r = c.Get(target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_NE(r.body.find(R"("trace_level":["OFF"])"), std::string::npos) << r.body;
  }
  Reply bad = c.Post("/v2/trace/setting", R"({"trace_rate":"0"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("trace_rate"), std::string::npos) << bad.body;
}

TEST_F(HttpServerTest, NotFoundAndMethodNotAllowed) {
  Client c(port());
  for (const char* target :
       {"/", "/v2/", "/v2/models/double/versions/1/trace/setting", "/v2/repository/models/m",
        "/v2/models/double/versions/x/infer", "/v2/trace"}) {
    Reply r = c.Get(target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body, R"({"error":"Not Found"})") << target;
    EXPECT_EQ(r.header("Content-Type"), "application/json");
  }
  Reply post_live = c.Post("/v2/health/live", "");
  EXPECT_EQ(post_live.status, 405);
  EXPECT_EQ(post_live.body, R"({"error":"Method Not Allowed"})");
  EXPECT_EQ(post_live.header("Allow"), "GET");
  Reply get_infer = c.Get("/v2/models/double/infer");
  EXPECT_EQ(get_infer.status, 405);
  EXPECT_EQ(get_infer.header("Allow"), "POST");
  Reply del = c.Do(http::verb::delete_, "/v2/models/double");
  EXPECT_EQ(del.status, 405);
  // HEAD: a 405 with Content-Length but no body bytes, and the connection stays usable.
  Reply head = c.Do(http::verb::head, "/v2");
  EXPECT_EQ(head.status, 405);
  EXPECT_EQ(head.header("Content-Length"), "30");
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
}

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  Client c(port());
  for (int i = 0; i < 20; ++i) {
    Reply r = c.Post("/v2/models/double/infer", InferBody({float(i), 0, 0, 0}, 1));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.raw.keep_alive());
    ASSERT_EQ(c.Get("/v2/health/live").status, 200);
  }
}

TEST_F(HttpServerTest, PipelinedRequestsAnsweredInOrder) {
  Client c(port());
  const std::string get =
      "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v2/nope HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n";
  c.WriteRaw(get);
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_EQ(c.Read().status, 404);
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  Client c(port());
  Reply r = c.Do(http::verb::get, "/v2/health/live", "", {{"Connection", "close"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.raw.keep_alive());
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(HttpServerTest, ExpectContinue) {
  Client c(port());
  const std::string body = InferBody({1, 2, 3, 4}, 1);
  c.WriteRaw(
      "POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  Reply cont = c.Read();
  EXPECT_EQ(cont.status, 100);
  c.WriteRaw(body);
  Reply r = c.Read();
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(HttpServerTest, ConcurrentClients) {
  constexpr int kClients = 8;
  constexpr int kRequests = 25;
  std::atomic<int> good{0};
  manager_.Get("slow", 1)->delay_ms_ = 5;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      Client c(port());
      for (int i = 0; i < kRequests; ++i) {
        const bool bad = (i % 5) == 4;  // failures interleaved with successes
        const std::string model = t % 2 ? "double" : "slow";
        Reply r = bad ? c.Post("/v2/models/" + model + "/infer", "{bad")
                      : c.Post("/v2/models/" + model + "/infer",
                               InferBody({float(t), float(i), 1, 2}, 1));
        if (bad ? r.status == 400
                : r.status == 200 &&
                      r.body.find("[" + std::to_string(2 * t) + ".0," + std::to_string(2 * i) +
                                  ".0,2.0,4.0]") != std::string::npos) {
          ++good;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), kClients * kRequests);
}

TEST_F(HttpServerTest, MalformedHttpClosesOnlyThatConnection) {
  Client good(port());
  EXPECT_EQ(good.Get("/v2/health/live").status, 200);
  Client bad(port());
  bad.WriteRaw("THIS IS NOT HTTP\r\n\r\n");
  Reply r = bad.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(ErrorOf(r).find("malformed HTTP"), std::string::npos);
  EXPECT_TRUE(bad.ClosedByPeer());
  Client bad2(port());
  bad2.WriteRaw("GET /v2 HTTP/1.1\r\nContent-Length: abc\r\n\r\n");
  EXPECT_EQ(bad2.Read().status, 400);
  EXPECT_TRUE(bad2.ClosedByPeer());
  EXPECT_EQ(good.Get("/v2/health/live").status, 200);
}

TEST_F(HttpServerTest, OversizedBodyByContentLengthIsRefusedUnread) {
  // Only the header is sent: the server must answer from Content-Length alone.
  Client c(port());
  c.WriteRaw(
      "POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: 1073741824\r\n\r\n");
  Reply r = c.Read();
  EXPECT_EQ(r.status, 413);
  const std::string msg = ErrorOf(r);
  EXPECT_NE(msg.find("1048576"), std::string::npos) << msg;  // names the limit
  EXPECT_NE(msg.find("1073741824"), std::string::npos) << msg;
  EXPECT_FALSE(r.raw.keep_alive());
  EXPECT_TRUE(c.ClosedByPeer());
  Client after(port());
  EXPECT_EQ(after.Get("/v2/health/live").status, 200);
}

TEST_F(HttpServerTest, OversizedBodySentInFullStillGets413) {
  // Like Python's http.client: the whole body is written before the response is read.
  Client c(port());
  const std::string body(3u << 20, ' ');
  std::thread writer([&] {
    (void)c.TryWriteRaw(
        "POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  Reply r = c.Read();
  writer.join();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(ErrorOf(r).find("1048576"), std::string::npos);
}

TEST_F(HttpServerTest, OversizedChunkedBodyIsRefused) {
  Client c(port());
  const std::string chunk(256 * 1024, 'x');
  std::thread writer([&] {
    char size_line[32];
    std::snprintf(size_line, sizeof(size_line), "%zx\r\n", chunk.size());
    std::string req =
        "POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 8; ++i) req += size_line + chunk + "\r\n";
    req += "0\r\n\r\n";
    (void)c.TryWriteRaw(req);
  });
  Reply r = c.Read();
  writer.join();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(ErrorOf(r).find("1048576"), std::string::npos);
}

TEST_F(HttpServerTest, ChunkedBodyWithinLimitWorks) {
  Client c(port());
  const std::string body = InferBody({1, 2, 3, 4}, 1);
  char size_line[32];
  std::snprintf(size_line, sizeof(size_line), "%zx\r\n", body.size());
  c.WriteRaw(std::string("POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n") +
             size_line + body + "\r\n0\r\n\r\n");
  Reply r = c.Read();
  EXPECT_EQ(r.status, 200) << r.body;
}

std::string RawFloats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// zlib used directly (not the server's helpers): windowBits 15 = zlib wrapper, 31 = gzip.
std::string Zip(const std::string& in, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

std::string Unzip(const std::string& in, int window_bits) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, window_bits), Z_OK);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  return out;
}

TEST_F(HttpServerTest, BinaryAndCompressionHeaders) {
  Client c(port());
  const std::string body = InferBody({1, 2, 3, 4}, 1);
  // perf_analyzer's C++ client always sends the header, equal to the body length for JSON.
  Reply same = c.Do(http::verb::post, "/v2/models/double/infer", body,
                    {{"Inference-Header-Content-Length", std::to_string(body.size())}});
  EXPECT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(same.header("Inference-Header-Content-Length"), "");
  Reply shorter = c.Do(http::verb::post, "/v2/models/double/infer", body,
                       {{"Inference-Header-Content-Length", "10"}});
  EXPECT_EQ(shorter.status, 400);
  EXPECT_NE(ErrorOf(shorter).find("malformed JSON"), std::string::npos);
  Reply garbage = c.Do(http::verb::post, "/v2/models/double/infer", body,
                       {{"Inference-Header-Content-Length", "x1"}});
  EXPECT_EQ(garbage.status, 400);
  Reply past = c.Do(http::verb::post, "/v2/models/double/infer", body,
                    {{"Inference-Header-Content-Length", std::to_string(body.size() + 1)}});
  EXPECT_EQ(past.status, 400);
  EXPECT_NE(ErrorOf(past).find("Inference-Header-Content-Length"), std::string::npos);
  Reply brotli =
      c.Do(http::verb::post, "/v2/models/double/infer", body, {{"Content-Encoding", "br"}});
  EXPECT_EQ(brotli.status, 501);
  EXPECT_EQ(brotli.header("Accept-Encoding"), "gzip, deflate");
  EXPECT_NE(ErrorOf(brotli).find("'br'"), std::string::npos);
}

TEST_F(HttpServerTest, BinaryTensorRoundTrip) {
  Client c(port());
  const std::string json =
      R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,4],)"
      R"("parameters":{"binary_data_size":16}}],)"
      R"("outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}},{"name":"NEGATED"}]})";
  const std::string body = json + RawFloats({1.5f, -2.f, 3.f, 0.25f});
  Reply r = c.Do(http::verb::post, "/v2/models/double/infer", body,
                 {{"Inference-Header-Content-Length", std::to_string(json.size())},
                  {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/octet-stream");
  const size_t n = std::stoul(r.header("Inference-Header-Content-Length"));
  ASSERT_LE(n, r.body.size());
  EXPECT_EQ(
      r.body.substr(0, n),
      R"({"model_name":"double","model_version":"2","outputs":[)"
      R"({"name":"OUTPUT","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}},)"
      R"({"name":"NEGATED","datatype":"FP32","shape":[1,4],"data":[-1.5,2.0,-3.0,-0.25]}]})");
  EXPECT_EQ(r.body.substr(n), RawFloats({3.f, -4.f, 6.f, 0.5f}));

  // binary_data_output for every output; extra bytes after the inputs are refused.
  const std::string all =
      R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,4],)"
      R"("parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}})";
  Reply both =
      c.Do(http::verb::post, "/v2/models/double/infer", all + RawFloats({1.f, 2.f, 3.f, 4.f}),
           {{"Inference-Header-Content-Length", std::to_string(all.size())}});
  ASSERT_EQ(both.status, 200) << both.body;
  const size_t m = std::stoul(both.header("Inference-Header-Content-Length"));
  EXPECT_EQ(both.body.substr(m), RawFloats({2.f, 4.f, 6.f, 8.f, -1.f, -2.f, -3.f, -4.f}));
  Reply extra =
      c.Do(http::verb::post, "/v2/models/double/infer", all + RawFloats({1.f, 2.f, 3.f, 4.f, 5.f}),
           {{"Inference-Header-Content-Length", std::to_string(all.size())}});
  EXPECT_EQ(extra.status, 400);
  EXPECT_NE(ErrorOf(extra).find("unexpected additional input data"), std::string::npos);
  Reply truncated = c.Do(http::verb::post, "/v2/models/double/infer", all + RawFloats({1.f, 2.f}),
                         {{"Inference-Header-Content-Length", std::to_string(all.size())}});
  EXPECT_EQ(truncated.status, 400);
  EXPECT_NE(ErrorOf(truncated).find("unexpected size for input 'INPUT'"), std::string::npos);
  // The connection still serves.
  EXPECT_EQ(c.Post("/v2/models/double/infer", InferBody({1, 2, 3, 4}, 1)).status, 200);
}

TEST_F(HttpServerTest, Classification) {
  Client c(port());
  // OUTPUT = 2 * INPUT = [2, 10, 6, 4] per item; labels "zero", "one" for OUTPUT only.
  Reply r = c.Post("/v2/models/double/infer",
                   InferBody({1, 5, 3, 2, 4, 0, 1, 9}, 2,
                             R"(,"outputs":[{"name":"OUTPUT","parameters":{"classification":2}},)"
                             R"({"name":"NEGATED","parameters":{"classification":1,)"
                             R"("binary_data":true}}])"));
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t n = std::stoul(r.header("Inference-Header-Content-Length"));
  EXPECT_EQ(r.body.substr(0, n),
            R"({"model_name":"double","model_version":"2","outputs":[)"
            R"({"name":"OUTPUT","datatype":"BYTES","shape":[2,2],"data":)"
            R"(["10.000000:1:one","6.000000:2","18.000000:3","8.000000:0:zero"]},)"
            R"({"name":"NEGATED","datatype":"BYTES","shape":[2,1],)"
            R"("parameters":{"binary_data_size":30}}]})");
  // NEGATED = [-1,-5,-3,-2] -> "-1.000000:0"; [-4,-0,-1,-9] -> "-0.000000:1" (the negated 0 is
  // -0.0f); each string behind a 4-byte little-endian length.
  EXPECT_EQ(r.body.substr(n), std::string("\x0b\0\0\0-1.000000:0\x0b\0\0\0-0.000000:1", 30));
  Reply bad =
      c.Post("/v2/models/double/infer",
             InferBody({1, 2, 3, 4}, 1,
                       R"(,"outputs":[{"name":"OUTPUT","parameters":{"classification":-2}}])"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("'classification'"), std::string::npos);
}

TEST_F(HttpServerTest, CompressedRequestsAndResponses) {
  Client c(port());
  const std::string json = InferBody({1, 2, 3, 4}, 1);
  for (const auto& [name, bits] :
       std::vector<std::pair<std::string, int>>{{"gzip", 31}, {"deflate", 15}}) {
    SCOPED_TRACE(name);
    Reply r = c.Do(http::verb::post, "/v2/models/double/infer", Zip(json, bits),
                   {{"Content-Encoding", name}, {"Accept-Encoding", name}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("Content-Encoding"), name);
    const std::string plain = Unzip(r.body, bits);
    EXPECT_NE(plain.find(R"("data":[2.0,4.0,6.0,8.0])"), std::string::npos) << plain;
  }
  // Binary request compressed: the header length counts the decompressed JSON.
  const std::string head =
      R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,4],)"
      R"("parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}})";
  Reply b = c.Do(http::verb::post, "/v2/models/double/infer",
                 Zip(head + RawFloats({1.f, 1.f, 1.f, 1.f}), 31),
                 {{"Content-Encoding", "gzip"},
                  {"Inference-Header-Content-Length", std::to_string(head.size())},
                  {"Accept-Encoding", "deflate;q=0.5, gzip;q=0.9"}});
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.header("Content-Encoding"), "gzip");
  const std::string plain = Unzip(b.body, 31);
  const size_t n = std::stoul(b.header("Inference-Header-Content-Length"));
  EXPECT_EQ(plain.substr(n), RawFloats({2.f, 2.f, 2.f, 2.f, -1.f, -1.f, -1.f, -1.f}));
  // Corrupt data and a bomb that inflates past max_request_bytes (1 MiB here): 400.
  Reply corrupt = c.Do(http::verb::post, "/v2/models/double/infer", "not gzip at all",
                       {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(corrupt.status, 400);
  EXPECT_NE(ErrorOf(corrupt).find("not valid gzip data"), std::string::npos);
  Reply bomb = c.Do(http::verb::post, "/v2/models/double/infer",
                    Zip(std::string(64u << 20, ' '), 15), {{"Content-Encoding", "deflate"}});
  EXPECT_EQ(bomb.status, 400);
  EXPECT_NE(ErrorOf(bomb).find("exceeds the limit of 1048576 bytes"), std::string::npos);
  EXPECT_EQ(c.Post("/v2/models/double/infer", json).status, 200);
}

TEST(HttpServerLimitsTest, ConnectionsPastTheLimitGet503) {
  FakeManager manager;
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 2;
  options.max_connections = 2;
  auto server = HttpServer::Create(options, &manager);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());
  {
    Client a((*server)->port());
    Client b((*server)->port());
    EXPECT_EQ(a.Get("/v2/health/live").status, 200);
    EXPECT_EQ(b.Get("/v2/health/live").status, 200);
    Client c((*server)->port());
    Reply r = c.Read();
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.header("Retry-After"), "1");
    EXPECT_NE(ErrorOf(r).find("at most 2 concurrent HTTP connections"), std::string::npos);
    EXPECT_TRUE(c.ClosedByPeer());
    EXPECT_EQ(a.Get("/v2/health/live").status, 200);  // the open ones keep working
  }
  // Once they are closed, new connections are served again.
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    try {
      Client d((*server)->port());
      served = d.Get("/v2/health/live").status == 200;
    } catch (const std::exception&) {
      // Refused while the closed sessions were still being torn down; try again.
    }
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
  (*server)->Stop();
}

TEST_F(HttpServerTest, StopWaitsForInFlightInference) {
  FakeModel* slow = manager_.Get("slow", 1);
  slow->delay_ms_ = 400;
  Reply reply;
  Client c(port());
  Client idle(port());
  EXPECT_EQ(idle.Get("/v2/health/live").status, 200);
  std::thread client([&] { reply = c.Post("/v2/models/slow/infer", InferBody({1, 2, 3, 4}, 1)); });
  while (slow->started_.load() == 0) std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  const auto waited = std::chrono::steady_clock::now() - t0;
  client.join();
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find("[2.0,4.0,6.0,8.0]"), std::string::npos) << reply.body;
  EXPECT_FALSE(reply.raw.keep_alive());
  EXPECT_GE(waited, 200ms);
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_TRUE(idle.ClosedByPeer());
  server_->Stop();  // idempotent
  // New connections are refused.
  EXPECT_THROW(Client late(port()), boost::system::system_error);
}

// A client that closes its connection before the answer: its queued request is dropped from the
// model's queue (answered CANCELLED inside the server, never run), its running request's
// cancellation is set; the server goes on serving.
TEST_F(HttpServerTest, ClientThatLeavesCancelsItsQueuedAndRunningRequests) {
  testing::QueueModel& m = *manager_.queue;
  m.executor().Hold(true);
  Client running(port());
  running.SendOnly("/v2/models/queue/infer", InferBody({1, 2, 3, 4}, 1));
  ASSERT_TRUE(m.executor().WaitStarted(1));
  Client queued(port());
  queued.SendOnly("/v2/models/queue/infer", InferBody({5, 6, 7, 8}, 1));
  for (int i = 0; i < 500 && m.PendingRequestCount() == 0; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(m.PendingRequestCount(), 1u);
  queued.Close();
  EXPECT_TRUE(m.WaitCanceled(1)) << "the queued request was not dropped";
  EXPECT_EQ(m.PendingRequestCount(), 0u);
  running.Close();
  EXPECT_TRUE(m.executor().WaitRunningCancelled()) << "the running request was not cancelled";
  m.executor().Hold(false);
  // Only the first request ran, and it knew it was cancelled when it finished.
  for (int i = 0; i < 500 && m.executor().cancelled_when_released().empty(); ++i) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(m.executor().started(), 1);
  EXPECT_EQ(m.executor().cancelled_when_released(), std::vector<bool>{true});
  // A client that stays gets its answer.
  Client stays(port());
  Reply r = stays.Post("/v2/models/queue/infer", InferBody({1, 2, 3, 4}, 1));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("[2.0,4.0,6.0,8.0]"), std::string::npos) << r.body;
  EXPECT_EQ(m.Statistics().failures[static_cast<size_t>(FailureReason::kCanceled)], 1u);
}

// Pipelining: the next request sent while the first is answered is not a disconnect.
TEST_F(HttpServerTest, PipelinedRequestIsNotACancellation) {
  testing::QueueModel& m = *manager_.queue;
  m.executor().Hold(true);
  Client c(port());
  c.SendOnly("/v2/models/queue/infer", InferBody({1, 2, 3, 4}, 1));
  ASSERT_TRUE(m.executor().WaitStarted(1));
  c.SendOnly("/v2/models/queue/infer", InferBody({2, 2, 2, 2}, 1));
  std::this_thread::sleep_for(50ms);
  m.executor().Hold(false);
  Reply first = c.Read();
  Reply second = c.Read();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_NE(second.body.find("[4.0,4.0,4.0,4.0]"), std::string::npos) << second.body;
  EXPECT_EQ(m.Statistics().failures[static_cast<size_t>(FailureReason::kCanceled)], 0u);
}

TEST_F(HttpServerTest, LifecycleErrors) {
  EXPECT_EQ(server_->Start().code(), StatusCode::kFailedPrecondition);
  // The port is taken: a clear UNAVAILABLE naming address:port.
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = port();
  auto second = HttpServer::Create(options, &manager_);
  ASSERT_TRUE(second.ok());
  Status s = (*second)->Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port())), std::string::npos)
      << s.message();
  (*second)->Stop();

  options.port = 70000;
  EXPECT_EQ(HttpServer::Create(options, &manager_).status().code(), StatusCode::kInvalidArgument);
  options.port = 0;
  EXPECT_EQ(HttpServer::Create(options, nullptr).status().code(), StatusCode::kInvalidArgument);
  options.max_request_bytes = 0;
  EXPECT_EQ(HttpServer::Create(options, &manager_).status().code(), StatusCode::kInvalidArgument);

  // Never started: Stop and destruction are fine.
  HttpServerOptions idle_options;
  idle_options.port = 0;
  auto never = HttpServer::Create(idle_options, &manager_);
  ASSERT_TRUE(never.ok());
  (*never)->Stop();
  EXPECT_EQ((*never)->Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(HttpServerTest, HostNameAddressResolves) {
  HttpServerOptions options;
  options.address = "localhost";
  options.port = 0;
  auto server = HttpServer::Create(options, &manager_);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());
  Client c((*server)->port(), "localhost");
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
  options.address = "no-such-host.invalid";
  auto bad = HttpServer::Create(options, &manager_);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ((*bad)->Start().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpServerTest, Statistics) {
  Client c(port());
  Reply all = c.Get("/v2/models/stats");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(all.header("Content-Type"), "application/json");
  dom::parser parser;
  dom::element root;
  ASSERT_EQ(parser.parse(all.body).get(root), simdjson::SUCCESS) << all.body;
  dom::array stats;
  ASSERT_EQ(root["model_stats"].get_array().get(stats), simdjson::SUCCESS);
  std::vector<std::string> listed;
  for (dom::element m : stats) {
    std::string_view name, version;
    ASSERT_EQ(m["name"].get_string().get(name), simdjson::SUCCESS);
    ASSERT_EQ(m["version"].get_string().get(version), simdjson::SUCCESS);
    listed.push_back(std::string(name) + ":" + std::string(version));
  }
  // Every READY version of the index (the fake's "broken" and "fresh" are not ready).
  EXPECT_EQ(listed, (std::vector<std::string>{"busy:1", "double:1", "double:2", "drop:1", "fail:1",
                                              "slow:1"}));

  Reply one = c.Get("/v2/models/double/stats");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_NE(one.body.find(R"("name":"double","version":"1","last_inference":0,)"
                          R"("inference_count":100,"execution_count":1,)"),
            std::string::npos)
      << one.body;
  EXPECT_NE(one.body.find(R"("version":"2")"), std::string::npos) << one.body;
  EXPECT_NE(one.body.find(R"("batch_stats":[{"batch_size":4,)"), std::string::npos) << one.body;
  EXPECT_EQ(c.Post("/v2/models/double/versions/2/infer", InferBody({1, 2, 3, 4}, 1)).status, 200);
  Reply v2 = c.Get("/v2/models/double/versions/2/stats");
  ASSERT_EQ(v2.status, 200) << v2.body;
  EXPECT_NE(v2.body.find(R"("inference_count":201)"), std::string::npos) << v2.body;
  EXPECT_EQ(v2.body.find(R"("version":"1")"), std::string::npos) << v2.body;

  Reply unknown = c.Get("/v2/models/nope/stats");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(ErrorOf(unknown), "requested model 'nope' is not available");
  Reply bad_version = c.Get("/v2/models/double/versions/9/stats");
  EXPECT_EQ(bad_version.status, 400);
  EXPECT_EQ(ErrorOf(bad_version), "requested model version is not available for model 'double'");
  EXPECT_EQ(c.Post("/v2/models/stats", "").status, 405);
}

TEST_F(HttpServerTest, RepositoryIndex) {
  Client c(port());
  // The Python client posts an empty body.
  Reply r = c.Post("/v2/repository/index", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(r.body.find(R"({"name":"double","version":"2","state":"READY"})"), std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(R"({"name":"broken","version":"1","state":"UNAVAILABLE",)"
                        R"("reason":"model.onnx: parse error"})"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(R"({"name":"fresh"})"), std::string::npos) << r.body;
  ASSERT_EQ(r.body.front(), '[');

  Reply ready = c.Post("/v2/repository/index", R"({"ready":true})");
  ASSERT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body.find("broken"), std::string::npos) << ready.body;
  EXPECT_EQ(ready.body.find("fresh"), std::string::npos) << ready.body;
  EXPECT_NE(ready.body.find("double"), std::string::npos) << ready.body;

  Reply bad = c.Post("/v2/repository/index", R"({"ready":"yes"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("'ready' must be a boolean"), std::string::npos);
  Reply repo = c.Post("/v2/repository/r1/index", "");
  EXPECT_EQ(repo.status, 501);
  EXPECT_EQ(ErrorOf(repo), "'repository_name' specification is not supported");
  EXPECT_EQ(c.Get("/v2/repository/index").status, 405);
}

TEST_F(HttpServerTest, RepositoryLoadAndUnload) {
  Client c(port());
  Reply load = c.Post("/v2/repository/models/double/load", "");
  EXPECT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(load.body, "");
  EXPECT_EQ(c.Post("/v2/repository/models/double/load", "{}").status, 200);
  EXPECT_EQ(c.Post("/v2/repository/models/my%20model/load",
                   R"({"parameters":{"config":"{\"max_batch_size\":1}"}})")
                .status,
            200);
  Reply unload =
      c.Post("/v2/repository/models/double/unload", R"({"parameters":{"unload_dependents":true}})");
  EXPECT_EQ(unload.status, 200) << unload.body;
  EXPECT_EQ(unload.body, "");
  EXPECT_EQ(c.Post("/v2/repository/models/double/unload", "").status, 200);
  EXPECT_EQ(manager_.ControlCalls(),
            (std::vector<std::string>{"load double ", "load double ",
                                      R"(load my model {"max_batch_size":1})",
                                      "unload double dependents", "unload double"}));

  // The manager's errors map through the status table.
  manager_.SetControl(true, Status::InvalidArgument("load failed for model 'x': version 1: no"));
  Reply failed = c.Post("/v2/repository/models/x/load", "");
  EXPECT_EQ(failed.status, 400);
  EXPECT_EQ(ErrorOf(failed), "load failed for model 'x': version 1: no");
  manager_.SetControl(true, Status::Unavailable("explicit model load / unload is not allowed if "
                                                "polling is enabled"));
  Reply mode = c.Post("/v2/repository/models/x/unload", "");
  EXPECT_EQ(mode.status, 503);
  EXPECT_NE(ErrorOf(mode).find("polling"), std::string::npos);
  manager_.SetControl(true);

  // Refused before reaching the manager.
  const size_t calls = manager_.ControlCalls().size();
  Reply files = c.Post("/v2/repository/models/x/load",
                       R"({"parameters":{"file:1/model.onnx":"AA!A","config":"{}"}})");
  EXPECT_EQ(files.status, 400);
  EXPECT_NE(ErrorOf(files).find("'file:1/model.onnx': invalid base64"), std::string::npos);
  EXPECT_EQ(c.Post("/v2/repository/models/x/load", R"({"parameters":{"config":1}})").status, 400);
  EXPECT_EQ(c.Post("/v2/repository/models/x/unload", "[").status, 400);
  EXPECT_EQ(
      c.Post("/v2/repository/models/x/unload", R"({"parameters":{"unload_dependents":"yes"}})")
          .status,
      400);
  Reply repo = c.Post("/v2/repository/r1/models/x/load", "");
  EXPECT_EQ(repo.status, 501);
  EXPECT_EQ(ErrorOf(repo), "'repository_name' specification is not supported");
  EXPECT_EQ(manager_.ControlCalls().size(), calls);
}

// A slow load runs off the io threads: other requests (on other connections) are answered
// meanwhile, and Stop waits for the load to answer.
TEST_F(HttpServerTest, SlowLoadDoesNotBlockOtherRequests) {
  manager_.SetControl(false);
  Reply load_reply;
  Client loader(port());
  std::thread load([&] { load_reply = loader.Post("/v2/repository/models/double/load", ""); });
  while (manager_.ControlCalls().empty()) std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 6; ++i) {  // more requests than io threads
    Client other(port());
    EXPECT_EQ(other.Get("/v2/health/live").status, 200);
    EXPECT_EQ(other.Post("/v2/models/double/infer", InferBody({1, 2, 3, 4}, 1)).status, 200);
  }
  std::thread stop([&] { server_->Stop(); });
  std::this_thread::sleep_for(50ms);
  manager_.SetControl(true);
  load.join();
  stop.join();
  EXPECT_EQ(load_reply.status, 200) << load_reply.body;
}

TEST_F(HttpServerTest, DrainingRefusesNewWorkAndFinishesAcceptedWork) {
  FakeModel* slow = manager_.Get("slow", 1);
  slow->delay_ms_ = 300;
  Reply in_flight;
  Client c(port());
  std::thread client([&] {
    in_flight = c.Post("/v2/models/slow/infer", InferBody({1, 2, 3, 4}, 1));
  });
  while (slow->started_.load() == 0) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(server_->InferencesInFlight(), 1u);

  server_->StartDraining();
  Client other(port());
  EXPECT_EQ(other.Get("/v2/health/ready").status, 400);
  EXPECT_EQ(other.Get("/v2/health/live").status, 200);
  Reply refused = other.Post("/v2/models/double/infer", InferBody({1, 2, 3, 4}, 1));
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(ErrorOf(refused).find("shutting down"), std::string::npos);
  EXPECT_EQ(other.Post("/v2/repository/models/double/load", "").status, 503);
  EXPECT_EQ(other.Get("/v2/models/double").status, 200);  // metadata still answers
  EXPECT_EQ(other.Get("/v2/models/stats").status, 200);
  EXPECT_EQ(other.Get("/v2/models/double/ready").status, 503);
  server_->SetReady(true);  // draining is for good
  EXPECT_EQ(other.Get("/v2/health/ready").status, 400);
  EXPECT_EQ(other.Post("/v2/models/double/infer", InferBody({1, 2, 3, 4}, 1)).status, 503);

  client.join();
  EXPECT_EQ(in_flight.status, 200) << in_flight.body;
  EXPECT_NE(in_flight.body.find("[2.0,4.0,6.0,8.0]"), std::string::npos) << in_flight.body;
  EXPECT_EQ(server_->InferencesInFlight(), 0u);
}

}  // namespace
}  // namespace kiln
