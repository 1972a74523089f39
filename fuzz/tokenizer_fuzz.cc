// Text through the DeepSeek tokenizer (third_party/tokenizer/deepseek_v3): valid UTF-8 encoded
// as plain text decodes back to itself; any bytes (invalid UTF-8, control-token strings,
// long runs) encode without a crash, to known ids only.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const flashserve::tokenizer::Tokenizer& DeepSeek() {
  static const std::unique_ptr<flashserve::tokenizer::Tokenizer> tokenizer = [] {
    auto loaded = flashserve::tokenizer::Tokenizer::Load(FLASHSERVE_FUZZ_TOKENIZER);
    if (!loaded.ok()) {  // scripts/setup.sh fetches it
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", loaded.error().ToString().c_str());
      std::abort();
    }
    return std::move(loaded).value();
  }();
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = DeepSeek();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (int32_t id : tok.Encode(text))
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  if (!flashserve::tokenizer::ValidateUtf8(text).ok()) return 0;
  if (tok.Decode(tok.EncodePlain(text)) != text) __builtin_trap();
  return 0;
}
