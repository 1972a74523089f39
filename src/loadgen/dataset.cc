// Prompt construction for the synthetic and trace datasets (see dataset.h).
#include "loadgen/dataset.h"

#include <algorithm>
#include <iterator>
#include <cmath>

#include "loadgen/picture.h"
#include "loadgen/rng.h"

namespace flashserve::loadgen {

namespace {
// Common English words; with a leading space nearly all are one token in BPE vocabularies.
constexpr std::string_view kWords[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
    "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
    "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more",
    "when", "will", "would", "who", "so", "no", "she", "other", "its", "may", "these", "what", "them",
    "than", "some", "him", "time", "into", "only", "do", "any", "new", "then", "two", "about", "also",
    "first", "could", "our", "like", "over", "such", "years", "after", "most", "made", "between",
    "many", "before", "must", "through", "back", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little", "state", "good",
    "very", "make", "world", "still", "own", "see", "men", "work", "long", "get", "here", "both",
    "under", "never", "same", "another", "know", "while", "last", "might", "us", "great", "old",
    "year", "off", "come", "since", "against", "go", "came", "right", "used", "take", "three",
    "place", "house", "around", "however", "home", "small", "found", "thought", "went", "say", "part",
    "once", "general", "high", "upon", "school", "every", "does", "got", "united", "left", "number",
    "course", "war", "until", "always", "away", "something", "fact", "though", "water", "less",
    "public", "put", "think", "almost", "hand", "enough", "far", "took", "head", "yet", "government",
    "system", "better", "set", "told", "nothing", "night", "end", "why", "called", "did", "eyes",
    "find", "going", "look", "asked", "later", "point", "knew", "city", "next", "program"};

enum Stream : uint64_t {
  kRandomText = 1, kLengths = 2, kPrefix = 3, kSuffix = 4, kTurn = 5, kTraceBlock = 6, kTraceTail = 7
};

int64_t Jitter(Rng& rng, int64_t len, double ratio) {
  int64_t lo = std::max<int64_t>(1, std::llround(static_cast<double>(len) * (1.0 - ratio)));
  int64_t hi = std::max<int64_t>(lo, std::llround(static_cast<double>(len) * (1.0 + ratio)));
  return rng.UniformInt(lo, hi);
}

base::Status Positive(int64_t value, const char* name) {
  if (value >= 1 && value <= (int64_t{1} << 24)) return base::Status::Ok();
  return base::MakeError(base::ErrorCode::kInvalidArgument,
                         std::string(name) + " must be in [1, 16777216], got " + std::to_string(value));
}

base::Status ValidateTrace(const DatasetConfig& c) {
  FS_RETURN_IF_ERROR(Positive(c.trace_block_tokens, "trace-block-tokens"));
  if (c.trace_vocab < 2 * kTraceFirstTokenId || c.trace_vocab > (int64_t{1} << 31) - 1)
    return base::MakeError(base::ErrorCode::kInvalidArgument,
                           "trace-vocab must be in [" + std::to_string(2 * kTraceFirstTokenId) + ", 2^31)");
  if (c.max_input_len < 0) return base::MakeError(base::ErrorCode::kInvalidArgument, "max-input-len must be >= 0");
  return base::Status::Ok();
}

Turn TextTurn(std::string user, int64_t max_tokens) {
  Turn turn;
  turn.user = std::move(user);
  turn.max_tokens = max_tokens;
  return turn;
}

// Prompt length of a trace request: input_length (at least 1), cut to max_input_len when set.
int64_t TracePromptLen(const protocol::TraceRequest& r, int64_t max_input_len) {
  const int64_t len = std::max<int64_t>(1, r.input_tokens);
  return max_input_len > 0 ? std::min(len, max_input_len) : len;
}
}  // namespace

std::string_view DatasetKindName(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kRandom: return "random";
    case DatasetKind::kSharedPrefix: return "shared-prefix";
    case DatasetKind::kMultiTurn: return "multi-turn";
    case DatasetKind::kTrace: return "trace";
  }
  return "?";
}

base::Result<DatasetKind> ParseDatasetKind(std::string_view name) {
  for (DatasetKind k : {DatasetKind::kRandom, DatasetKind::kSharedPrefix, DatasetKind::kMultiTurn, DatasetKind::kTrace})
    if (DatasetKindName(k) == name) return k;
  return base::MakeError(base::ErrorCode::kInvalidArgument,
                         "unknown dataset '" + std::string(name) + "' (random, shared-prefix, multi-turn, trace)");
}

