// Tokenizer behaviour on tiny hand-written tokenizer.json documents: byte-level mapping, merge
// order, pre-tokenizer splits, added tokens (leftmost-longest, two passes, lstrip/rstrip,
// single_word), decoding, the streaming detokenizer and every load error. Expected ids are worked
// out by hand; the split and added-token cases were also checked against HF `tokenizers`.
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::tokenizer {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

Json ByteLevel(bool use_regex = false) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

Json Split(const std::string& regex, const std::string& behavior = "Isolated", bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}

Json Added(int id, const std::string& content, bool special = true, bool normalized = false) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", special}};
}

// A byte-level BPE tokenizer.json: ids 0..255 are the single bytes (id == byte value), then
// `extra` entries from id 256 (byte-level text, e.g. "Ġa").
Json TinyDoc(const std::vector<std::string>& extra, Json merges = Json::array(), Json added = Json::array(),
             Json splits = Json::array()) {
  if (merges.is_null()) merges = Json::array();
  if (added.is_null()) added = Json::array();
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 256 + static_cast<int>(i);
  splits.push_back(ByteLevel());
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
          {"normalizer", nullptr}, {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", splits}}},
          {"post_processor", nullptr}, {"decoder", ByteLevel(true)},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
}

std::unique_ptr<Tokenizer> MustLoad(const Json& doc, const LoadOptions& options = {}) {
  auto loaded = Tokenizer::LoadFromJson(doc.dump(), options);
  EXPECT_TRUE(loaded.ok()) << loaded.error().ToString();
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

TEST(ByteLevelTest, AlphabetMatchesGpt2) {
  EXPECT_EQ(ByteToCodepoint('A'), uint32_t{'A'});
  EXPECT_EQ(ByteToCodepoint('!'), uint32_t{'!'});
  EXPECT_EQ(ByteToCodepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteToCodepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToCodepoint('\t'), 0x109u);  // ĉ
  EXPECT_EQ(ByteToCodepoint(0x7F), 0x121u);
  EXPECT_EQ(ByteToCodepoint(0xA0), 0x142u);
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);  // Ń
  EXPECT_EQ(ByteToCodepoint(0xE9), 0xE9u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(CodepointToByte(ByteToCodepoint(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(CodepointToByte(' '), -1);
  EXPECT_EQ(BytesToByteLevel(" the\n"), "\xC4\xA0the\xC4\x8A");  // "Ġthe" "Ċ"
  std::string bytes;
  EXPECT_TRUE(ByteLevelToBytes("\xC4\xA0the", &bytes));
  EXPECT_EQ(bytes, " the");
  EXPECT_FALSE(ByteLevelToBytes("<\xEF\xBD\x9C>", &bytes));  // "<｜>": ｜ is not in the alphabet
}

TEST(BpeTest, WithoutMergesEveryByteIsOneToken) {
  auto tok = MustLoad(TinyDoc({}));
  EXPECT_EQ(tok->Encode("a b\n"), (Ids{'a', ' ', 'b', '\n'}));
  EXPECT_EQ(tok->Encode("\xC3\xA9"), (Ids{0xC3, 0xA9}));  // é
  EXPECT_EQ(tok->Encode(""), Ids{});
  EXPECT_EQ(tok->vocab_size(), 256);
}

TEST(BpeTest, MergesApplyByRankNotPosition) {
  auto right_first = MustLoad(TinyDoc({"ab", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(right_first->Encode("abc"), (Ids{'a', 257}));
  auto left_first = MustLoad(TinyDoc({"ab", "bc"}, {"a b", "b c"}));
  EXPECT_EQ(left_first->Encode("abc"), (Ids{256, 'c'}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  auto tok = MustLoad(TinyDoc({"aa"}, {"a a"}));
  EXPECT_EQ(tok->Encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(tok->Encode("aaaa"), (Ids{256, 256}));
}

TEST(BpeTest, MergesMayBeStringsOrPairs) {
  auto strings = MustLoad(TinyDoc({"ab", "abc"}, {"a b", "ab c"}));
  auto pairs = MustLoad(TinyDoc({"ab", "abc"}, Json::array({{"a", "b"}, {"ab", "c"}})));
  EXPECT_EQ(strings->Encode("abcab"), (Ids{257, 256}));
  EXPECT_EQ(pairs->Encode("abcab"), (Ids{257, 256}));
}

// "abc" is in the vocab but the merges never build it from a, b, c: the whole-piece fast path must
// not shortcut BPE (unless the model says ignore_merges).
TEST(BpeTest, VocabEntryUnreachableByMergesIsNotUsed) {
  Json doc = TinyDoc({"bc", "ab", "abc"}, {"b c", "a b", "ab c"});
  EXPECT_EQ(MustLoad(doc)->Encode("abc"), (Ids{'a', 256}));
  doc["model"]["ignore_merges"] = true;
  EXPECT_EQ(MustLoad(doc)->Encode("abc"), (Ids{258}));
}

TEST(BpeTest, LongWordsMergeLikeShortOnes) {
  auto tok = MustLoad(TinyDoc({"ab", "abab"}, {"a b", "ab ab"}));
  std::string word;
  for (int i = 0; i < 5000; ++i) word += "ab";
  const Ids ids = tok->Encode(word + "a");
  ASSERT_EQ(ids.size(), 2501u);
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(ids[i], 257);
  EXPECT_EQ(ids.back(), 'a');
}

TEST(PreTokenizerTest, ByteLevelRegexSplitsBeforeSpaces) {
  Json doc = TinyDoc({"\xC4\xA0" "a"}, {"\xC4\xA0 a"});  // "Ġa"
  EXPECT_EQ(MustLoad(doc)->Encode(" a"), (Ids{256}));
  doc["pre_tokenizer"]["pretokenizers"] = Json::array({ByteLevel(/*use_regex=*/true)});
  EXPECT_EQ(MustLoad(doc)->Encode("a a"), (Ids{'a', 256}));
}

TEST(PreTokenizerTest, DigitGroupsOfThree) {
  Json doc = TinyDoc({"12", "123", "45"}, {"1 2", "12 3", "4 5"}, Json::array(), Json::array({Split("\\p{N}{1,3}")}));
  EXPECT_EQ(MustLoad(doc)->Encode("12345"), (Ids{257, 258}));
}

// Pieces checked against HF tokenizers' pre_tokenize_str for the same Split.
TEST(PreTokenizerTest, RemovedInvertedAndEmptyMatches) {
  EXPECT_EQ(MustLoad(TinyDoc({}, {}, {}, Json::array({Split("x", "Removed")})))->Encode("axbxxc"), (Ids{'a', 'b', 'c'}));
  EXPECT_EQ(MustLoad(TinyDoc({}, {}, {}, Json::array({Split("x", "Removed", true)})))->Encode("axbxxc"), (Ids{'x', 'x', 'x'}));
  // b* matches empty strings too: pieces a | bb | c | b.
  auto empty_matches = MustLoad(TinyDoc({"bb", "cb"}, {"b b", "c b"}, {}, Json::array({Split("b*")})));
  EXPECT_EQ(empty_matches->Encode("abbcb"), (Ids{'a', 256, 'c', 'b'}));
  // Lookahead keeps the last space for the next word: a | "  " | " " | b.
  auto lookahead = MustLoad(TinyDoc({"\xC4\xA0\xC4\xA0"}, {"\xC4\xA0 \xC4\xA0"}, {}, Json::array({Split("\\s+(?!\\S)|\\s+")})));
  EXPECT_EQ(lookahead->Encode("a   b"), (Ids{'a', 256, ' ', 'b'}));
}

TEST(PreTokenizerTest, TranslatesOnigurumaClasses) {
  EXPECT_EQ(TranslateOnigurumaPattern("\\s+(?!\\S)").value(), "\\p{White_Space}+(?!\\P{White_Space})");
  EXPECT_EQ(TranslateOnigurumaPattern("[\\s\\h]").value(), "[\\p{White_Space}0-9a-fA-F]");
  EXPECT_EQ(TranslateOnigurumaPattern("\\p{Zs}").value(), "\\p{Zs}");  // same in Unicode 14 and 16
  // CJK Extension H (Unicode 15) is a letter for HF; PCRE2 10.42 needs the range added.
  EXPECT_NE(TranslateOnigurumaPattern("\\p{L}").value().find("\\x{31350}-\\x{323AF}"), std::string::npos);
  EXPECT_NE(TranslateOnigurumaPattern("[^\\p{Letter}]").value().find("\\x{31350}"), std::string::npos);
  // U+1171E moved from Mn to Mc: \p{Mn} must exclude it, \p{M} is unchanged for it.
  EXPECT_NE(TranslateOnigurumaPattern("\\p{Mn}").value().find("(?![\\x{1171E}])"), std::string::npos);
  EXPECT_EQ(TranslateOnigurumaPattern("\\p{M}").value().find("1171E"), std::string::npos);
  for (const char* bad : {"\\bword", "[a&&b]", "[[:alpha:]]", "(?m)x", "\\p{Han}", "[\\p{Mn}]", "[\\W]",
                          "[]a]", "[abc", "x\\", "\\X", "\\u12", "\\p{L", "[\\P{L}]"}) {
    auto r = TranslateOnigurumaPattern(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), base::ErrorCode::kBadTokenizer) << bad;
  }
}

TEST(PreTokenizerTest, DetectsCharactersWhoseCategoryChanged) {
  EXPECT_FALSE(HasUnicodeDeltaChar(""));
  EXPECT_FALSE(HasUnicodeDeltaChar("plain text, \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80"));  // 中文 😀
  EXPECT_TRUE(HasUnicodeDeltaChar("x\xF0\xB1\x8D\x90y"));   // U+31350, CJK Extension H (Unicode 15)
  EXPECT_TRUE(HasUnicodeDeltaChar("\xE1\xAD\x8E"));          // U+1B4E (Unicode 16)
  EXPECT_TRUE(HasUnicodeDeltaChar("a\xF0\x91\x9C\x9E"));    // U+1171E, Mn -> Mc
  EXPECT_FALSE(HasUnicodeDeltaChar("\xF0\x91\x9C"));         // truncated: ignored
}

TEST(AddedTokensTest, EncodeSplitsThemEncodePlainDoesNot) {
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "<m>")})));
  EXPECT_EQ(tok->Encode("x<m>y"), (Ids{'x', 256, 'y'}));
  EXPECT_EQ(tok->EncodePlain("x<m>y"), (Ids{'x', '<', 'm', '>', 'y'}));
  EXPECT_EQ(tok->Decode(Ids{'x', 256, 'y'}), "x<m>y");
  EXPECT_EQ(tok->TokenId("<m>"), 256);
  EXPECT_EQ(tok->TokenText(256), "<m>");
  EXPECT_TRUE(tok->IsSpecial(256));
  EXPECT_EQ(tok->vocab_size(), 257);
}

TEST(AddedTokensTest, LeftmostLongestMatch) {
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "<a>"), Added(257, "<a><b>"), Added(258, "b><")})));
  EXPECT_EQ(tok->Encode("<a><b>"), (Ids{257}));
  EXPECT_EQ(tok->Encode("<a><c>"), (Ids{256, '<', 'c', '>'}));
  EXPECT_EQ(tok->Encode("xb><a>"), (Ids{'x', 258, 'a', '>'}));
}

