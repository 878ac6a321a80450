// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model inputs read from files, as `kiln run`, `kiln profile` and `kiln validate` take them:
//
//   --input NAME=PATH   the value of graph input NAME (repeatable)
//   --inputs A,B,...    files for the graph inputs in graph-input order
//   --inputs-dir DIR    DIR/input_0.pb (or .npy), DIR/input_1.pb, ... in graph-input order (the
//                       layout of ONNX's test data sets)
//
// A file is a .pb (ONNX TensorProto; SequenceProto / OptionalProto for inputs declared as such)
// or a .npy (graph/onnx/tensor_file.h). Positional files (--inputs, then --inputs-dir) come
// first, then the named ones.
//
//   InputFileFlags flags;                        // filled by CLI11
//   AddInputFileOptions(*cmd, flags, "fed to every timed run");
//   ...
//   KILN_ASSIGN_OR_RETURN(InputFiles files, ReadInputFiles(flags, graph, model_path));
//   KILN_RETURN_IF_ERROR(RequireEveryInput(files, graph));   // when every input needs a file
//
// Errors (INVALID_ARGUMENT unless said otherwise), each naming the input or the file: more files
// than inputs, --input without NAME=, a name that is not an input (listing the inputs), an input
// given twice, a --inputs-dir that is not a directory (NOT_FOUND), and the errors of reading a
// file (ReadValueFile). The values are not checked against the declared types here: the session
// does it at run time, or CheckInputFile up front.
//
// Thread safety: plain functions over their arguments (and the files).

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "tensor/runtime_value.h"

namespace CLI {
class App;
}

namespace kiln::tools {

struct InputFileFlags {
  std::vector<std::string> named;  // NAME=PATH
  std::vector<std::string> list;   // positional, graph-input order
  std::string dir;                 // input_0.pb|.npy, input_1..., graph-input order

  bool empty() const { return named.empty() && list.empty() && dir.empty(); }
};

// Registers --input, --inputs and --inputs-dir on `cmd`, storing into `flags` (which must outlive
// the parse). `note`, when not empty, ends the help of each (what the data is used for).
void AddInputFileOptions(CLI::App& cmd, InputFileFlags& flags, std::string_view note);

struct InputFiles {
  std::vector<RuntimeValue> values;  // one per graph input; invalid where no file was given
  std::vector<std::string> paths;    // the file of each input, empty where none was given

  bool given(size_t input) const { return values[input].valid(); }
};

// Reads the files `flags` name for the inputs of `graph`. `model` (the model's path) appears in
// the error about too many files.
Result<InputFiles> ReadInputFiles(const InputFileFlags& flags, const Graph& graph,
                                  std::string_view model);

// INVALID_ARGUMENT "no data for input 'NAME'" for the first graph input without a file.
Status RequireEveryInput(const InputFiles& files, const Graph& graph);

// Checks the value read for graph input `input` from `path` against its declared type: kind,
// dtype, rank and, with `check_dims`, every declared (known) dim. The message names the input and
// the file, e.g. "input 'x' from 'x.npy': expected shape FP32[batch,3], got [2,4] (dim 1
// differs)".
Status CheckInputFile(const RuntimeValue& value, const Value& input, std::string_view path,
                      bool check_dims);

}  // namespace kiln::tools
