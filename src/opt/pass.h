// SPDX-License-Identifier: Apache-2.0
#pragma once
// The optimizer pass contract (internal to src/opt). A pass has a name (its --disable-pass
// flag), a one-line description, and Run, which rewrites the graph in a GraphEditor and returns
// how many rewrites it made (0: nothing changed). Passes are stateless, so Run is const; one
// instance serves any number of graphs. The inventory of passes, in pipeline order, is
// passes.inc.
//
// A pass only rewrites where the result computes the same values for every input the original
// accepts: fusions check that intermediates have a single reader and are not graph outputs,
// that dtypes are FP32 and that shapes are provably compatible; where that cannot be shown
// from the declared types the pattern is left alone.

#include <memory>
#include <string_view>

#include "base/result.h"
#include "opt/graph_editor.h"
#include "opt/optimizer.h"

namespace kiln::opt {

class Pass {
 public:
  virtual ~Pass() = default;
  // REQUIRES: the editor's graph passes VerifyGraph. Returns the number of rewrites; an error
  // only for optimizer bugs or resource exhaustion, never for a pattern that does not apply.
  virtual Result<int> Run(GraphEditor& ed, const OptimizerOptions& options) const = 0;
  // A final pass runs once, after the others have reached their fixpoint (or the round bound),
  // so that none of them ever sees what it wrote (half_weights' 16-bit weights).
  virtual bool Final() const { return false; }
};

#define KILN_OPT_PASS(name, factory, description) std::unique_ptr<Pass> factory();
#include "opt/passes.inc"
#undef KILN_OPT_PASS

// Sets the ai.kiln opset import a graph with kiln's operators needs.
void ImportKilnDomain(GraphEditor& ed);

}  // namespace kiln::opt