base::Status DatasetConfig::Validate() const {
  FS_RETURN_IF_ERROR(Positive(output_len, "output-len"));
  if (!(range_ratio >= 0.0 && range_ratio < 1.0))
    return base::MakeError(base::ErrorCode::kInvalidArgument, "range-ratio must be in [0, 1)");
  if (num_requests < 0) return base::MakeError(base::ErrorCode::kInvalidArgument, "num-requests must be >= 0");
  switch (kind) {
    case DatasetKind::kRandom:
      return Positive(input_len, "input-len");
    case DatasetKind::kSharedPrefix:
      FS_RETURN_IF_ERROR(Positive(num_prefixes, "num-prefixes"));
      FS_RETURN_IF_ERROR(Positive(prefix_len, "prefix-len"));
      return Positive(suffix_len, "suffix-len");
    case DatasetKind::kMultiTurn:
      FS_RETURN_IF_ERROR(Positive(num_conversations, "num-conversations"));
      FS_RETURN_IF_ERROR(Positive(turns, "turns"));
      FS_RETURN_IF_ERROR(Positive(turn_len, "turn-len"));
      if (turn_image_width < 0 || turn_image_height < 0 || turn_image_width > 8192 || turn_image_height > 8192 ||
          (turn_image_width == 0) != (turn_image_height == 0))
        return base::MakeError(base::ErrorCode::kInvalidArgument, "turn-image must be WxH, 1..8192 each");
      if (prefix_len == 0) return base::Status::Ok();
      FS_RETURN_IF_ERROR(Positive(num_prefixes, "num-prefixes"));
      return Positive(prefix_len, "prefix-len");
    case DatasetKind::kTrace:
      return ValidateTrace(*this);
  }
  return base::Status::Ok();
}

base::Result<std::unique_ptr<Dataset>> Dataset::Create(const DatasetConfig& config,
                                                       const tokenizer::Tokenizer* tok) {
  FS_RETURN_IF_ERROR(config.Validate());
  if (config.kind == DatasetKind::kTrace) {
    if (config.trace_path.empty())
      return base::MakeError(base::ErrorCode::kInvalidArgument, "the trace dataset needs a trace file (--trace)");
    FS_ASSIGN_OR_RETURN(std::vector<protocol::TraceRequest> trace, protocol::ReadTrace(config.trace_path));
    return CreateFromTrace(config, std::move(trace));
  }
  return std::unique_ptr<Dataset>(new Dataset(config, tok));
}

base::Result<std::unique_ptr<Dataset>> Dataset::CreateFromTrace(const DatasetConfig& config,
                                                                std::vector<protocol::TraceRequest> trace) {
  if (config.kind != DatasetKind::kTrace)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "CreateFromTrace needs the trace kind");
  FS_RETURN_IF_ERROR(config.Validate());
  if (trace.empty()) return base::MakeError(base::ErrorCode::kInvalidArgument, "the trace holds no requests");
  if (config.num_requests > 0 && static_cast<int64_t>(trace.size()) > config.num_requests)
    trace.resize(static_cast<size_t>(config.num_requests));
  std::unique_ptr<Dataset> d(new Dataset(config, nullptr));
  for (const protocol::TraceRequest& r : trace)
    if (TracePromptLen(r, 0) > TracePromptLen(r, config.max_input_len)) ++d->num_clipped_;
  d->trace_ = std::move(trace);
  return d;
}

Dataset::Dataset(const DatasetConfig& config, const tokenizer::Tokenizer* tok) : config_(config), tok_(tok) {
  for (std::string_view word : kWords) {
    int64_t lead = tok_ ? static_cast<int64_t>(tok_->EncodePlain(word).size()) : 1;
    std::string with_space(1, ' ');
    with_space += word;
    int64_t spaced = tok_ ? static_cast<int64_t>(tok_->EncodePlain(with_space).size()) : 1;
    word_tokens_.push_back({lead, spaced});
    if (lead == 1 && spaced == 1 && filler_idx_ < 0) filler_idx_ = static_cast<int32_t>(word_tokens_.size()) - 1;
  }
  bool has_prefixes = config_.kind == DatasetKind::kSharedPrefix ||
                      (config_.kind == DatasetKind::kMultiTurn && config_.prefix_len > 0);
  if (!has_prefixes) return;
  for (int32_t p = 0; p < config_.num_prefixes; ++p) prefixes_.push_back(MakeText(kPrefix, p, config_.prefix_len));
}

std::string Dataset::MakeText(uint64_t stream, uint64_t index, int64_t length) const {
  // Whole words while they fit, then a one-token word to land exactly on `length`. Words are
  // separate pre-tokens, so the token count of the text is the sum of the words' counts.
  Rng rng(config_.seed, stream, index);
  std::string text;
  int64_t count = 0;
  auto append = [&](size_t w) {
    if (count > 0) text += ' ';
    text += kWords[w];
    count += count > 0 ? word_tokens_[w].spaced : word_tokens_[w].lead;
  };
  for (;;) {
    size_t w = static_cast<size_t>(rng.UniformInt(0, std::size(kWords) - 1));
    if (count + (count > 0 ? word_tokens_[w].spaced : word_tokens_[w].lead) > length) break;
    append(w);
  }
  while (filler_idx_ >= 0 && count < length) append(static_cast<size_t>(filler_idx_));
  return text;
}

