// Entry point of the flashserve binary: parses the subcommand and runs it.
#include <cstdio>

#include "app/commands.h"
#include "base/log.h"

int main(int argc, char** argv) {
  using namespace flashserve::app;
  CLI::App app{"flashserve: serving system for the DeepSeek-V4 model family", "flashserve"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CommandFn run;
  RegisterServeCommand(app, &run);
  RegisterEncodeChatCommand(app, &run);
  RegisterTokenizeCommands(app, &run);
  RegisterMakeModelCommand(app, &run);
  RegisterLogitsCommand(app, &run);
  RegisterGenerateCommand(app, &run);
  RegisterBenchForwardCommand(app, &run);
  RegisterBenchSpeculativeCommand(app, &run);
  RegisterBenchVisionCommand(app, &run);
  RegisterBenchCommand(app, &run);
  RegisterKvCommand(app, &run);
  RegisterRouterCommand(app, &run);
  RegisterImageInfoCommand(app, &run);
  RegisterPlanCommand(app, &run);
  RegisterTenantCommands(app, &run);
  RegisterUsageCommand(app, &run);
  CLI11_PARSE(app, argc, argv);
  if (verbose) flashserve::base::SetLogLevel(flashserve::base::LogLevel::kDebug);
  return run ? run() : 1;
}
