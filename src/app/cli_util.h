// Small helpers shared by the developer subcommands: token-id lists from flags or files,
// model loading with a readable error, and engine option flags. Main thread only.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vision/plan.h"
#include "base/result.h"
#include "engine/model.h"
#include "engine/options.h"
#include "grammar/grammar_cache.h"
#include "kvstore/kv_store.h"
#include "meter/api_keys.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::app {

// "0,5,17" or "0 5 17" (commas and/or whitespace) -> ids; rejects anything else.
base::Result<std::vector<int32_t>> ParseTokenList(const std::string& text);
// --tokens or --tokens-file (exactly one must be set).
base::Result<std::vector<int32_t>> TokensFromFlags(const std::string& tokens, const std::string& tokens_file);

// n seeded random ids in [2, vocab) (benchmarks' prompts and tokens).
std::vector<int32_t> RandomTokenIds(int n, int64_t vocab, uint32_t seed);

// Adds --no-qat, --reference and --threads to a command.
void AddEngineFlags(CLI::App* cmd, engine::EngineOptions* options, bool* no_qat);

// $XDG_CACHE_HOME/flashserve/packed, else ~/.cache/flashserve/packed ("" where neither is set:
// the weights are then repacked in memory).
std::string DefaultPackedWeightsDir();

// Loads the model; on error prints it and returns null.
// Loads a checkpoint; a V4.1 model with Engram layers also gets its token classes from
// `tokenizer_path` (default: the checkpoint's tokenizer.json, else the installed one).
// options: head_in_huge_pages (--no-huge-page-head), preload_weights (--no-preload-weights),
// fp4_lane_pairs, packed_weights_file and packed_weights_dir (AddEngineFlags).
std::unique_ptr<engine::Model> LoadModelOrPrint(const std::string& dir, const engine::EngineOptions& options,
                                                const std::string& tokenizer_path = "");

// Engram hashes token classes of the tokenizer that ships with a generated checkpoint: sets the
// config's class count from that tokenizer (*tokenizer_path: the default one when empty).
base::Status FitEngramToTokenizer(model::ModelConfig* config, std::string* tokenizer_path);

// "agent=3d,chat=7d" (units s, m, h, d; none = seconds) -> TTL classes.
base::Result<std::vector<kvstore::TtlClass>> ParseTtlClasses(const std::string& spec);

// The DeepSeek tokenizer installed by scripts/setup.sh (relative to a checkout or an install
// prefix); "" when missing.
inline constexpr char kTokenizerRel[] = "third_party/tokenizer/deepseek_v3/tokenizer.json";
std::string FindDefaultTokenizer();
// Loads a tokenizer.json; V4 control tokens it lacks are defined on placeholder ids (expected
// for demo models, logged as a warning otherwise).
base::Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const std::string& path, bool demo);

// --api-key specs plus the lines of an --api-keys-file ("" = none; blank lines and # comments
// skipped), parsed; *first_secret (when given) gets the first key itself.
base::Result<std::vector<meter::ApiKey>> ReadApiKeys(const std::vector<std::string>& flags, const std::string& file,
                                                     std::string* first_secret = nullptr);

// Unix seconds -> "2026-12-06 22:47" (UTC).
std::string UtcMinute(int64_t unix_seconds);

// Prints "error: <message>" to stderr and returns 1.
int PrintError(const base::Error& error);

// The structured-output grammar cache of a tokenizer's vocabulary, ending at the model's EOS.
std::shared_ptr<grammar::GrammarCache> GrammarCacheFor(const tokenizer::Tokenizer& tok, const engine::Model& model,
                                                       size_t max_bytes);

// The checkpoint's image preprocessing (its vision_* config) as the vision room takes it; the
// span layout follows the family (V4.1, else Vision-Exp).
vision::VisionParams VisionParamsOf(const model::ModelConfig& config);

}  // namespace flashserve::app
