// The engine loop's records: one LoopRequest per accepted request (its choices, usage, pinned
// cache objects) and one LiveSequence per choice, which is also the scheduler's view of it
// (sched::Sequence), so a sequence has exactly one record. Engine thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/state.h"
#include "grammar/matcher.h"
#include "kvstore/kv_store.h"
#include "protocol/generate.h"
#include "sampler/sampler.h"
#include "sched/scheduler.h"
#include "serve/image_encoder.h"
#include "serve/service.h"
#include "serve/verify_budget.h"

namespace flashserve::serve {

struct LoopRequest;

// One choice of a request: its tokens and scheduling (the base), its engine state and sampling.
struct LiveSequence : sched::Sequence {
  int index = 0;                 // the choice number
  LoopRequest* request = nullptr;
  std::unique_ptr<engine::SequenceState> state;
  sampler::TokenHistory history;
  protocol::SamplingParams params;
  int64_t generated = 0;
  bool in_reasoning = false;     // a reasoning budget applies and </think> has not come yet
  std::vector<uint32_t> mask;    // reasoning budget: no EOS before </think>, then </think> only
  bool mask_forces_think_end = false;
  // Structured output: the grammar's position (absent when unconstrained), whether it waits for
  // </think> before it applies, and the mask of the next token (computed beside the forward).
  std::optional<grammar::Matcher> matcher;
  bool awaiting_think_end = false;
  std::vector<uint32_t> grammar_mask;
  bool constrained_now() const { return matcher.has_value() && !awaiting_think_end; }
  bool finished = false;         // out of the scheduler; its request may still run other choices
  DraftSchedule draft_schedule;  // adaptive verify budget: how deep to draft (verify_budget.h)
};

struct LoopRequest {
  protocol::GenerateRequest req;
  EventSink sink;
  kv::BlockHash cache_seed{};     // the prefix cache's hash seed of req.cache_namespace
  int open_choices = 0;
  int forks_pending = 0;          // choices still to fork from choice 0 after its prefill
  bool cached_counted = false;    // prompt cache hits are counted once per request
  bool started = false;           // left the queue (first step ran, or it ended)
  bool fetching = false;          // waiting for an outer-tier fetch of its prefix
  std::vector<kvstore::ObjectKey> pinned;  // a fetched prefix's objects (its L1 part too) pinned until restored
  std::vector<kvstore::Tier> block_tiers;  // where each cached prompt block was before a fetch
  protocol::Usage usage;
  EncodedImages images;           // the prompt's pictures: extents at admission, rows and embeddings once encoded
  bool pictures_pending = false;  // the encode stage has not answered: prefill stops at the first picture
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // req.constraint compiled (null: none)
  std::vector<std::unique_ptr<LiveSequence>> choices;  // in the order they were created
};

// The last event of choice `choice`: `event` (it may carry the choice's last token) with the
// reason, and request_done and the usage when no choice of the request is open any more.
inline protocol::GenerateEvent FinalEvent(const LoopRequest& r, int choice, protocol::FinishReason reason,
                                          const std::string& error, protocol::GenerateEvent event = {}) {
  event.choice = choice;
  event.finish = reason;
  event.error = error;
  event.request_done = r.open_choices == 0;
  if (event.request_done) event.usage = r.usage;
  return event;
}

inline LiveSequence& Live(sched::Sequence* seq) { return static_cast<LiveSequence&>(*seq); }

}  // namespace flashserve::serve
