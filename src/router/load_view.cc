// LoadView (router/load_view.h).
#include "router/load_view.h"

#include "fmt/format.h"

namespace flashserve::router {

void LoadView::AddWorker(int worker) {
  FS_CHECK(worker >= 0, "negative worker id %d", worker);
  if (worker >= num_slots()) slots_.resize(static_cast<size_t>(worker) + 1);
  slots_[worker] = Slot{};
  slots_[worker].present = true;
}

void LoadView::RemoveWorker(int worker) {
  if (present(worker)) slots_[worker] = Slot{};
}

base::Status LoadView::Update(int worker, const WorkerLoad& load) {
  if (!present(worker)) return base::MakeError(base::ErrorCode::kNotFound, fmt::format("no worker {}", worker));
  if (load.queued_prefill_tokens < 0 || load.running_sequences < 0 || load.prefill_tokens_per_s < 0) {
    return base::MakeError(base::ErrorCode::kInvalidArgument, fmt::format("worker {}: negative load", worker));
  }
  slots_[worker].load = load;
  slots_[worker].routed_since_poll = 0;
  return base::Status::Ok();
}

void LoadView::OnImagesRouted(int worker, int64_t images) {
  if (present(worker)) slots_[worker].load.queued_images += images;
}

void LoadView::OnRouted(int worker, int64_t uncached_tokens) {
  if (!present(worker)) return;
  slots_[worker].load.queued_prefill_tokens += uncached_tokens > 0 ? uncached_tokens : 0;
  ++slots_[worker].routed_since_poll;
}

void LoadView::MarkUnhealthy(int worker) {
  if (present(worker)) slots_[worker].load.healthy = false;
}

int LoadView::MarkStale(double now_s, double max_age_s) {
  int marked = 0;
  for (Slot& s : slots_) {
    if (s.present && s.load.healthy && now_s - s.load.updated_at_s > max_age_s) {
      s.load.healthy = false;
      ++marked;
    }
  }
  return marked;
}

int LoadView::num_healthy() const {
  int n = 0;
  for (const Slot& s : slots_) n += (s.present && s.load.healthy) ? 1 : 0;
  return n;
}

}  // namespace flashserve::router
