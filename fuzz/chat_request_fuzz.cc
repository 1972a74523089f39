// Chat Completions request bodies through the decoder every OpenAI-dialect route uses
// (protocol::ParseChatRequest): any bytes either decode or are refused with an error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/chat_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto request = flashserve::protocol::ParseChatRequest(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!request.ok() && request.error().message().empty()) __builtin_trap();
  return 0;
}