// Non-normalized tokens are extracted first, so "bc" wins over the longer normalized "abc".
TEST(AddedTokensTest, NonNormalizedTokensMatchFirst) {
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "abc", false, true), Added(257, "bc", false, false)})));
  EXPECT_EQ(tok->Encode("abc"), (Ids{'a', 257}));
  EXPECT_EQ(tok->Encode("zabcz"), (Ids{'z', 'a', 257, 'z'}));
  auto only_normalized = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "abc", false, true)})));
  EXPECT_EQ(only_normalized->Encode("zabcz"), (Ids{'z', 256, 'z'}));
}

TEST(AddedTokensTest, LstripAndRstripAbsorbWhitespace) {
  Json token = Added(256, "<m>");
  token["lstrip"] = token["rstrip"] = true;
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({token})));
  EXPECT_EQ(tok->Encode("x  <m>  y"), (Ids{'x', 256, 'y'}));
  EXPECT_EQ(tok->Encode("\xE3\x80\x80<m>\xE2\x80\x80z"), (Ids{256, 'z'}));  // U+3000, U+2000
  EXPECT_EQ(tok->Encode("<m>\t<m>"), (Ids{256, 256}));
  token["rstrip"] = false;
  auto left_only = MustLoad(TinyDoc({}, {}, Json::array({token})));
  EXPECT_EQ(left_only->Encode("x <m> y"), (Ids{'x', 256, ' ', 'y'}));
}

