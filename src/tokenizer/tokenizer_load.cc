// tokenizer.json -> TokenizerParts (tokenizer/tokenizer_parts.h). Accepts what this room
// reproduces exactly (byte-level BPE, Split/ByteLevel pre-tokenizers, identity normalizer,
// ByteLevel decoder) and rejects everything else with a kBadTokenizer message naming the part.
#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_parts.h"

namespace flashserve::tokenizer {
namespace {

using Json = nlohmann::json;

base::Error Bad(std::string message) {
  return base::MakeError(base::ErrorCode::kBadTokenizer, std::move(message));
}

const Json* Field(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool IsNullOr(const Json* value, auto&& predicate) { return value == nullptr || value->is_null() || predicate(*value); }

std::string TypeOf(const Json& object) {
  const Json* type = Field(object, "type");
  return type != nullptr && type->is_string() ? type->get<std::string>() : std::string("<no type>");
}

// GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true.
constexpr std::string_view kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

base::Status ParseBpeOptions(const Json& model, BpeConfig* config) {
  const std::string type = TypeOf(model);
  if (Field(model, "type") != nullptr && type != "BPE") {
    return Bad(fmt::format("model type \"{}\" is not supported (only BPE)", type));
  }
  if (!IsNullOr(Field(model, "dropout"), [](const Json& v) { return v.is_number() && v.get<double>() == 0.0; })) {
    return Bad("BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!IsNullOr(Field(model, key), [](const Json& v) { return v.is_string() && v.get<std::string>().empty(); })) {
      return Bad(fmt::format("BPE {} is not supported", key));
    }
  }
  if (const Json* v = Field(model, "byte_fallback"); v != nullptr && v->is_boolean() && v->get<bool>()) {
    return Bad("BPE byte_fallback is not supported");
  }
  if (const Json* v = Field(model, "unk_token"); v != nullptr && !v->is_null()) {
    if (!v->is_string()) return Bad("BPE unk_token must be a string or null");
    config->unk_token = v->get<std::string>();
  }
  if (const Json* v = Field(model, "fuse_unk"); v != nullptr && v->is_boolean()) config->fuse_unk = v->get<bool>();
  if (const Json* v = Field(model, "ignore_merges"); v != nullptr && v->is_boolean()) {
    config->ignore_merges = v->get<bool>();
  }
  return base::Status::Ok();
}

base::Status ParseModel(const Json& doc, BpeConfig* config) {
  const Json* model = Field(doc, "model");
  if (model == nullptr || !model->is_object()) return Bad("missing \"model\" object");
  FS_RETURN_IF_ERROR(ParseBpeOptions(*model, config));
  const Json* vocab = Field(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return Bad("model has no \"vocab\" object");
  config->vocab.reserve(vocab->size());
  std::vector<uint8_t> seen;
  for (const auto& [text, id_json] : vocab->items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= INT32_MAX) {
      return Bad(fmt::format("vocab entry \"{}\" has an invalid id", text));
    }
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    if (static_cast<size_t>(id) >= seen.size()) seen.resize(static_cast<size_t>(id) + 1, 0);
    if (seen[id]++) return Bad(fmt::format("vocab id {} is used twice", id));
    config->vocab.emplace_back(text, id);
  }
  const Json* merges = Field(*model, "merges");
  if (merges == nullptr || !merges->is_array()) return Bad("model has no \"merges\" array");
  config->merges.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const Json& m = (*merges)[rank];
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return Bad(fmt::format("merge {} (\"{}\") is not two tokens separated by one space", rank, line));
      }
      config->merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      config->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad(fmt::format("merge {} is neither \"a b\" nor [a, b]", rank));
    }
  }
  return base::Status::Ok();
}

base::Status CheckNormalizer(const Json* normalizer) {
  if (normalizer == nullptr || normalizer->is_null()) return base::Status::Ok();
  if (TypeOf(*normalizer) == "Sequence") {
    const Json* list = Field(*normalizer, "normalizers");
    if (list == nullptr || !list->is_array()) return Bad("normalizer Sequence without \"normalizers\"");
    for (const Json& n : *list) FS_RETURN_IF_ERROR(CheckNormalizer(&n));
    return base::Status::Ok();
  }
  return Bad(fmt::format("normalizer \"{}\" is not supported (only none or an empty Sequence)", TypeOf(*normalizer)));
}

