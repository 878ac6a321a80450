// SPDX-License-Identifier: Apache-2.0
// Shape inference in a forked child (shape_inference.h).
//
// NOTE: the child writes one message to a pipe and _exits:
//   kind (1 byte: 'T' types, 'E' error) | payload length (8 bytes, little-endian) | payload
// For 'T' the payload is a serialized GraphProto whose value_info and output entries are the
// inferred types of every graph of the model, each renamed "<graph index>:<value name>", where
// graphs are indexed in the depth-first order of CollectGraphs (the same in parent and child,
// since both walk the same model). For 'E' it is libonnx's error message. Only a complete message
// counts: a child that dies early, for whatever reason, gives none, and the parent's model stays
// as it was. The exit status is read only to explain a missing message.

#include "graph/onnx/shape_inference.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace kiln::onnx_internal {
namespace {

// Address space the child may add to what it inherits; far more than inference of any real model
// needs, far less than a runaway allocation asks for.
constexpr uint64_t kChildMemoryBudgetBytes = uint64_t{2} << 30;
constexpr size_t kHeaderBytes = 9;

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// The graph and its subgraphs, depth first, in node and attribute order.
void CollectGraphs(onnx::GraphProto* graph, std::vector<onnx::GraphProto*>* out) {
  out->push_back(graph);
  for (onnx::NodeProto& node : *graph->mutable_node()) {
    for (onnx::AttributeProto& attr : *node.mutable_attribute()) {
      if (attr.has_g()) CollectGraphs(attr.mutable_g(), out);
      for (onnx::GraphProto& sub : *attr.mutable_graphs()) CollectGraphs(&sub, out);
    }
  }
}

void WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent gave up; nothing left to do
    done += static_cast<size_t>(n);
  }
}

std::string Message(char kind, const std::string& payload) {
  std::string out(1, kind);
  uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + payload;
}

// Caps the child's address space at its current size plus the budget, so a runaway allocation
// fails (std::bad_alloc) instead of inviting the OOM killer, and turns off core dumps (a crash
// in the child is an expected outcome, not something to debug from a core file).
void LimitChild() {
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[128] = {};
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return;
  uint64_t pages = 0;
  std::from_chars(buf, buf + n, pages);
  const uint64_t current = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  struct rlimit limit;
  limit.rlim_cur = limit.rlim_max = current + kChildMemoryBudgetBytes;
  ::setrlimit(RLIMIT_AS, &limit);
}

[[noreturn]] void RunChild(onnx::ModelProto* model, int fd) {
  LimitChild();
  // A crash of libonnx here must only end this child (the parent reads it from the exit status):
  // handlers inherited from the parent (a sanitizer's, libFuzzer's) would report it as a crash
  // of the whole program.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  // libonnx prints warnings, and sanitizers their crash reports, to stderr; the outcome reaches
  // the parent as a Status instead.
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
  std::string message;
  try {
    onnx::shape_inference::InferShapes(
        *model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type_val=*/false, /*strict_mode_val=*/0,
                                    /*data_prop_val=*/false));
    std::vector<onnx::GraphProto*> graphs;
    CollectGraphs(model->mutable_graph(), &graphs);
    onnx::GraphProto types;
    for (size_t k = 0; k < graphs.size(); ++k) {
      for (const onnx::ValueInfoProto& vi : graphs[k]->value_info()) {
        onnx::ValueInfoProto* out = types.add_value_info();
        *out->mutable_type() = vi.type();
        out->set_name(std::to_string(k) + ":" + vi.name());
      }
      for (const onnx::ValueInfoProto& vi : graphs[k]->output()) {
        onnx::ValueInfoProto* out = types.add_output();
        *out->mutable_type() = vi.type();
        out->set_name(std::to_string(k) + ":" + vi.name());
      }
    }
    message = Message('T', types.SerializeAsString());
  } catch (const std::exception& e) {
    message = Message('E', e.what());
  } catch (...) {
    message = Message('E', "unknown exception");
  }
  WriteAll(fd, message);
  ::_exit(0);
}

