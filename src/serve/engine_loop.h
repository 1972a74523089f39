// The engine loop (design.md section 3): a Service whose requests run one engine step at a
// time, each step Plan (sched) -> Restore (prefix cache) -> Forward (engine) -> Sample (sampler,
// the whole batch in one call) -> Commit, with continuous batching, n choices forked from one
// prefill, fetch-or-recompute from outer cache tiers, stop/length handling and cancellation
// within one step. Submit/Cancel/Stats/Info/KV/Export are thread-safe (they touch only the
// intake queue, the stats under its lock, or the thread-safe store); the rest runs on the
// engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "kvstore/kv_store.h"
#include "sched/scheduler.h"
#include "serve/image_encoder.h"
#include "serve/live_sequence.h"
#include "serve/loop_stats.h"
#include "serve/mask_worker.h"
#include "serve/prefix_store.h"
#include "serve/service.h"
#include "serve/step_profile.h"
#include "serve/verify_budget.h"

namespace flashserve::serve {

// Speculative decoding: greedy drafts from the checkpoint's MTP block, verified in the next
// forward (all of a step's drafts in one batch) and rolled back to the accepted prefix; the
// emitted tokens are those of plain decoding, bit for bit, sampled or greedy.
struct SpeculativeConfig {
  bool drafter = false;      // draft with the checkpoint's drafter (its MTP block or DSpark stages)
  int num_draft_tokens = 1;  // K: rows verified per sequence and step = K + 1
  // Adaptive verify budget (DSpark's hardware-aware prefix scheduler): each step keeps the drafts
  // that maximise expected tokens x steps/s(rows), by their confidences (the MTP head's
  // probability of each draft, DSpark's confidence head; for external drafts the measured acceptance by position) and a
  // step-time profile measured when the loop is made, the drafting call's time counted against
  // them, none where the step would gain less than 5%; drafts made only as deep as the budget may keep (DraftSchedule). Off: every eligible
  // sequence verifies K.
  bool adaptive = false;
  std::shared_ptr<const StepProfile> profile;  // adaptive: this step-time profile instead of measuring one
  // Drafts from outside the model instead (tests and benchmarks: an oracle replaying a recorded
  // continuation): given a choice's tokens so far (prompt and output) and K, up to K drafts.
  std::function<std::vector<int32_t>(std::span<const int32_t> tokens, int k)> external;
};

struct LoopConfig {
  std::string model_name = "deepseek-v4";
  sched::SchedConfig sched;
  int64_t prefix_cache_bytes = int64_t{1} << 30;  // L1 budget when the loop builds its own store; 0 disables
  int max_choices = 16;                           // largest n
  int64_t max_context = 0;                        // 0 = the model's max_position_embeddings
  int64_t encoder_cache_bytes = int64_t{256} << 20;  // tower outputs kept by picture, decoded, in memory
  int64_t encode_batch_pixels = 1354752;  // pixels one tower run takes from queued requests (two 384-token pictures)
  std::string image_ttl_class;  // TTL class of tower outputs in the KV store ("" = the store's default)
  SpeculativeConfig speculative;  // drafter needs a checkpoint with an MTP block or DSpark stages
  base::Status Validate() const;
};

class EngineLoop final : public Service {
 public:
  // With an in-memory prefix cache of config.prefix_cache_bytes (none when 0).
  EngineLoop(const engine::Model& model, const engine::EngineOptions& engine_options, const LoopConfig& config);
  // With a tiered store opened by the caller for ModelFingerprint(model, options); the loop
  // owns it and closes it (flushing writes) on Stop.
  EngineLoop(const engine::Model& model, const engine::EngineOptions& engine_options, const LoopConfig& config,
             std::unique_ptr<kvstore::KvStore> store);
  ~EngineLoop() override;

  // Structured outputs: the compiled-grammar cache of the tokenizer's vocabulary, shared with
  // the API (which validates constraints first). Before Start(); without it a constrained
  // request ends with an error.
  void SetGrammars(std::shared_ptr<grammar::GrammarCache> grammars) { grammars_ = std::move(grammars); }

