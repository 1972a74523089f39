// Role names for protocol/chat.h.
#include "protocol/chat.h"

#include <array>
#include <utility>

namespace flashserve::protocol {
namespace {

constexpr std::array<std::pair<Role, std::string_view>, 6> kRoleNames = {{
    {Role::kSystem, "system"},
    {Role::kDeveloper, "developer"},
    {Role::kUser, "user"},
    {Role::kAssistant, "assistant"},
    {Role::kTool, "tool"},
    {Role::kLatestReminder, "latest_reminder"},
}};

}  // namespace

std::string_view RoleName(Role role) {
  for (const auto& [r, name] : kRoleNames) {
    if (r == role) return name;
  }
  return "unknown";
}

std::optional<Role> RoleFromName(std::string_view name) {
  for (const auto& [r, role_name] : kRoleNames) {
    if (role_name == name) return r;
  }
  return std::nullopt;
}

}  // namespace flashserve::protocol