TEST(AddedTokensTest, SingleWordNeedsWordBoundaries) {
  Json token = Added(256, "<w>", false, true);
  token["single_word"] = true;
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({token})));
  EXPECT_EQ(tok->Encode("a<w> <w> <w>b"), (Ids{'a', '<', 'w', '>', ' ', 256, ' ', '<', 'w', '>', 'b'}));
  EXPECT_EQ(tok->Encode("_<w>"), (Ids{'_', '<', 'w', '>'}));
  EXPECT_EQ(tok->Encode("-<w>-"), (Ids{'-', 256, '-'}));
  EXPECT_EQ(tok->Encode("\xC3\xA9<w>"), (Ids{0xC3, 0xA9, '<', 'w', '>'}));  // é is a word character
}

TEST(DecodeTest, LossyUtf8AndUnknownIds) {
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "<｜x｜>")})));
  EXPECT_EQ(tok->Decode(Ids{0xE4, 0xBD, 0xA0}), "你");
  EXPECT_EQ(tok->Decode(Ids{0xE4, 0xBD, 'A'}), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(tok->Decode(Ids{0xFF, 256, 9999, -1, 'z'}), "\xEF\xBF\xBD<｜x｜>z");
  EXPECT_EQ(tok->TokenBytes(' '), " ");
  EXPECT_EQ(tok->TokenBytes(9999), "");
  EXPECT_FALSE(tok->TokenText(9999).has_value());
  EXPECT_FALSE(tok->TokenId("nope").has_value());
}

