// AdminRoutes' own thread: usage queries wait in a queue of 64 while the store is slow (one more
// is a 503 with Retry-After, and HTTP threads never wait), each is answered in turn, and at
// destruction the queued ones are dropped unanswered while the query under way completes.
#include "meter/admin_http.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "meter/scratch_store.h"

namespace flashserve::meter {
namespace {

// A SQLite store whose usage queries wait until the gate opens.
class GatedStore {
 public:
  GatedStore() {
    EXPECT_EQ(scratch_.Prepare(StoreBackend::kSqlite), "");
    auto opened = OpenMeterStore(scratch_.location());
    EXPECT_TRUE(opened.ok());
    real_ = std::move(opened).value();
  }
  class Gate : public MeterStore {
   public:
    explicit Gate(GatedStore* owner) : o_(owner) {}
    base::Status AddTenant(const Tenant& t) override { return o_->real_->AddTenant(t); }
    base::Status UpdateTenant(const Tenant& t) override { return o_->real_->UpdateTenant(t); }
    base::Status RemoveTenant(const std::string& n, int64_t now) override { return o_->real_->RemoveTenant(n, now); }
    base::Result<std::optional<Tenant>> GetTenant(const std::string& n) override { return o_->real_->GetTenant(n); }
    base::Result<std::vector<Tenant>> ListTenants() override { return o_->real_->ListTenants(); }
    base::Status AddKey(const KeyRecord& k) override { return o_->real_->AddKey(k); }
    base::Result<std::vector<KeyRecord>> ListKeys(const std::string& t) override { return o_->real_->ListKeys(t); }
    base::Status RevokeKey(const std::string& id, int64_t now) override { return o_->real_->RevokeKey(id, now); }
    base::Result<int64_t> Generation() override { return o_->real_->Generation(); }
    base::Status WriteUsage(const std::vector<UsageRecord>& r) override { return o_->real_->WriteUsage(r); }
    base::Result<std::optional<UsageRecord>> GetUsage(const std::string& id) override { return o_->real_->GetUsage(id); }
    base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery& q) override {
      std::unique_lock lock(o_->mu_);
      ++o_->started_;
      o_->changed_.notify_all();
      o_->changed_.wait(lock, [this] { return o_->open_; });
      lock.unlock();
      return o_->real_->QueryUsage(q);
    }
    base::Result<std::map<std::string, std::map<int64_t, int64_t>>> OutputBySecond(int64_t s) override {
      return o_->real_->OutputBySecond(s);
    }
    base::Result<std::map<std::string, std::map<int64_t, Arrivals>>> ArrivalsBySecond(int64_t s) override {
      return o_->real_->ArrivalsBySecond(s);
    }

   private:
    GatedStore* o_;
  };
  void WaitStarted(int n) {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(10), [&] { return started_ >= n; }));
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  int started() {
    std::lock_guard lock(mu_);
    return started_;
  }
  Gate gate{this};

 private:
  ScratchStore scratch_;
  std::unique_ptr<MeterStore> real_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  int started_ = 0;
};

// An exchange that records its one answer; Post runs the task at once.
class Recorder final : public net::Exchange {
 public:
  explicit Recorder(std::atomic<int>* answered, std::function<void()> on_destroy = {})
      : answered_(answered), on_destroy_(std::move(on_destroy)) {
    request_.method = "GET";
    request_.target = "/admin/usage?group_by=tenant";
    request_.path = "/admin/usage";
    request_.headers = {{"Authorization", "Bearer adm-000000001"}};
  }
  ~Recorder() override {
    if (on_destroy_) on_destroy_();
  }
  const net::HttpRequest& request() const override { return request_; }
  void Respond(net::HttpResponse r) override {
    std::lock_guard lock(mu_);
    status_ = r.status;
    for (const auto& [name, value] : r.headers)
      if (name == "Retry-After" || name == "retry-after") retry_after_ = value;
    answered_->fetch_add(1);
  }
  void StartStream(int, std::string, net::HeaderList) override {}
  void Write(std::string) override {}
  void EndStream() override {}
  bool closed() const override { return false; }
  void Post(std::function<void()> task) override { task(); }
  void PostAfter(double, std::function<void()> task) override { task(); }
  void SetCloseHandler(std::function<void()>) override {}
  double start_seconds() const override { return 0; }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string retry_after() {
    std::lock_guard lock(mu_);
    return retry_after_;
  }

 private:
  net::HttpRequest request_;
  std::atomic<int>* answered_;
  std::function<void()> on_destroy_;
  std::mutex mu_;
  int status_ = 0;
  std::string retry_after_;
};

std::vector<ApiKey> AdminKeys() { return {ParseApiKey("adm-000000001").value()}; }

TEST(AdminRoutesTest, ASlowStoreQueuesSixtyFourQueriesAndRefusesMore) {
  GatedStore store;
  std::atomic<int> answered{0};
  AdminRoutes routes(AdminKeys(), &store.gate);
  std::vector<std::shared_ptr<Recorder>> calls;
  auto call = [&] {
    calls.push_back(std::make_shared<Recorder>(&answered));
    routes.Usage(calls.back());  // returns at once, whatever the store does
  };
  call();
  store.WaitStarted(1);  // the first is under way, holding the admin thread
  for (int i = 0; i < 64; ++i) call();
  EXPECT_EQ(answered.load(), 0);
  call();  // the 66th: one running, 64 waiting
  ASSERT_EQ(answered.load(), 1);
  EXPECT_EQ(calls.back()->status(), 503);
  EXPECT_EQ(calls.back()->retry_after(), "1");
  store.Open();
  for (int i = 0; i < 500 && answered.load() < 66; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(answered.load(), 66);
  for (size_t i = 0; i + 1 < calls.size(); ++i) EXPECT_EQ(calls[i]->status(), 200) << i;
}

TEST(AdminRoutesTest, DestructionDropsTheQueueAndFinishesTheQueryUnderWay) {
  GatedStore store;
  std::atomic<int> answered{0}, released{0};
  auto running = std::make_shared<Recorder>(&answered);
  std::vector<std::weak_ptr<Recorder>> queued;  // held by the queue alone
  std::thread opener;
  {
    AdminRoutes routes(AdminKeys(), &store.gate);
    routes.Usage(running);
    store.WaitStarted(1);
    for (int i = 0; i < 9; ++i) {
      auto call = std::make_shared<Recorder>(&answered, [&released] { released.fetch_add(1); });
      queued.push_back(call);
      routes.Usage(call);
    }
    // The query under way ends only once the destructor has let go of the nine waiting.
    opener = std::thread([&] {
      while (released.load() < 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      store.Open();
    });
  }
  opener.join();
  EXPECT_EQ(store.started(), 1);
  EXPECT_EQ(answered.load(), 1);
  EXPECT_EQ(running->status(), 200);
  for (const auto& q : queued) EXPECT_TRUE(q.expired());  // dropped unanswered
}

}  // namespace
}  // namespace flashserve::meter
