// Registration of the flashserve subcommands. Each Register* function (one per cmd_*.cc)
// adds a subcommand with its flags and sets *run to the code to execute when it is chosen.
// Called once from main on the main thread.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace flashserve::app {

using CommandFn = std::function<int()>;

void RegisterServeCommand(CLI::App& app, CommandFn* run);
void RegisterEncodeChatCommand(CLI::App& app, CommandFn* run);
void RegisterTokenizeCommands(CLI::App& app, CommandFn* run);
void RegisterMakeModelCommand(CLI::App& app, CommandFn* run);
void RegisterLogitsCommand(CLI::App& app, CommandFn* run);
void RegisterGenerateCommand(CLI::App& app, CommandFn* run);
void RegisterBenchForwardCommand(CLI::App& app, CommandFn* run);
void RegisterBenchSpeculativeCommand(CLI::App& app, CommandFn* run);
void RegisterBenchVisionCommand(CLI::App& app, CommandFn* run);
void RegisterBenchCommand(CLI::App& app, CommandFn* run);
void RegisterKvCommand(CLI::App& app, CommandFn* run);
void RegisterRouterCommand(CLI::App& app, CommandFn* run);
void RegisterImageInfoCommand(CLI::App& app, CommandFn* run);
void RegisterPlanCommand(CLI::App& app, CommandFn* run);
void RegisterTenantCommands(CLI::App& app, CommandFn* run);
void RegisterUsageCommand(CLI::App& app, CommandFn* run);

}  // namespace flashserve::app
