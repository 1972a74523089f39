// The engine thread (design.md section 3): a Service whose requests run through
// Plan -> Forward -> Sample -> Commit, one step at a time, with continuous batching, the
// prefix cache, n choices forked from one prefill, stop/length handling and cancellation
// within one step. Submit/Cancel/Stats/Info are thread-safe (they only touch the inbound
// queue and atomic counters); everything else runs on the engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "sched/scheduler.h"
#include "kvstore/kv_store.h"
#include "serve/prefix_store.h"
#include "serve/service.h"

namespace flashserve::serve {

struct ServerConfig {
  std::string model_name = "deepseek-v4";
  sched::SchedConfig sched;
  int64_t prefix_cache_bytes = int64_t{1} << 30;  // L1 budget when the server builds its own store; 0 disables
  int max_choices = 16;                           // largest n
  int64_t max_context = 0;                        // 0 = the model's max_position_embeddings
  base::Status Validate() const;
};

class Server final : public Service {
 public:
  // With an in-memory prefix cache of config.prefix_cache_bytes (none when 0).
  Server(const engine::Model& model, const engine::EngineOptions& engine_options, const ServerConfig& config);
  // With a tiered store opened by the caller for ModelFingerprint(model, options.qat); the
  // server owns it and closes it (flushing writes) on Stop.
  Server(const engine::Model& model, const engine::EngineOptions& engine_options, const ServerConfig& config,
         std::unique_ptr<kvstore::KvStore> store);
  ~Server() override;

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

  // Runs one engine step on the calling thread (tests drive the loop without the thread).
  // Returns false when there was nothing to do.
  bool StepOnce();

 private:
  struct Choice;
  struct Request;
  struct Command {
    bool cancel = false;
    bool fetched = false;  // an outer-tier fetch for `request` completed
    std::string id;
    std::shared_ptr<Request> request;
    std::vector<kvstore::ObjectKey> pinned;  // with fetched: the objects now pinned in L1
  };

  base::Status ValidateRequest(const protocol::GenerateRequest& r) const;
  void Loop();
  void DrainInbound(bool block);
  void Admit(std::shared_ptr<Request> request);
  bool StartFetch(const std::shared_ptr<Request>& request);
  void Enqueue(std::shared_ptr<Request> request);
  void ReleasePins(Request& request);
  void CancelNow(const std::string& id, protocol::FinishReason reason, const std::string& error);
  void RunPlan(const sched::StepPlan& plan);
  void AfterForward(const sched::StepItem& item, const float* logits);
  void SampleChoice(Choice& choice, const sched::StepItem& item, const float* logits);
  void ForkChoices(Choice& parent, const sched::StepItem& item, const float* logits);
  void FinishChoice(Choice& choice, protocol::FinishReason reason, std::string error = "");
  int64_t ProbeCache(const sched::Sequence& seq);
  int64_t RestoreCache(sched::Sequence& seq, int64_t tokens);
  void PublishStats(bool ran_step);
  void MarkStarted(Request& request);
  void CountCachedTokens(Request& request, int64_t tokens);

  const engine::Model& model_;
  engine::EngineOptions engine_options_;
  ServerConfig config_;
  engine::Engine engine_;
  sched::Scheduler sched_;
  std::unique_ptr<kvstore::KvStore> store_;
  std::unique_ptr<PrefixStore> prefix_;
  std::string fingerprint_;
  double prefill_seconds_per_token_ = 0;  // moving average over prefill-heavy steps
  double step_prefill_seconds_ = 0;       // prefill share of engine time since the last PublishStats
  double busy_prefill_sum_ = 0, busy_wall_sum_ = 0, busy_last_seconds_ = 0;  // decaying sums
  std::map<std::string, std::shared_ptr<Request>> requests_;  // by request id
  std::map<uint64_t, std::unique_ptr<Choice>> choices_;      // by sequence id
  uint64_t next_seq_id_ = 1;
  std::vector<float> sample_scratch_;

  mutable std::mutex mu_;  // guards inbound_ and stats_
  std::condition_variable wake_;
  std::vector<Command> inbound_;
  int64_t queued_requests_ = 0;  // accepted, not yet running (the 429 limit)
  ServiceStats stats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashserve::serve
