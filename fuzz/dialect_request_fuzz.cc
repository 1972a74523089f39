// Request bodies of every dialect through the parsers workers and the router share
// (dialect::ParseChatBody / ParseMessagesBody / ParseResponsesBody, with and without a seal, as
// a worker and as the router's estimate), then what parses through both prompt encoders: any
// JSON is parsed or refused with a message naming why, and never crashes an encoder.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dialect/dialect_request.h"
#include "encoding/request_prompt.h"

namespace {

using flashserve::dialect::DialectContext;
using flashserve::dialect::DialectRequest;
using flashserve::encoding::EncodingVersion;

const flashserve::dialect::ReasoningSeal& Seal() {
  static const flashserve::dialect::ReasoningSeal seal(std::array<uint8_t, 32>{1, 2, 3});
  return seal;
}

void Check(const nlohmann::ordered_json& body, int dialect, const DialectContext& ctx) {
  DialectRequest req;
  std::optional<flashserve::net::ApiError> e = dialect == 0   ? flashserve::dialect::ParseChatBody(body, ctx, &req)
                                               : dialect == 1 ? flashserve::dialect::ParseMessagesBody(body, ctx, &req)
                                                              : flashserve::dialect::ParseResponsesBody(body, ctx, &req);
  if (e) {
    if (e->message.empty()) __builtin_trap();
    return;
  }
  auto prompt = flashserve::encoding::EncodeRequest(req.chat, ctx.version, {.v4_picture_parts = true});
  if (!prompt.ok() && prompt.error().message().empty()) __builtin_trap();
}

}  // namespace

// The first byte picks the dialect and the context; the rest is the JSON body.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int dialect = data[0] % 3;
  const bool v41 = (data[0] >> 2) & 1;
  const bool router = (data[0] >> 3) & 1;
  auto body = nlohmann::ordered_json::parse(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1),
                                            nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return 0;
  DialectContext ctx{.vocab_size = 129280, .version = v41 ? EncodingVersion::kV41 : EncodingVersion::kV4,
                     .seal = router ? nullptr : &Seal(), .estimate_sealed = router};
  Check(body, dialect, ctx);
  return 0;
}
