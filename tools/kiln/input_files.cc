// SPDX-License-Identifier: Apache-2.0
// Model inputs read from files (input_files.h).

#include "tools/kiln/input_files.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "graph/onnx/tensor_file.h"
#include "runtime/session.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

std::string WithNote(std::string help, std::string_view note) {
  if (!note.empty()) help += fmt::format("; {}", note);
  return help;
}

// Files input_0.<ext>, input_1.<ext>, ... in `dir`, in index order (.pb or .npy).
Result<std::vector<std::string>> ListInputsDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound(fmt::format("--inputs-dir '{}' is not a directory", dir));
  }
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    const std::string pb = fmt::format("{}/input_{}.pb", dir, i);
    const std::string npy = fmt::format("{}/input_{}.npy", dir, i);
    if (fs::exists(pb, ec)) {
      files.push_back(pb);
    } else if (fs::exists(npy, ec)) {
      files.push_back(npy);
    } else {
      break;
    }
  }
  return files;
}

// The index of the graph input called `name`, or an error listing the inputs.
Result<size_t> InputIndex(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    if (graph.value(graph.inputs[i]).name == name) return i;
  }
  std::vector<std::string> names;
  for (int id : graph.inputs) names.push_back(graph.value(id).name);
  return Status::InvalidArgument(
      fmt::format("model has no input '{}' (inputs: {})", name, fmt::join(names, ", ")));
}

Status ReadInto(InputFiles& files, const Graph& graph, size_t index, const std::string& path) {
  const Value& input = graph.value(graph.inputs[index]);
  if (files.given(index)) {
    return Status::InvalidArgument(fmt::format("input '{}' is given twice", input.name));
  }
  KILN_ASSIGN_OR_RETURN(files.values[index], ReadValueFile(path, input.type));
  files.paths[index] = path;
  return Status::OK();
}

}  // namespace

void AddInputFileOptions(CLI::App& cmd, InputFileFlags& flags, std::string_view note) {
  cmd.add_option("--input", flags.named,
                 WithNote("NAME=PATH: the data of graph input NAME from a .pb (ONNX TensorProto; "
                          "SequenceProto or OptionalProto for such inputs) or .npy file; "
                          "repeatable",
                          note));
  cmd.add_option("--inputs", flags.list,
                 WithNote("Comma-separated files for the graph inputs in graph-input order", note))
      ->delimiter(',');
  cmd.add_option("--inputs-dir", flags.dir,
                 WithNote("Directory holding input_0.pb, input_1.pb, ... (or .npy) in graph-input "
                          "order (the layout of ONNX's test data sets)",
                          note));
}

Result<InputFiles> ReadInputFiles(const InputFileFlags& flags, const Graph& graph,
                                  std::string_view model) {
  const size_t num_inputs = graph.inputs.size();
  InputFiles files;
  files.values.resize(num_inputs);
  files.paths.resize(num_inputs);
  std::vector<std::string> positional = flags.list;
  if (!flags.dir.empty()) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> listed, ListInputsDir(flags.dir));
    positional.insert(positional.end(), listed.begin(), listed.end());
  }
  if (positional.size() > num_inputs) {
    return Status::InvalidArgument(fmt::format("model '{}' has {} inputs but {} files were given",
                                               model, num_inputs, positional.size()));
  }
  for (size_t i = 0; i < positional.size(); ++i) {
    KILN_RETURN_IF_ERROR(ReadInto(files, graph, i, positional[i]));
  }
  for (const std::string& spec : flags.named) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument(fmt::format("--input '{}' is not NAME=PATH", spec));
    }
    KILN_ASSIGN_OR_RETURN(size_t index, InputIndex(graph, spec.substr(0, eq)));
    KILN_RETURN_IF_ERROR(ReadInto(files, graph, index, spec.substr(eq + 1)));
  }
  return files;
}

Status RequireEveryInput(const InputFiles& files, const Graph& graph) {
  for (size_t i = 0; i < files.values.size(); ++i) {
    if (!files.given(i)) {
      return Status::InvalidArgument(
          fmt::format("no data for input '{}'", graph.value(graph.inputs[i]).name));
    }
  }
  return Status::OK();
}

Status CheckInputFile(const RuntimeValue& value, const Value& input, std::string_view path,
                      bool check_dims) {
  return CheckValueMatchesType(value, input.type,
                               fmt::format("input '{}' from '{}'", input.name, path), check_dims);
}

}  // namespace kiln::tools