  void Start();
  void Stop();  // finishes nothing: pending requests get a kCancelled event

  base::Status Submit(protocol::GenerateRequest request, EventSink sink) override;
  void Cancel(const std::string& request_id) override;
  ServiceStats Stats() const override;
  ModelInfo Info() const override;
  bool HasKvEvents() const override { return store_ != nullptr; }
  protocol::KvEventPage KvEvents(uint64_t after, size_t max) const override;
  protocol::KvSnapshot KvSnapshot() const override;
  std::vector<CacheObject> ExportPrefix(const std::string& cache_namespace, std::span<const int32_t> prompt,
                                        int64_t from_block, int64_t upto_tokens) const override;
  void ImportObject(const CacheObject& object) override;
  base::SharedBytes ExportImage(const protocol::KvHash& key) const override;
  void EncodeImages(std::vector<protocol::ImageInput> images, EncodeDone done) override;

  // Runs one engine step on the calling thread (tests drive the loop without the thread).
  // Returns false when the engine did not run (nothing to do, or only failed restores).
  bool StepOnce();

 private:
  using RequestPtr = std::shared_ptr<LoopRequest>;
  // Commands from other threads to the engine thread.
  struct SubmitCommand {
    RequestPtr request;
  };
  struct CancelCommand {
    std::string id;
  };
  struct FetchedCommand {  // an outer-tier fetch for `request` completed
    RequestPtr request;
    std::vector<kvstore::ObjectKey> pinned;  // the objects now pinned in L1
  };
  struct EncodedCommand {  // the encode stage finished `request`'s pictures
    RequestPtr request;
    base::Result<std::vector<EncodedPicture>> pictures;
  };
  using Command = std::variant<SubmitCommand, CancelCommand, FetchedCommand, EncodedCommand>;