// Splits "<graph index>:<name>"; false when malformed or the index is out of range.
bool SplitName(const std::string& full, size_t num_graphs, size_t* graph, std::string* name) {
  const size_t colon = full.find(':');
  if (colon == std::string::npos) return false;
  auto [end, ec] = std::from_chars(full.data(), full.data() + colon, *graph);
  if (ec != std::errc() || end != full.data() + colon || *graph >= num_graphs) return false;
  *name = full.substr(colon + 1);
  return true;
}

Status ApplyTypes(const std::string& payload, onnx::ModelProto* model) {
  onnx::GraphProto types;
  if (!types.ParseFromString(payload)) {
    return Status::Internal("shape inference returned an unreadable result");
  }
  std::vector<onnx::GraphProto*> graphs;
  CollectGraphs(model->mutable_graph(), &graphs);
  // Check everything before changing anything.
  size_t k;
  std::string name;
  for (const onnx::ValueInfoProto& vi : types.value_info()) {
    if (!SplitName(vi.name(), graphs.size(), &k, &name)) {
      return Status::Internal("shape inference returned a malformed value name");
    }
  }
  for (const onnx::ValueInfoProto& vi : types.output()) {
    if (!SplitName(vi.name(), graphs.size(), &k, &name)) {
      return Status::Internal("shape inference returned a malformed output name");
    }
  }
  for (onnx::GraphProto* g : graphs) g->clear_value_info();
  for (const onnx::ValueInfoProto& vi : types.value_info()) {
    SplitName(vi.name(), graphs.size(), &k, &name);
    onnx::ValueInfoProto* out = graphs[k]->add_value_info();
    out->set_name(name);
    *out->mutable_type() = vi.type();
  }
  for (const onnx::ValueInfoProto& vi : types.output()) {
    SplitName(vi.name(), graphs.size(), &k, &name);
    for (onnx::ValueInfoProto& out : *graphs[k]->mutable_output()) {
      if (out.name() == name) *out.mutable_type() = vi.type();
    }
  }
  return Status::OK();
}

}  // namespace

Status InferShapesIsolated(onnx::ModelProto* model, std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::Unavailable(fmt::format("cannot create a pipe: {}", ErrnoText(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::Unavailable(fmt::format("cannot fork: {}", ErrnoText(err)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    RunChild(model, fds[1]);
  }
  ::close(fds[1]);

  // Read until EOF, the deadline, or a read error.
  std::string received;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[1 << 14];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // re-check the deadline
    if (ready < 0) break;
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(chunk, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int wait_status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &wait_status, 0);
  } while (waited < 0 && errno == EINTR);

  if (received.size() >= kHeaderBytes) {
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) {
      length |= static_cast<uint64_t>(static_cast<unsigned char>(received[1 + i])) << (8 * i);
    }
    if (length == received.size() - kHeaderBytes) {
      const std::string payload = received.substr(kHeaderBytes);
      if (received[0] == 'T') return ApplyTypes(payload, model);
      return Status::InvalidArgument(payload);
    }
  }
  if (timed_out) {
    return Status::DeadlineExceeded(
        fmt::format("shape inference did not finish within {} ms", timeout.count()));
  }
  if (waited == pid && WIFSIGNALED(wait_status)) {
    const char* abbrev = ::sigabbrev_np(WTERMSIG(wait_status));  // thread-safe, unlike strsignal
    return Status::Internal(fmt::format("libonnx shape inference crashed (signal SIG{})",
                                        abbrev != nullptr ? abbrev : "?"));
  }
  if (waited == pid && WIFEXITED(wait_status)) {
    return Status::Internal(
        fmt::format("libonnx shape inference exited with status {} without a result (crashed or "
                    "out of memory)",
                    WEXITSTATUS(wait_status)));
  }
  return Status::Internal("libonnx shape inference ended without a result");
}

}  // namespace kiln::onnx_internal