base::Status ParseSplit(const Json& split, std::vector<SplitSpec>* specs) {
  SplitSpec spec;
  const Json* pattern = Field(split, "pattern");
  if (const Json* regex = pattern ? Field(*pattern, "Regex") : nullptr; regex != nullptr && regex->is_string()) {
    spec.pattern = regex->get<std::string>();
  } else if (const Json* str = pattern ? Field(*pattern, "String") : nullptr; str != nullptr && str->is_string()) {
    spec.pattern = str->get<std::string>();
    spec.is_regex = false;
  } else {
    return Bad("Split pre-tokenizer without a {\"Regex\"} or {\"String\"} pattern");
  }
  const Json* behavior = Field(split, "behavior");
  const std::string name = behavior != nullptr && behavior->is_string() ? behavior->get<std::string>() : "";
  if (name == "Isolated") {
    spec.behavior = SplitBehavior::kIsolated;
  } else if (name == "Removed") {
    spec.behavior = SplitBehavior::kRemoved;
  } else {
    return Bad(fmt::format("Split behavior \"{}\" is not supported (Isolated, Removed)", name));
  }
  if (const Json* invert = Field(split, "invert"); invert != nullptr && invert->is_boolean()) {
    spec.invert = invert->get<bool>();
  }
  specs->push_back(std::move(spec));
  return base::Status::Ok();
}

// Flattens the pre-tokenizer into Split stages; it must end with exactly one ByteLevel.
base::Status ParsePreTokenizer(const Json& pre, std::vector<SplitSpec>* specs, bool* saw_byte_level) {
  const std::string type = TypeOf(pre);
  if (*saw_byte_level) return Bad(fmt::format("pre-tokenizer \"{}\" after ByteLevel is not supported", type));
  if (type == "Sequence") {
    const Json* list = Field(pre, "pretokenizers");
    if (list == nullptr || !list->is_array()) return Bad("pre-tokenizer Sequence without \"pretokenizers\"");
    for (const Json& p : *list) FS_RETURN_IF_ERROR(ParsePreTokenizer(p, specs, saw_byte_level));
    return base::Status::Ok();
  }
  if (type == "Split") return ParseSplit(pre, specs);
  if (type == "ByteLevel") {
    if (const Json* v = Field(pre, "add_prefix_space"); v != nullptr && v->is_boolean() && v->get<bool>()) {
      return Bad("ByteLevel pre-tokenizer with add_prefix_space=true is not supported");
    }
    const Json* use_regex = Field(pre, "use_regex");
    if (use_regex == nullptr || (use_regex->is_boolean() && use_regex->get<bool>())) {
      specs->push_back(SplitSpec{std::string(kByteLevelRegex), true, SplitBehavior::kIsolated, false});
    }
    *saw_byte_level = true;
    return base::Status::Ok();
  }
  return Bad(fmt::format("pre-tokenizer \"{}\" is not supported (Sequence, Split, ByteLevel)", type));
}

base::Status CheckDecoder(const Json* decoder) {
  if (decoder == nullptr || decoder->is_null()) return Bad("missing decoder (ByteLevel required)");
  if (TypeOf(*decoder) == "ByteLevel") return base::Status::Ok();
  if (TypeOf(*decoder) == "Sequence") {
    const Json* list = Field(*decoder, "decoders");
    if (list != nullptr && list->is_array() && list->size() == 1) return CheckDecoder(&(*list)[0]);
  }
  return Bad(fmt::format("decoder \"{}\" is not supported (only ByteLevel)", TypeOf(*decoder)));
}

base::Status CheckTruncationAndPadding(const Json& doc) {
  if (const Json* t = Field(doc, "truncation"); t != nullptr && !t->is_null()) {
    return Bad("truncation is set; ids would depend on it (not supported)");
  }
  if (const Json* p = Field(doc, "padding"); p != nullptr && !p->is_null()) {
    const Json* strategy = Field(*p, "strategy");
    if (strategy == nullptr || !strategy->is_string() || strategy->get<std::string>() != "BatchLongest") {
      return Bad("padding other than BatchLongest is not supported");
    }
  }
  return base::Status::Ok();
}

