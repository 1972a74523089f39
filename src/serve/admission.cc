// Admission of requests into the engine loop (serve/engine_loop.h): duplicate ids, seeds, the
// fetch-or-recompute decision for prefixes held in outer cache tiers, the records of choices,
// and the end of a request.
#include <algorithm>
#include <climits>
#include <limits>

#include "base/log.h"
#include "serve/engine_loop.h"

namespace flashserve::serve {

using protocol::FinishReason;

void EngineLoop::Apply(SubmitCommand& c) {
  LoopRequest& r = *c.request;
  if (requests_.count(r.req.id)) {
    MarkStarted(r);
    r.sink(FinalEvent(r, 0, FinishReason::kError, "duplicate request id"));
    return;
  }
  if (!r.req.sampling.has_seed) r.req.sampling.seed = seeds_();
  r.usage.prompt_tokens = static_cast<int64_t>(r.req.prompt.size());
  if (r.req.prefill_cached_tokens >= 0) {  // disaggregated: the prefill worker's count is authoritative
    r.cached_counted = true;
    r.usage.cached_tokens = r.usage.cached_prefill = std::min(r.req.prefill_cached_tokens, r.usage.prompt_tokens);
  }
  if (prefix_) r.cache_seed = prefix_->Seed(r.req.cache_namespace);
  if (r.req.constraint.active()) {
    auto compiled = grammars_ ? grammars_->Get(r.req.constraint)
                              : base::Result<std::shared_ptr<const grammar::CompiledGrammar>>(
                                    base::Error(base::ErrorCode::kFailedPrecondition, "this worker has no grammar engine"));
    if (!compiled.ok()) {
      MarkStarted(r);
      r.sink(FinalEvent(r, 0, FinishReason::kError, "structured output: " + compiled.error().message()));
      return;
    }
    r.grammar = *compiled;
  }
  requests_[r.req.id] = c.request;
  if (!r.req.images.empty()) SubmitPictures(c.request);
  if (!StartFetch(c.request)) Enqueue(c.request);
}

// The pictures go to the encode stage (its own thread); meanwhile the request is admitted with
// its pictures' extents (their keys hash the prefix cache's blocks), and its prefill runs up to
// the first picture. The EncodedCommand brings the embeddings and lifts that limit.
void EngineLoop::SubmitPictures(const RequestPtr& request) {
  LoopRequest& r = *request;
  std::vector<protocol::ImageInput> job = std::move(r.req.images);
  r.req.images.clear();
  for (const protocol::ImageInput& image : job) {  // the spans stay here, the patches go to the encoder
    protocol::ImageInput& span = r.req.images.emplace_back();
    span.start = image.start;
    span.roles = image.roles;
    span.image_rows = image.image_rows;
    span.key = image.key;
    span.vit_h = image.vit_h;
    span.vit_w = image.vit_w;
    r.images.extents.push_back({image.start, static_cast<int64_t>(image.roles.size()), image.key});
  }
  r.images.bidirectional = BidirectionalSpans(model_, r.req.images);
  r.pictures_pending = true;
  image_encoder_->Submit(std::move(job), [this, request](auto pictures) {
    Post(EncodedCommand{request, std::move(pictures)});
  });
}

void EngineLoop::Apply(EncodedCommand& c) {
  LoopRequest& r = *c.request;
  auto it = requests_.find(r.req.id);
  if (it == requests_.end() || it->second != c.request) return;  // cancelled while encoding
  base::Result<EncodedImages> spans =
      c.pictures.ok() ? SpanInputs(model_, static_cast<int64_t>(r.req.prompt.size()), r.req.images, *c.pictures)
                      : base::Result<EncodedImages>(c.pictures.error());
  r.req.images.clear();
  if (!spans.ok()) return EndRequest(r.req.id, FinishReason::kError, "image encoding failed: " + spans.error().message());
  r.images = std::move(spans).value();
  r.pictures_pending = false;
  for (const auto& s : r.choices) s->input_limit = INT64_MAX;
}

// Fetch-or-recompute: when disk or the shared tier hold a longer prefix than memory and
// fetching it is predicted faster than recomputing it, fetch asynchronously and admit the
// request when the objects are in memory (pinned until restored).
bool EngineLoop::StartFetch(const RequestPtr& request) {
  if (!prefix_) return false;
  LoopRequest& r = *request;
  FetchPlan plan = prefix_->PlanFetch(r.cache_seed, r.req.prompt, r.images.extents);
  r.block_tiers = plan.block_tiers;
  const int64_t blocks = plan.any.blocks - plan.memory.blocks;
  if (blocks <= 0 || plan.keys.empty()) return false;
  const double fetch_s = store_->PredictFetchSeconds(plan.any.slowest(), prefix_->EstimateFetchBytes(blocks));
  const double per_token = loop_stats_.prefill_seconds_per_token();
  const double recompute_s = per_token > 0 ? static_cast<double>(blocks * kv::kBlockTokens) * per_token
                                           : std::numeric_limits<double>::infinity();
  if (fetch_s >= recompute_s) return false;
  // The part already in L1 stays there until the restore: inserting the fetched objects must
  // not evict the head of the very prefix they complete.
  for (const kvstore::ObjectKey& key : plan.resident) {
    if (store_->Pin(key)) r.pinned.push_back(key);
  }
  r.fetching = true;
  std::vector<kvstore::ObjectKey> keys = plan.keys;
  store_->Fetch(
      keys,
      [this, request, keys](std::vector<bool> present) {  // on an I/O thread: hand over to the engine thread
        FetchedCommand c{request, {}};
        for (size_t i = 0; i < keys.size(); ++i) {
          if (i < present.size() && present[i]) c.pinned.push_back(keys[i]);
        }
        Post(std::move(c));
      },
      /*pin=*/true);
  return true;
}

LiveSequence* EngineLoop::NewChoice(LoopRequest& r, int index) {
  auto s = std::make_unique<LiveSequence>();
  s->id = next_seq_id_++;
  s->index = index;
  s->request = &r;
  s->images = r.images.extents;
  s->atomic_ranges = r.images.bidirectional;
  s->params = r.req.sampling;
  s->params.seed = r.req.sampling.seed + static_cast<uint64_t>(index);
  s->in_reasoning = r.req.reasoning_budget >= 0 && r.req.think_end_token >= 0;
  if (r.grammar) {
    s->matcher.emplace(r.grammar);
    s->awaiting_think_end = r.req.constrain_after_think && r.req.think_end_token >= 0;
  }
  ++r.open_choices;
  r.choices.push_back(std::move(s));
  return r.choices.back().get();
}

void EngineLoop::Enqueue(const RequestPtr& request) {
  LoopRequest& r = *request;
  LiveSequence* s = NewChoice(r, 0);
  s->tokens = r.req.prompt;
  s->num_prompt = static_cast<int64_t>(s->tokens.size());
  s->cache_seed = r.cache_seed;
  if (r.pictures_pending) s->input_limit = r.images.extents.front().start;
  s->history.SetPrompt(r.req.prompt);
  r.forks_pending = r.req.n - 1;
  sched_.Add(s);
}

void EngineLoop::ReleasePins(LoopRequest& request) {
  for (const kvstore::ObjectKey& key : request.pinned) store_->Unpin(key);
  request.pinned.clear();
}

void EngineLoop::MarkStarted(LoopRequest& request) {
  if (request.started) return;
  request.started = true;
  std::lock_guard<std::mutex> lock(mu_);
  --queued_requests_;
}

void EngineLoop::FinishChoice(LiveSequence& s, FinishReason reason, const std::string& error,
                              protocol::GenerateEvent event) {
  LoopRequest& r = *s.request;
  MarkStarted(r);
  sched_.Remove(&s);
  s.finished = true;
  s.state.reset();
  --r.open_choices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.generated_tokens_total += s.generated;
    if (r.open_choices == 0) {
      ++stats_.requests_finished_total;
      stats_.prompt_tokens_total += r.usage.prompt_tokens;
      stats_.cached_prompt_tokens_total += r.usage.cached_tokens;
    }
  }
  r.sink(FinalEvent(r, s.index, reason, error, std::move(event)));
  if (r.open_choices == 0) Retire(r.req.id);
}

void EngineLoop::EndRequest(const std::string& id, FinishReason reason, const std::string& error) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const RequestPtr r = it->second;
  if (r->choices.empty()) {  // still encoding its pictures or fetching its prefix: nothing runs yet
    MarkStarted(*r);
    r->sink(FinalEvent(*r, 0, reason, error));
    Retire(id);
    return;
  }
  for (const auto& s : r->choices) {
    if (!s->finished) FinishChoice(*s, reason, error);
  }
}

void EngineLoop::Retire(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  if (!it->second->fetching) ReleasePins(*it->second);  // a fetch in flight releases them when it lands
  retired_.push_back(std::move(it->second));
  requests_.erase(it);
}

}  // namespace flashserve::serve
