// The encode stage's batches: requests queued while the tower runs share its next run (up to
// the pixel budget), each picture's rows bit for bit those of a run alone, a picture repeated
// among them encoded once, a request found in the cache answered before the run; a budget of 0
// runs every picture alone; a bad picture fails only its own request.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "engine/test_image_prompt.h"
#include "serve/image_encoder.h"

namespace flashserve::serve {
namespace {

const engine::Model& Model() { return engine::testing::VisionModel(); }

protocol::ImageInput Picture(uint8_t seed, int vit_h, int vit_w) {
  protocol::ImageInput image;
  image.vit_h = vit_h;
  image.vit_w = vit_w;
  image.patches = engine::testing::RandomPatches(Model(), vit_h, vit_w, seed);
  image.key.fill(seed);
  return image;
}

struct Outcome {
  std::vector<EncodedPicture> pictures;
  std::string error;
  int order = -1;  // when it was answered
};

// The first job's answer holds the encode thread until the others are queued; returns the
// answers and the tower runs.
std::pair<std::vector<Outcome>, int64_t> RunJobs(int64_t budget, const std::vector<std::vector<protocol::ImageInput>>& jobs) {
  EncoderCache cache(Model().config().hidden_size, int64_t{64} << 20, nullptr, "");
  std::vector<Outcome> out(jobs.size());
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false, queued = false;
  int answered = 0;
  int64_t batches = 0;
  {
    ImageEncoder encoder(Model(), 2, &cache, budget);
    const auto submit = [&](size_t i) {
      encoder.Submit(jobs[i], [&, i](base::Result<std::vector<EncodedPicture>> r) {
        std::unique_lock<std::mutex> lock(mu);
        if (r.ok()) out[i].pictures = std::move(r).value();
        else out[i].error = r.error().message();
        out[i].order = answered;
        if (i == 0) {
          holding = true;
          cv.notify_all();
          cv.wait(lock, [&] { return queued; });
        }
        ++answered;
        cv.notify_all();
      });
    };
    submit(0);
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return holding; });
    }
    for (size_t i = 1; i < jobs.size(); ++i) submit(i);
    std::unique_lock<std::mutex> lock(mu);
    queued = true;
    cv.notify_all();
    cv.wait(lock, [&] { return answered == static_cast<int>(jobs.size()); });
    batches = encoder.batches();
  }
  return {out, batches};
}

TEST(ImageEncoderBatch, QueuedRequestsShareATowerRun) {
  const std::vector<std::vector<protocol::ImageInput>> jobs = {
      {Picture(1, 7, 11)}, {Picture(2, 14, 23)}, {Picture(3, 5, 3), Picture(4, 9, 9)}, {Picture(2, 14, 23)},
      {Picture(1, 7, 11)}};
  base::ThreadPool pool(2);
  engine::VisionTower tower(Model(), pool);
  const auto [batched, runs] = RunJobs(int64_t{1} << 30, jobs);
  EXPECT_EQ(runs, 2);  // A alone (it held the thread), then B, C and D together
  EXPECT_EQ(batched[4].order, 1);  // A's picture again, from the cache: answered before that run
  EXPECT_TRUE(batched[4].pictures[0].cached);
  for (size_t j = 0; j < jobs.size(); ++j) {
    ASSERT_EQ(batched[j].error, "");
    ASSERT_EQ(batched[j].pictures.size(), jobs[j].size());
    for (size_t i = 0; i < jobs[j].size(); ++i) {
      const protocol::ImageInput& image = jobs[j][i];
      auto alone = tower.Encode(image.patches, image.vit_h, image.vit_w);
      ASSERT_TRUE(alone.ok());
      EXPECT_TRUE(engine::testing::BitEqual(*batched[j].pictures[i].rows, *alone)) << "job " << j << " picture " << i;
    }
  }
  EXPECT_FALSE(batched[1].pictures[0].cached);
  EXPECT_TRUE(batched[3].pictures[0].cached);  // the same picture as B's: encoded once
  EXPECT_EQ(batched[3].pictures[0].rows, batched[1].pictures[0].rows);
  const auto [apart, apart_runs] = RunJobs(0, jobs);
  EXPECT_EQ(apart_runs, 4);  // every picture alone: A, B, C's two; D finds B's rows in the cache
  EXPECT_TRUE(apart[3].pictures[0].cached);
  for (size_t j = 0; j < jobs.size(); ++j) EXPECT_EQ(apart[j].error, "");
}

TEST(ImageEncoderBatch, ABadPictureFailsOnlyItsRequest) {
  protocol::ImageInput bad = Picture(5, 7, 11);
  bad.vit_w = 10;  // its patches no longer fill the grid
  const auto [out, runs] = RunJobs(int64_t{1} << 30, {{Picture(1, 7, 11)}, {Picture(2, 5, 3), bad}, {Picture(3, 5, 3)}});
  EXPECT_EQ(out[0].error, "");
  EXPECT_NE(out[1].error.find("patch values for a 7x10 grid"), std::string::npos) << out[1].error;
  EXPECT_EQ(out[2].error, "");
  ASSERT_EQ(out[2].pictures.size(), 1u);
  EXPECT_NE(out[2].pictures[0].rows, nullptr);
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace flashserve::serve
