// The worker API's metric families (api/metrics.h).
#include "api/metrics.h"

#include "base/clock.h"
#include "net/process_metrics.h"
#include "net/route_table.h"

namespace flashserve::api {

namespace {
const std::vector<double> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}  // namespace

void ApiMetrics::RecordRequest(const std::string& route, int status, double seconds) {
  net::RecordExchange(registry_, "flashserve_", route, status, seconds);
}

void ApiMetrics::RecordTimeToFirstToken(double seconds) {
  registry_.Histo("flashserve_time_to_first_token_seconds", "Request read to first generated token", kTtftBuckets)
      .Observe(seconds);
  double old = recent_ttft_.load(std::memory_order_relaxed);
  while (!recent_ttft_.compare_exchange_weak(old, old > 0 ? 0.8 * old + 0.2 * seconds : seconds)) {
  }
}

void ApiMetrics::RecordInterTokenLatency(double seconds) {
  registry_.Histo("flashserve_inter_token_latency_seconds", "Gap between consecutive tokens of a choice", kItlBuckets)
      .Observe(seconds);
}

void ApiMetrics::RecordImageFetch(const std::string& outcome, int64_t bytes, double seconds) {
  registry_.Counter("flashserve_image_fetches_total", "Remote image URLs fetched, by outcome", {{"outcome", outcome}}).Add();
  registry_.Counter("flashserve_image_fetch_bytes_total", "Bytes of remote images fetched").Add(static_cast<double>(bytes));
  registry_.Counter("flashserve_image_fetch_seconds_total", "Time spent fetching remote images").Add(seconds);
}

void ApiMetrics::SetGrammarStats(const grammar::GrammarCache::Stats& s) {
  registry_.Counter("flashserve_grammar_compiles_total", "Structured-output constraints compiled (cache misses)")
      .Set(static_cast<double>(s.misses));
  registry_.Counter("flashserve_grammar_cache_hits_total", "Constraints served by an already compiled grammar")
      .Set(static_cast<double>(s.hits));
  registry_.Counter("flashserve_grammar_refused_total", "Constraints that did not compile (400s)").Set(static_cast<double>(s.errors));
  registry_.Counter("flashserve_grammar_compile_seconds_total", "Time spent compiling constraints").Set(s.compile_seconds);
  registry_.Gauge("flashserve_grammar_cache_entries", "Compiled grammars kept").Set(static_cast<double>(s.entries));
  registry_.Gauge("flashserve_grammar_cache_bytes", "Memory of the compiled grammars kept (automata and token classes)")
      .Set(static_cast<double>(s.bytes));
}

void ApiMetrics::SetProcessStats() { net::ExportProcessMetrics(registry_); }

void ApiMetrics::ConfigureEconomics(const meter::EconomicsConfig& config) {
  economics_ = std::make_unique<meter::LiveEconomics>(config);
}

void ApiMetrics::SetServiceStats(const serve::ServiceStats& s) {
  auto gauge = [this](const char* name, const char* help, int64_t v) {
    registry_.Gauge(name, help).Set(static_cast<double>(v));
  };
  auto counter = [this](const char* name, const char* help, int64_t v) {
    registry_.Counter(name, help).Set(static_cast<double>(v));
  };
  gauge("flashserve_running_sequences", "Sequences in the running batch", s.running);
  gauge("flashserve_waiting_sequences", "Admitted requests waiting to run", s.waiting);
  gauge("flashserve_state_pool_bytes", "Sequence-state memory in use", s.state_pool_bytes);
  gauge("flashserve_state_pool_capacity_bytes", "Sequence-state memory budget", s.state_pool_capacity);
  gauge("flashserve_prefix_cache_bytes", "Bytes held by the prefix cache", s.prefix_cache_bytes);
  counter("flashserve_prompt_tokens_total", "Prompt tokens of finished requests", s.prompt_tokens_total);
  counter("flashserve_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache",
          s.cached_prompt_tokens_total);
  counter("flashserve_generated_tokens_total", "Generated tokens", s.generated_tokens_total);
  counter("flashserve_preemptions_total", "Sequences preempted for memory", s.preemptions_total);
  counter("flashserve_engine_steps_total", "Engine steps run", s.steps_total);
  counter("flashserve_engine_step_rows_total", "Rows fed to the engine by its steps (verified drafts included)",
          s.step_rows_total);
  gauge("flashserve_engine_step_rows_max", "The most rows one engine step has fed it (at most --max-step-tokens)",
        s.step_rows_max);
  counter("flashserve_requests_finished_total", "Requests the engine finished", s.requests_finished_total);
  counter("flashserve_requests_rejected_total", "Requests refused because the queue was full",
          s.requests_rejected_total);
  counter("flashserve_encoder_cache_hits_total", "Pictures whose vision-tower output came from the encoder cache",
          s.encoder_cache_hits);
  counter("flashserve_encoder_store_hits_total", "Encoder-cache hits read from the KV store (not memory)",
          s.encoder_store_hits);
  counter("flashserve_encoder_imported_total", "Vision-tower outputs received from other workers", s.encoder_imported);
  counter("flashserve_encoder_cache_misses_total", "Pictures run through the vision tower", s.encoder_cache_misses);
  counter("flashserve_encode_batches_total", "Vision tower runs (pictures batched across requests)", s.encode_batches);
  counter("flashserve_prompt_tokens_while_encoding_total",
          "Prompt tokens computed while their request's pictures were still encoding", s.prompt_tokens_while_encoding);
  gauge("flashserve_encoder_cache_bytes", "Bytes of vision-tower outputs held in memory", s.encoder_cache_bytes);
  registry_.Counter("flashserve_encode_seconds_total", "Seconds spent in the vision tower").Set(s.encode_seconds_total);
  registry_.Counter("flashserve_engine_busy_seconds_total", "Wall time the engine spent running steps")
      .Set(s.engine_busy_seconds_total);
  counter("flashserve_speculative_draft_tokens_total", "Draft tokens verified (speculative decoding)",
          s.speculative_drafted);
  counter("flashserve_speculative_accepted_tokens_total", "Draft tokens accepted", s.speculative_accepted);
  for (size_t k = 0; k < s.speculative_drafted_at.size(); ++k)
    registry_.Counter("flashserve_speculative_draft_tokens_by_position_total", "Draft tokens verified, by draft position (1 = first)",
                      {{"position", std::to_string(k + 1)}})
        .Set(static_cast<double>(s.speculative_drafted_at[k]));
  for (size_t k = 0; k < s.speculative_accepted_at.size(); ++k)
    registry_.Counter("flashserve_speculative_accepted_by_position_total", "Draft tokens accepted, by draft position (1 = first)",
                      {{"position", std::to_string(k + 1)}})
        .Set(static_cast<double>(s.speculative_accepted_at[k]));
  SetKvTierStats(s);
  const double now = base::MonotonicSeconds();
  const meter::EconomicsSample sample{now, static_cast<double>(s.generated_tokens_total), s.engine_busy_seconds_total,
                                      now - started_s_};
  meter::ExportEconomics(registry_, "flashserve_", economics_->config(), economics_->Observe(sample));
}

void ApiMetrics::SetKvTierStats(const serve::ServiceStats& s) {
  static const char* kTiers[3] = {"memory", "disk", "shared"};
  for (int t = 0; t < 3; ++t) {
    const serve::KvTierStats& k = s.kv_tiers[t];
    const net::Labels tier = {{"tier", kTiers[t]}};
    auto gauge = [&](const char* name, const char* help, double v) { registry_.Gauge(name, help, tier).Set(v); };
    auto counter = [&](const char* name, const char* help, double v) { registry_.Counter(name, help, tier).Set(v); };
    gauge("flashserve_kv_objects", "KV-store objects held", k.objects);
    gauge("flashserve_kv_bytes", "KV-store bytes held", k.bytes);
    gauge("flashserve_kv_capacity_bytes", "KV-store byte budget", k.capacity);
    gauge("flashserve_kv_gc_backlog", "Expired objects awaiting deletion", k.gc_backlog);
    gauge("flashserve_kv_writable", "1 when the tier accepts writes", k.writable ? 1 : 0);
    if (t == 0) gauge("flashserve_kv_pinned_objects", "Objects pinned by running or restoring sequences", k.pinned);
    counter("flashserve_kv_hits_total", "KV-store object hits", k.hits);
    counter("flashserve_kv_misses_total", "KV-store object misses", k.misses);
    counter("flashserve_kv_read_bytes_total", "KV-store bytes read", k.bytes_read);
    counter("flashserve_kv_written_bytes_total", "KV-store bytes written", k.bytes_written);
    counter("flashserve_kv_evictions_total", "KV-store capacity evictions", k.evictions);
    counter("flashserve_kv_expirations_total", "KV-store objects expired by TTL", k.expirations);
    counter("flashserve_kv_corrupt_total", "Corrupt, truncated or foreign KV-store objects found (deleted)", k.corrupt);
  }
}

}  // namespace flashserve::api