TEST(DetokenizerTest, HoldsBackOnlyIncompleteCharacters) {
  auto tok = MustLoad(TinyDoc({}, {}, Json::array({Added(256, "<｜x｜>")})));
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push(0xE4), "");
  EXPECT_EQ(detok.num_pending_bytes(), 1u);
  EXPECT_EQ(detok.Push(0xBD), "");
  EXPECT_EQ(detok.Push(0xA0), "你");
  EXPECT_EQ(detok.num_pending_bytes(), 0u);
  EXPECT_EQ(detok.Push(0xFF), "\xEF\xBF\xBD");  // can never complete: emitted at once
  EXPECT_EQ(detok.Push(0xE4), "");
  EXPECT_EQ(detok.Push('A'), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(detok.Push(256), "<｜x｜>");
  EXPECT_EQ(detok.Push(9999), "");
  EXPECT_EQ(detok.Push(0xF0), "");
  EXPECT_EQ(detok.Push(0x9F), "");
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.num_pending_bytes(), 0u);
  EXPECT_EQ(detok.Flush(), "");
}

TEST(DemoTokensTest, MissingControlTokensTakePlaceholdersByNumber) {
  Json added = Json::array({Added(256, "<｜place▁holder▁no▁1｜>"), Added(257, "<｜place▁holder▁no▁0｜>"),
                            Added(258, "<think>", false, true)});
  for (int i = 0; i < 12; ++i) added.push_back(Added(259 + i, "<｜place▁holder▁no▁" + std::to_string(i + 2) + "｜>"));
  auto plain = MustLoad(TinyDoc({}, {}, added));
  EXPECT_FALSE(plain->TokenId("</think>").has_value());
  std::vector<std::string> defined;
  auto demo = MustLoad(TinyDoc({}, {}, added), LoadOptions{.define_missing_v4_tokens = true, .defined_v4_tokens = &defined});
  ASSERT_EQ(defined.size(), std::size(kV4ControlTokens) - 1);  // all but <think>, in order
  EXPECT_EQ(defined.front(), "</think>");
  EXPECT_EQ(defined.back(), "<｜read_url｜>");
  EXPECT_EQ(demo->TokenId("<think>"), 258);      // already in the file: kept
  EXPECT_EQ(demo->TokenId("</think>"), 257);     // placeholder 0
  EXPECT_EQ(demo->TokenId("<｜latest_reminder｜>"), 256);  // placeholder 1
  EXPECT_EQ(demo->TokenId("｜DSML｜"), 259);    // placeholder 2
  EXPECT_EQ(demo->TokenId("<｜read_url｜>"), 269);  // placeholder 12
  EXPECT_FALSE(demo->TokenId("<｜place▁holder▁no▁0｜>").has_value());
  EXPECT_EQ(demo->TokenId("<｜place▁holder▁no▁13｜>"), 270);  // still free
  EXPECT_FALSE(demo->IsSpecial(257));
  EXPECT_EQ(demo->Encode("a</think>b"), (Ids{'a', 257, 'b'}));
  EXPECT_EQ(demo->EncodePlain("</think>"), plain->EncodePlain("</think>"));

  added.erase(added.end() - 2, added.end());  // one placeholder short
  auto short_of_one = Tokenizer::LoadFromJson(TinyDoc({}, {}, added).dump(), {.define_missing_v4_tokens = true});
  ASSERT_FALSE(short_of_one.ok());
  EXPECT_NE(short_of_one.error().message().find("<｜read_url｜>"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::function<void(Json&)> mutate;
  const char* message_part;
};

// Every load error path: the message names what is wrong.
TEST(LoadErrorTest, RejectsWhatItCannotReproduce) {
  const std::vector<BadCase> cases = {
      {"no model", [](Json& d) { d.erase("model"); }, "missing \"model\""},
      {"model type", [](Json& d) { d["model"]["type"] = "WordPiece"; }, "model type \"WordPiece\""},
      {"no vocab", [](Json& d) { d["model"].erase("vocab"); }, "no \"vocab\""},
      {"bad vocab id", [](Json& d) { d["model"]["vocab"]["zz"] = -4; }, "invalid id"},
      {"duplicate id", [](Json& d) { d["model"]["vocab"]["zz"] = 7; }, "used twice"},
      {"no merges", [](Json& d) { d["model"].erase("merges"); }, "no \"merges\""},
      {"merge format", [](Json& d) { d["model"]["merges"] = {"a b c"}; }, "two tokens"},
      {"merge type", [](Json& d) { d["model"]["merges"] = Json::array({42}); }, "neither"},
      {"merge oov", [](Json& d) { d["model"]["merges"] = {"a b"}; }, "\"ab\" is not in the vocab"},
      {"dropout", [](Json& d) { d["model"]["dropout"] = 0.1; }, "dropout"},
      {"suffix", [](Json& d) { d["model"]["end_of_word_suffix"] = "</w>"; }, "end_of_word_suffix"},
      {"byte fallback", [](Json& d) { d["model"]["byte_fallback"] = true; }, "byte_fallback"},
      {"unk type", [](Json& d) { d["model"]["unk_token"] = 3; }, "unk_token"},
      {"unk oov", [](Json& d) { d["model"]["unk_token"] = "<unk>"; }, "unk_token \"<unk>\""},
      {"normalizer", [](Json& d) { d["normalizer"] = {{"type", "NFC"}}; }, "normalizer \"NFC\""},
      {"bad sequence", [](Json& d) { d["normalizer"] = {{"type", "Sequence"}}; }, "without \"normalizers\""},
      {"no decoder", [](Json& d) { d["decoder"] = nullptr; }, "missing decoder"},
      {"decoder", [](Json& d) { d["decoder"] = {{"type", "WordPiece"}}; }, "decoder \"WordPiece\""},
      {"truncation", [](Json& d) { d["truncation"] = {{"max_length", 5}}; }, "truncation"},
      {"padding", [](Json& d) { d["padding"] = {{"strategy", {{"Fixed", 8}}}}; }, "padding"},
      {"no pre-tokenizer", [](Json& d) { d["pre_tokenizer"] = nullptr; }, "must end with ByteLevel"},
      {"unknown pre", [](Json& d) { d["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "\"Whitespace\" is not supported"},
      {"after ByteLevel",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].push_back(Split("x")); }, "after ByteLevel"},
      {"prefix space",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"][0]["add_prefix_space"] = true; }, "add_prefix_space"},
      {"bad sequence pre", [](Json& d) { d["pre_tokenizer"] = {{"type", "Sequence"}}; }, "without \"pretokenizers\""},
      {"split behavior",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].insert(d["pre_tokenizer"]["pretokenizers"].begin(),
                                                                 Split("x", "MergedWithPrevious")); },
       "behavior \"MergedWithPrevious\""},
      {"split pattern",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].insert(d["pre_tokenizer"]["pretokenizers"].begin(),
                                                                 Json{{"type", "Split"}, {"behavior", "Isolated"}}); },
       "without a {\"Regex\"}"},
      {"regex construct",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].insert(d["pre_tokenizer"]["pretokenizers"].begin(),
                                                                 Split("\\bx")); },
       "unsupported escape \\b"},
      {"regex syntax",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].insert(d["pre_tokenizer"]["pretokenizers"].begin(),
                                                                 Split("(x")); },
       "PCRE2 compile error"},
      {"empty pattern",
       [](Json& d) { d["pre_tokenizer"]["pretokenizers"].insert(d["pre_tokenizer"]["pretokenizers"].begin(),
                                                                 Split("")); },
       "empty pattern"},
      {"added not array", [](Json& d) { d["added_tokens"] = {{"a", 1}}; }, "not an array"},
      {"added fields", [](Json& d) { d["added_tokens"] = Json::array({{{"content", "<x>"}}}); }, "integer \"id\""},
      {"added id", [](Json& d) { d["added_tokens"] = Json::array({Added(300, "<x>")}); }, "would give it id 256"},
      {"added twice",
       [](Json& d) { d["added_tokens"] = Json::array({Added(256, "<x>"), Added(256, "<x>")}); }, "appears twice"},
      {"json type", [](Json& d) { d["model"]["vocab"] = Json::array(); }, "no \"vocab\" object"},
  };
  for (const BadCase& c : cases) {
    Json doc = TinyDoc({});
    c.mutate(doc);
    auto r = Tokenizer::LoadFromJson(doc.dump());
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.error().code(), base::ErrorCode::kBadTokenizer) << c.name;
    EXPECT_NE(r.error().message().find(c.message_part), std::string::npos) << c.name << ": " << r.error().message();
  }
}