bool JsonFlag(const Json& token, const char* key, bool fallback) {
  const Json* v = Field(token, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

// Reads added_tokens and checks each id against the one HF `tokenizers` assigns on load (the id
// of an existing vocab/added entry with that text, else the next id after the vocab).
base::Result<std::vector<AddedToken>> ParseAddedTokens(const Json* list, const BpeConfig& config) {
  std::vector<AddedToken> added;
  if (list == nullptr || list->is_null()) return added;
  if (!list->is_array()) return Bad("\"added_tokens\" is not an array");
  std::unordered_map<std::string_view, int32_t> vocab;
  for (const auto& [text, id] : config.vocab) vocab.emplace(text, id);
  std::unordered_map<std::string, int32_t> added_ids;
  int64_t max_added = -1;
  for (const Json& t : *list) {
    const Json* content = Field(t, "content");
    const Json* id = Field(t, "id");
    if (content == nullptr || !content->is_string() || id == nullptr || !id->is_number_integer()) {
      return Bad("added token without a string \"content\" and an integer \"id\"");
    }
    AddedToken token;
    token.content = content->get<std::string>();
    token.id = static_cast<int32_t>(std::clamp<int64_t>(id->get<int64_t>(), -1, INT32_MAX - 1));
    token.special = JsonFlag(t, "special", false);
    token.lstrip = JsonFlag(t, "lstrip", false);
    token.rstrip = JsonFlag(t, "rstrip", false);
    token.single_word = JsonFlag(t, "single_word", false);
    token.normalized = JsonFlag(t, "normalized", !token.special);
    if (token.content.empty()) continue;  // HF ignores it
    if (added_ids.count(token.content)) return Bad(fmt::format("added token \"{}\" appears twice", token.content));
    int64_t expected;
    if (auto it = vocab.find(token.content); it != vocab.end()) {
      expected = it->second;
    } else {
      const auto num_vocab = static_cast<int64_t>(config.vocab.size());
      expected = max_added < 0 ? num_vocab : (max_added >= num_vocab ? max_added + 1 : num_vocab);
    }
    if (expected != token.id) {
      return Bad(fmt::format("added token \"{}\" has id {} but Hugging Face tokenizers would give it id {}",
                             token.content, token.id, expected));
    }
    max_added = std::max<int64_t>(max_added, token.id);
    added_ids.emplace(token.content, token.id);
    added.push_back(std::move(token));
  }
  return added;
}

// Demo models: gives each V4 control token that is not an added token the lowest-numbered
// remaining `<｜place▁holder▁no▁N｜>` (or its vocab id when the vocab already has the text).
base::Status DefineMissingV4Tokens(const BpeConfig& config, std::vector<AddedToken>* added,
                                   std::vector<std::string>* defined) {
  constexpr std::string_view kPrefix = "<｜place▁holder▁no▁";
  constexpr std::string_view kSuffix = "｜>";
  std::map<int64_t, size_t> placeholders;  // N -> index into *added
  for (size_t i = 0; i < added->size(); ++i) {
    std::string_view c = (*added)[i].content;
    if (c.size() <= kPrefix.size() + kSuffix.size() || !c.starts_with(kPrefix) || !c.ends_with(kSuffix)) continue;
    std::string_view digits = c.substr(kPrefix.size(), c.size() - kPrefix.size() - kSuffix.size());
    if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      continue;
    }
    placeholders.emplace(std::stoll(std::string(digits)), i);
  }
  auto next_placeholder = placeholders.begin();
  for (std::string_view name : kV4ControlTokens) {
    auto present = std::find_if(added->begin(), added->end(), [&](const AddedToken& t) { return t.content == name; });
    if (present != added->end()) continue;
    auto in_vocab = std::find_if(config.vocab.begin(), config.vocab.end(), [&](const auto& v) { return v.first == name; });
    if (in_vocab != config.vocab.end()) {
      added->push_back(AddedToken{std::string(name), in_vocab->second, false, false, false, false, true});
      continue;
    }
    if (next_placeholder == placeholders.end()) {
      return Bad(fmt::format("no unused <｜place▁holder▁no▁N｜> token left to define \"{}\"", name));
    }
    AddedToken& slot = (*added)[next_placeholder->second];
    ++next_placeholder;
    slot = AddedToken{std::string(name), slot.id, false, false, false, false, true};
    if (defined != nullptr) defined->emplace_back(name);
  }
  return base::Status::Ok();
}

void BuildIdTables(const BpeConfig& config, const std::vector<AddedToken>& added, TokenizerParts* parts) {
  int32_t max_id = -1;
  for (const auto& entry : config.vocab) max_id = std::max(max_id, entry.second);
  for (const auto& token : added) max_id = std::max(max_id, token.id);
  parts->vocab_size = max_id + 1;
  parts->id_text.assign(static_cast<size_t>(max_id + 1), std::string());
  parts->id_flags.assign(static_cast<size_t>(max_id + 1), 0);
  parts->text_to_id.reserve(config.vocab.size() + added.size());
  for (const auto& [text, id] : config.vocab) {
    parts->id_text[id] = text;
    parts->id_flags[id] = kIdKnown;
    parts->text_to_id[text] = id;
  }
  for (const auto& token : added) {  // added tokens win, as HF looks them up first
    parts->id_text[token.id] = token.content;
    parts->id_flags[token.id] = kIdKnown | kIdAdded | (token.special ? kIdSpecial : 0);
    parts->text_to_id[token.content] = token.id;
  }
  // HF ByteLevel decoder: a token whose characters are all in the byte alphabet decodes to those
  // bytes; any other token (e.g. "<｜User｜>") decodes to its own UTF-8 text.
  parts->decode_offsets.assign(static_cast<size_t>(max_id + 2), 0);
  std::string bytes;
  for (int32_t id = 0; id <= max_id; ++id) {
    const std::string& text = parts->id_text[id];
    parts->decode_bytes += ByteLevelToBytes(text, &bytes) ? bytes : text;
    parts->decode_offsets[id + 1] = static_cast<uint32_t>(parts->decode_bytes.size());
  }
}

}  // namespace

