// `flashserve serve`: the engine worker with the HTTP API. The serving stack (continuous
// batching, prefix cache, HTTP routes) is not built yet; the command says so and exits.
#include <cstdio>

#include "app/commands.h"

namespace flashserve::app {

void RegisterServeCommand(CLI::App& app, CommandFn* run) {
  auto* cmd = app.add_subcommand("serve", "Run an engine worker with the HTTP API (not implemented yet)");
  cmd->callback([run] {
    *run = [] {
      std::fprintf(stderr,
                   "flashserve serve: the HTTP serving stack is not implemented yet.\n"
                   "Available now: make-model, logits, generate, bench-forward (see --help).\n");
      return 2;
    };
  });
}

}  // namespace flashserve::app