TEST(LoadErrorTest, MalformedJsonAndMissingFile) {
  for (const char* text : {"", "{", "[1, 2]", "{\"model\": }", "null"}) {
    auto r = Tokenizer::LoadFromJson(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code(), base::ErrorCode::kBadTokenizer) << text;
  }
  auto missing = Tokenizer::Load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(LoadTest, AcceptsOptionalForms) {
  Json doc = TinyDoc({});
  doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array()}};
  doc["decoder"] = {{"type", "Sequence"}, {"decoders", Json::array({ByteLevel()})}};
  doc["padding"] = {{"strategy", "BatchLongest"}};
  doc["model"]["dropout"] = 0.0;
  doc["model"].erase("type");
  doc["pre_tokenizer"] = ByteLevel();
  EXPECT_EQ(MustLoad(doc)->Encode("ab"), (Ids{'a', 'b'}));
  doc["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}},
                                             ByteLevel()}}};
  EXPECT_EQ(MustLoad(doc)->Encode("a.b"), (Ids{'a', 'b'}));  // a literal ".", not "any character"
}

// Without an unk token, bytes missing from the vocab are dropped (HF); with one they become unk,
// fused into one token when fuse_unk is set.
TEST(BpeTest, BytesMissingFromTheVocab) {
  Json doc = TinyDoc({"<unk>"});
  doc["model"]["vocab"].erase(BytesToByteLevel("x"));
  EXPECT_EQ(MustLoad(doc)->Encode("axxb"), (Ids{'a', 'b'}));
  doc["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(MustLoad(doc)->Encode("axxb"), (Ids{'a', 256, 256, 'b'}));
  doc["model"]["fuse_unk"] = true;
  EXPECT_EQ(MustLoad(doc)->Encode("axxb"), (Ids{'a', 256, 'b'}));
}

}  // namespace
}  // namespace flashserve::tokenizer