base::Result<std::unique_ptr<TokenizerParts>> ParseTokenizerJson(std::string_view text,
                                                                 const LoadOptions& options) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("not valid JSON");
  if (!doc.is_object()) return Bad("top level is not a JSON object");
  try {
    BpeConfig config;
    FS_RETURN_IF_ERROR(ParseModel(doc, &config));
    FS_RETURN_IF_ERROR(CheckNormalizer(Field(doc, "normalizer")));
    FS_RETURN_IF_ERROR(CheckDecoder(Field(doc, "decoder")));
    FS_RETURN_IF_ERROR(CheckTruncationAndPadding(doc));
    std::vector<SplitSpec> specs;
    bool saw_byte_level = false;
    const Json* pre = Field(doc, "pre_tokenizer");
    if (pre != nullptr && !pre->is_null()) FS_RETURN_IF_ERROR(ParsePreTokenizer(*pre, &specs, &saw_byte_level));
    if (!saw_byte_level) return Bad("the pre-tokenizer must end with ByteLevel (byte-level BPE only)");
    FS_ASSIGN_OR_RETURN(std::vector<AddedToken> added, ParseAddedTokens(Field(doc, "added_tokens"), config));
    if (options.define_missing_v4_tokens) FS_RETURN_IF_ERROR(DefineMissingV4Tokens(config, &added, options.defined_v4_tokens));

    auto parts = std::make_unique<TokenizerParts>();
    FS_ASSIGN_OR_RETURN(parts->bpe, BpeModel::Build(config));
    FS_ASSIGN_OR_RETURN(parts->pre_tokenizer, PreTokenizer::Build(specs));
    parts->added_tokens = AddedTokenMatcher(added);
    BuildIdTables(config, added, parts.get());
    return parts;
  } catch (const Json::exception& e) {
    return Bad(fmt::format("unexpected JSON structure: {}", e.what()));
  }
}

}  // namespace flashserve::tokenizer
