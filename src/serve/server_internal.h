// Per-request and per-choice bookkeeping of serve::Server, shared by its translation units
// (server.cc, step.cc). Engine thread only.
#pragma once

#include <memory>
#include <vector>

#include "engine/state.h"
#include "kvstore/kv_store.h"
#include "serve/prefix_store.h"
#include "protocol/generate.h"
#include "sampler/sampler.h"
#include "serve/server.h"

namespace flashserve::serve {

struct Server::Request {
  protocol::GenerateRequest req;
  EventSink sink;
  int open_choices = 0;
  int forks_pending = 0;        // choices still to fork from choice 0 after its prefill
  bool cached_counted = false;  // prompt cache hits are counted once per request
  bool started = false;         // left the queue (first step ran, or it ended)
  std::vector<kvstore::ObjectKey> pinned;   // a fetched prefix's objects (its L1 part too) pinned until restored
  std::vector<kvstore::Tier> block_tiers;   // where each cached prompt block was before a fetch
  protocol::Usage usage;
  std::vector<uint64_t> seq_ids;
};

struct Server::Choice {
  uint64_t seq_id = 0;
  int index = 0;
  std::shared_ptr<Request> request;
  std::unique_ptr<engine::SequenceState> state;
  sampler::TokenHistory history;
  protocol::SamplingParams params;
  int64_t generated = 0;
  PrefixMatch match;
};

}  // namespace flashserve::serve