Job Dataset::Make(int64_t job_idx) const {
  const DatasetConfig& c = config_;
  uint64_t idx = static_cast<uint64_t>(job_idx);
  Job job;
  switch (c.kind) {
    case DatasetKind::kRandom: {
      Rng lengths(c.seed, kLengths, idx);
      int64_t input_len = Jitter(lengths, c.input_len, c.range_ratio);
      int64_t output_len = Jitter(lengths, c.output_len, c.range_ratio);
      job.turns.push_back(TextTurn(MakeText(kRandomText, idx, input_len), output_len));
      break;
    }
    case DatasetKind::kSharedPrefix:
      job.system = prefixes_[idx % prefixes_.size()];
      job.turns.push_back(TextTurn(MakeText(kSuffix, idx, c.suffix_len), c.output_len));
      break;
    case DatasetKind::kMultiTurn:
      if (!prefixes_.empty()) job.system = prefixes_[idx % prefixes_.size()];
      for (int32_t t = 0; t < c.turns; ++t) {
        const uint64_t turn_key = (idx << 20) | static_cast<uint64_t>(t);
        job.turns.push_back(TextTurn(MakeText(kTurn, turn_key, c.turn_len), c.output_len));
        if (c.turn_image_width > 0)
          job.turns.back().images.push_back(PngDataUrl(c.turn_image_width, c.turn_image_height, c.seed ^ (turn_key * 0x9E3779B97F4A7C15ull)));
      }
      break;
    case DatasetKind::kTrace: {
      const protocol::TraceRequest& r = trace_.at(idx);
      Turn turn = TextTurn("", std::max<int64_t>(1, r.output_tokens));
      turn.prompt_ids = TracePrompt(job_idx);
      turn.ignore_eos = true;
      job.turns.push_back(std::move(turn));
      job.session = r.session;
      break;
    }
  }
  return job;
}

std::vector<int32_t> Dataset::TracePrompt(int64_t job_idx) const {
  const protocol::TraceRequest& r = trace_.at(static_cast<size_t>(job_idx));
  const size_t len = static_cast<size_t>(TracePromptLen(r, config_.max_input_len));
  const int64_t hi = config_.trace_vocab - 1;
  std::vector<int32_t> ids;
  ids.reserve(len);
  // Block b holds hash_ids[b]'s tokens: equal ids give equal blocks in every request.
  for (size_t b = 0; b < r.hash_ids.size() && ids.size() < len; ++b) {
    Rng rng(config_.seed, kTraceBlock, static_cast<uint64_t>(r.hash_ids[b]));
    for (int64_t t = 0; t < config_.trace_block_tokens && ids.size() < len; ++t)
      ids.push_back(static_cast<int32_t>(rng.UniformInt(kTraceFirstTokenId, hi)));
  }
  Rng tail(config_.seed, kTraceTail, static_cast<uint64_t>(job_idx));
  while (ids.size() < len) ids.push_back(static_cast<int32_t>(tail.UniformInt(kTraceFirstTokenId, hi)));
  return ids;
}

int64_t Dataset::num_jobs() const {
  switch (config_.kind) {
    case DatasetKind::kMultiTurn: return config_.num_conversations;
    case DatasetKind::kTrace: return static_cast<int64_t>(trace_.size());
    default: return config_.num_requests;
  }
}

std::optional<double> Dataset::ArrivalS(int64_t job_idx) const {
  if (config_.kind != DatasetKind::kTrace) return std::nullopt;
  return trace_.at(static_cast<size_t>(job_idx)).arrival_s - trace_.front().arrival_s;
}

std::vector<Message> TurnMessages(const Job& job, int32_t turn_idx, std::span<const std::string> replies) {
  FS_CHECK(turn_idx >= 0 && static_cast<size_t>(turn_idx) < job.turns.size(), "turn %d out of range", turn_idx);
  FS_CHECK(replies.size() >= static_cast<size_t>(turn_idx), "turn %d needs %d replies", turn_idx, turn_idx);
  std::vector<Message> messages;
  if (!job.system.empty()) messages.push_back({"system", job.system, {}});
  for (int32_t t = 0; t < turn_idx; ++t) {
    messages.push_back({"user", job.turns[t].user, job.turns[t].images});
    messages.push_back({"assistant", replies[t], {}});
  }
  messages.push_back({"user", job.turns[turn_idx].user, job.turns[turn_idx].images});
  return messages;
}

}  // namespace flashserve::loadgen