  // Intake (engine_loop.cc).
  base::Status ValidateRequest(const protocol::GenerateRequest& r) const;
  base::Status ValidateImages(const protocol::GenerateRequest& r) const;
  void Run();
  void Post(Command command);
  void DrainCommands(bool block);
  void Apply(SubmitCommand& c);
  void Apply(CancelCommand& c);
  void Apply(FetchedCommand& c);
  void Apply(EncodedCommand& c);
  // Admission and the end of requests (admission.cc).
  void SubmitPictures(const RequestPtr& request);
  bool StartFetch(const RequestPtr& request);
  void Enqueue(const RequestPtr& request);
  LiveSequence* NewChoice(LoopRequest& r, int index);
  void ReleasePins(LoopRequest& request);
  void MarkStarted(LoopRequest& request);
  // One step (step.cc).
  bool RestoreItem(const sched::StepItem& item);
  bool RunPlan(const sched::StepPlan& plan);  // whether the engine ran
  struct Verify {  // a decode item turned into a speculative verify call
    std::vector<int32_t> tokens;  // the item's token, then the drafts (empty: no drafts)
    std::vector<float> confidence;  // the drafter's, of each draft (empty: none given)
    engine::UndoLog undo;
  };
  struct ItemImages {  // what one step item's forward request points at
    std::vector<int32_t> offsets;
    std::vector<engine::TokenRange> spans;
  };
  void AttachImageRows(const EncodedImages& images, const sched::StepItem& item, ItemImages* out,
                       engine::ForwardRequest* request) const;
  void CommitAndSample(std::span<const sched::StepItem> items, const engine::ForwardResult& result,
                       std::span<Verify> verify);
  // Speculative decoding (speculation.cc): drafts for the step's decode items that may
  // speculate, made into verify calls; then each one's rows sampled in order, the tokens that
  // match committed, and the state rolled back to them.
  bool DrafterStates() const { return config_.speculative.drafter && model_.config().num_drafter_layers() > 0; }
  bool Speculates() const { return config_.speculative.external || DrafterStates(); }
  int DraftBudget(const LiveSequence& s, const sched::StepItem& item) const;
  void Draft(std::span<const sched::StepItem> items, std::span<engine::ForwardRequest> batch, std::span<Verify> verify);
  void ChooseBudget(std::span<const sched::StepItem> items, const std::vector<std::vector<float>>& confidence,
                    double draft_seconds, std::vector<std::vector<int32_t>>* drafts) const;
  void LearnAcceptance(int drafted, int accepted);
  static constexpr double kLeastVerifyGain = 0.05;  // see ChooseBudget
  void TrimToGrammar(LiveSequence& s, std::vector<int32_t>* drafts) const;
  base::Result<std::vector<std::vector<int32_t>>> ExternalDrafts(std::span<const sched::StepItem> items,
                                                                 std::span<const engine::DraftRequest> drafts,
                                                                 std::span<const size_t> owner) const;
  void AcceptDrafts(LiveSequence& s, const sched::StepItem& item, const engine::ForwardResult& result, size_t index,
                    Verify& verify);
  void ForkChoices(LiveSequence& parent, std::vector<LiveSequence*>* group);
  void PersistState(LiveSequence& s);  // into the prefix cache at the state's position
  void CommitToken(LiveSequence& s, const sched::StepItem& item, sampler::SampleResult sample);
  std::span<const uint32_t> SamplingMask(LiveSequence& s, int64_t vocab);
  void StartMasks(std::span<const sched::StepItem> items);  // on mask_worker_; Wait() before sampling
  bool AcceptGrammar(LiveSequence& s, int32_t token);       // false: the grammar refused it
  // Ends a choice with its final event (which may carry its last token); the request is
  // retired with its last choice.
  void FinishChoice(LiveSequence& s, protocol::FinishReason reason, const std::string& error,
                    protocol::GenerateEvent event = {});
  // Ends every open choice of a request (cancel, engine error, shutdown).
  void EndRequest(const std::string& id, protocol::FinishReason reason, const std::string& error);
  void Retire(const std::string& id);  // out of requests_, freed after the step
  void CountCachedTokens(LoopRequest& request, int64_t tokens);
  // Rows and engine time of one step, into stats_.
  void CountRows(std::span<const sched::StepItem> items, int64_t draft_rows, double seconds);
  void PublishStats(bool ran_step);

  const engine::Model& model_;
  engine::EngineOptions engine_options_;
  LoopConfig config_;
  engine::Engine engine_;
  std::vector<uint32_t> no_image_mask_;  // every token but the image placeholder (vision models)
  sched::Scheduler sched_;
  std::unique_ptr<kvstore::KvStore> store_;
  std::unique_ptr<PrefixStore> prefix_;
  std::unique_ptr<EncoderCache> encoder_cache_;
  std::unique_ptr<ImageEncoder> image_encoder_;  // stopped first in Stop(): its callbacks Post
  std::string fingerprint_;
  LoopStats loop_stats_;
  std::mt19937_64 seeds_;  // seeds of requests that bring none (engine thread)
  std::map<std::string, RequestPtr> requests_;  // every accepted request not yet done, by id
  std::vector<RequestPtr> retired_;             // done during this step; freed after it
  uint64_t next_seq_id_ = 1;
  std::vector<float> sample_scratch_;
  std::shared_ptr<grammar::GrammarCache> grammars_;
  MaskWorker mask_worker_;  // the step's grammar masks, beside the forward pass
  std::shared_ptr<const StepProfile> step_profile_;  // adaptive verify budget: step time by rows
  std::vector<double> accept_rate_;            // P(draft j accepted | drafts before it were), learned
  ConfidenceCalibration calibration_;          // the drafter's confidences against acceptance
  uint64_t draft_step_ = 0;                    // speculating steps: the drafting schedule's clock

  mutable std::mutex mu_;  // guards inbound_, queued_requests_ and stats_
  std::condition_variable wake_;
  std::vector<Command> inbound_;
  int64_t queued_requests_ = 0;  // accepted, not yet running (the 429 limit)
  ServiceStats stats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashserve::serve
