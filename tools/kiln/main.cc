// SPDX-License-Identifier: Apache-2.0
// kiln: one binary for the server and the offline tools. Each subcommand lives in its own file;
// this file only parses the command line and dispatches.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "base/logging.h"
#include "base/settings.h"
#include "base/thread_wait.h"
#include "tools/kiln/commands.h"

int main(int argc, char** argv) {
  // Before anything else: may re-execute the binary with OpenMP's wait policy set
  // (base/thread_wait.h).
  kiln::ApplyThreadWaitPolicy(argv);
  CLI::App app{
      "kiln: model inference server and optimizing runtime (KServe v2 / Open Inference "
      "Protocol)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  kiln::SetLogVerbosity(0);

  std::map<std::string, kiln::tools::CommandMain> commands;
  commands["run"] = kiln::tools::AddRunCommand(app);
  commands["profile"] = kiln::tools::AddProfileCommand(app);
  commands["optimize"] = kiln::tools::AddOptimizeCommand(app);
  commands["quantize"] = kiln::tools::AddQuantizeCommand(app);
  commands["validate"] = kiln::tools::AddValidateCommand(app);
  commands["serve"] = kiln::tools::AddServeCommand(app);
  commands["bench"] = kiln::tools::AddBenchCommand(app, argc, argv);
  commands["tune"] = kiln::tools::AddTuneCommand(app);
  commands["generate"] = kiln::tools::AddGenerateCommand(app);
  commands["batch"] = kiln::tools::AddBatchCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Environment settings (base/settings.h, docs/settings.md): a bad value stops every command.
  if (kiln::Status s = kiln::CheckSettings(); !s.ok()) {
    std::fprintf(stderr, "kiln: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = commands.find(sub->get_name());
    if (it != commands.end()) return it->second();
  }
  std::fprintf(stderr, "kiln: no command given (try --help)\n");
  return 2;
}
