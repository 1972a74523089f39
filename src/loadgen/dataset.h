// Workloads: synthetic `random`, `shared-prefix` (few long system prompts shared by many
// requests), `multi-turn` (turns that extend each other), and `trace` (a Mooncake-style trace
// replayed as token-id prompts). Called by runner and app. Immutable after construction; Make
// is const and safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "loadgen/openai_wire.h"
#include "protocol/trace.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::loadgen {

enum class DatasetKind { kRandom, kSharedPrefix, kMultiTurn, kTrace };

// "random", "shared-prefix", "multi-turn", "trace".
std::string_view DatasetKindName(DatasetKind kind);
base::Result<DatasetKind> ParseDatasetKind(std::string_view name);

// Lengths are in tokens when a tokenizer is given, else in words (about one token each for the
// built-in word list).
struct DatasetConfig {
  DatasetKind kind = DatasetKind::kRandom;
  uint64_t seed = 0;
  int64_t num_requests = 100;  // random, shared-prefix; 0 = unlimited (the run needs a duration);
                               // trace: the first n requests (0 = all)
  int64_t input_len = 1024;    // random
  int64_t output_len = 128;    // synthetic kinds: max_tokens of each request
  double range_ratio = 0.0;    // random: input and output lengths uniform in len * [1-r, 1+r]
  int32_t num_prefixes = 4;    // shared-prefix; multi-turn when prefix_len > 0
  int64_t prefix_len = 2048;   // shared-prefix system prompt (multi-turn: 0 = none)
  int64_t suffix_len = 128;    // shared-prefix user message
  int32_t num_conversations = 16;  // multi-turn
  int32_t turns = 4;               // multi-turn
  int64_t turn_len = 128;          // multi-turn: each user message
  // multi-turn: a new synthetic screenshot of this size with every user message (0 = none), as
  // an agent sends one per turn; earlier turns keep theirs, so the history repeats them.
  int32_t turn_image_width = 0, turn_image_height = 0;
  // trace: each hash id is one block of trace_block_tokens token ids, drawn from
  // [kTraceFirstTokenId, trace_vocab) by (seed, id); prompts over max_input_len (> 0) are cut.
  std::string trace_path;          // Create reads it; CreateFromTrace takes the records instead
  int64_t trace_block_tokens = 512;  // 512 in the published Mooncake traces
  int64_t trace_vocab = 32000;
  int64_t max_input_len = 0;       // 0 = no limit
  base::Status Validate() const;
};

inline constexpr int32_t kTraceFirstTokenId = 100;  // below: bytes and specials in common vocabularies

struct Turn {
  std::string user;
  int64_t max_tokens = 0;
  std::vector<int32_t> prompt_ids;  // trace: the whole prompt as token ids (`user` is empty)
  bool ignore_eos = false;          // trace: run to max_tokens whatever the config says
  std::vector<std::string> images;  // pictures (data URLs) after the text of the user message
};

// One unit of work: a single request, or a whole conversation whose turns run in order.
struct Job {
  std::string system;  // empty = no system message
  std::vector<Turn> turns;
  std::string session;  // trace: sent as the x-session-id header (empty = none)
};

class Dataset {
 public:
  // `tok` may be null (word-count lengths); it is not owned and must outlive the dataset.
  // A trace dataset reads config.trace_path.
  static base::Result<std::unique_ptr<Dataset>> Create(const DatasetConfig& config,
                                                       const tokenizer::Tokenizer* tok);
  // A trace dataset from records already read (config.kind must be kTrace; trace_path unused).
  static base::Result<std::unique_ptr<Dataset>> CreateFromTrace(const DatasetConfig& config,
                                                                std::vector<protocol::TraceRequest> trace);

  // Deterministic in (seed, job_idx): the same job every time, distinct prompts across jobs.
  Job Make(int64_t job_idx) const;
  // Jobs in the dataset: num_conversations for multi-turn, the trace's requests (after the
  // num_requests limit) for trace, else num_requests (0 = unlimited).
  int64_t num_jobs() const;
  // trace: seconds from the first request's timestamp to job_idx's (unscaled); else unset.
  std::optional<double> ArrivalS(int64_t job_idx) const;
  // trace: requests whose prompt was cut to max_input_len.
  int64_t num_clipped() const { return num_clipped_; }
  const DatasetConfig& config() const { return config_; }
  // The shared system prompts (shared-prefix, multi-turn with prefix_len > 0).
  const std::vector<std::string>& prefixes() const { return prefixes_; }

  // A text of `length` tokens (or words without a tokenizer) drawn from the word list.
  std::string MakeText(uint64_t stream, uint64_t index, int64_t length) const;
  // trace: the prompt of job_idx: its hash ids' token blocks, then request-unique tokens up to
  // input_length, cut to max_input_len (at least one token).
  std::vector<int32_t> TracePrompt(int64_t job_idx) const;

 private:
  Dataset(const DatasetConfig& config, const tokenizer::Tokenizer* tok);

  struct WordTokens {
    int64_t lead;    // tokens of the word at the start of a text
    int64_t spaced;  // tokens of " word"
  };

  DatasetConfig config_;
  const tokenizer::Tokenizer* tok_;
  std::vector<WordTokens> word_tokens_;  // per entry of the word list (all 1 without a tokenizer)
  int32_t filler_idx_ = -1;              // a word that is one token in both positions
  std::vector<std::string> prefixes_;
  std::vector<protocol::TraceRequest> trace_;
  int64_t num_clipped_ = 0;
};

// The messages of turn `turn_idx`: the system prompt (if any), then each earlier turn's user
// message followed by the reply actually received for it (replies[k]), then this turn's user
// message. Requires replies.size() >= turn_idx.
std::vector<Message> TurnMessages(const Job& job, int32_t turn_idx, std::span<const std::string> replies);

}  // namespace flashserve::loadgen
