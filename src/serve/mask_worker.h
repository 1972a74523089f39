// A helper thread that runs one job at a time beside the engine thread: the grammar masks of a
// step are computed while the forward pass runs, so decode steps do not wait for them.
// Start and Wait are called by one thread (the engine thread).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace flashserve::serve {

class MaskWorker {
 public:
  MaskWorker();
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  void Start(std::function<void()> job);  // the previous job must have been waited for
  void Wait();                            // returns once the started job is done (at once if none)

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace flashserve::serve
