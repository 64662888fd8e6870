// Issue 49: a sample stops when its CPU time is spent or its session is
// cancelled, between ops and inside the long kernels; the strips that make
// gaussian_blur stoppable do not change its bytes.
#include "dataplane/sample/sample_watch.h"

#include <thread>

#include <opencv2/imgproc.hpp>

#include "dataplane/ops/photometric_ops.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

absl::StatusOr<Pipeline> Make(const std::string& text) {
  v1::SessionConfig c;
  c.set_dataset("ds");
  c.set_batch_size(1);
  auto ops = ParsePipelineText(text);
  if (!ops.ok()) return ops.status();
  for (auto& op : *ops) *c.add_pipeline() = op;
  return Pipeline::Create(c);
}

// The endless pipeline of the issue: resize(8192) then gaussian_blur(101)
// over and over, each blur seconds of CPU on 8192 x 8192.
std::string Endless() {
  std::string text = "resize(8192), center_crop(8192)";
  for (int i = 0; i < 50; ++i) text += ", gaussian_blur(101, sigma=100:100)";
  return text;
}

TEST(SampleWatchTest, ABlurInStripsEqualsOneCallOverTheImage) {
  cv::Mat image(1500, 4096, CV_8UC3);  // 512 rows a strip: three strips
  cv::randu(image, 0, 256);
  cv::Mat mine = image.clone();
  GaussianBlur(mine, 31, 7.0);
  // The reference: one sepFilter2D over the whole image, as before the strips.
  cv::Mat kernel(1, 31, CV_32F);
  float total = 0;
  for (int i = 0; i < 31; ++i) {
    const float x = -15.0f + static_cast<float>(i) * (30.0f / 30);
    kernel.at<float>(0, i) = std::exp(-0.5f * (x / 7.0f) * (x / 7.0f));
    total += kernel.at<float>(0, i);
  }
  kernel /= total;
  cv::Mat f, blurred, expected;
  image.convertTo(f, CV_32FC3);
  cv::sepFilter2D(f, blurred, CV_32F, kernel, kernel.t(), cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  blurred.convertTo(expected, CV_8UC3);  // saturating, rounding to nearest even as nearbyint
  EXPECT_EQ(cv::norm(mine, expected, cv::NORM_INF), 0);
}

TEST(SampleWatchTest, ASamplePastItsCpuTimeStopsWithinAStripAsATimerError) {
  auto p = Make(Endless());
  ASSERT_TRUE(p.ok()) << p.status();
  cv::Mat small(32, 32, CV_8UC3, cv::Scalar(10, 20, 30));
  Rng rng = Rng::ForSample(1, 0, 0);
  SampleWatch watch(nullptr, absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  absl::StatusOr<cv::Mat> out = p->Apply(small, rng);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(IsTimerError(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("--max-sample-seconds"), std::string::npos) << out.status();
  // Without the watch the first blur alone takes many seconds here.
  EXPECT_LT(took, absl::Seconds(5)) << "the sample ran on for " << took;
}

TEST(SampleWatchTest, ACancelledSessionStopsARunningSample) {
  auto p = Make(Endless());
  ASSERT_TRUE(p.ok()) << p.status();
  std::atomic<bool> cancelled{false};
  absl::Status status;
  absl::Time stopped;
  std::thread worker([&] {
    SampleWatch watch(&cancelled, absl::InfiniteDuration());
    cv::Mat small(32, 32, CV_8UC3, cv::Scalar(1, 2, 3));
    Rng rng = Rng::ForSample(1, 0, 0);
    status = p->Apply(small, rng).status();
    stopped = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(800));  // well inside the first blur
  const absl::Time cancel = absl::Now();
  cancelled.store(true);
  worker.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_FALSE(IsTimerError(status));
  // Within a strip or two of the blur: 2.26 s once under AddressSanitizer on
  // a busy 2-core machine. Without the watch the sample never ends.
  EXPECT_LT(stopped - cancel, absl::Seconds(4)) << "stopped " << (stopped - cancel) << " after the cancel";
}

TEST(SampleWatchTest, NoWatchAndNestedWatches) {
  EXPECT_TRUE(SampleWatch::Check().ok());
  std::atomic<bool> cancelled{true};
  {
    SampleWatch outer(&cancelled, absl::ZeroDuration());
    EXPECT_EQ(SampleWatch::Check().code(), absl::StatusCode::kCancelled);
    {
      SampleWatch inner(nullptr, absl::InfiniteDuration());
      EXPECT_TRUE(SampleWatch::Check().ok());
    }
    EXPECT_TRUE(SampleWatch::ShouldStop());
  }
  EXPECT_FALSE(SampleWatch::ShouldStop());
  EXPECT_FALSE(IsTimerError(absl::DeadlineExceededError("a plain deadline")));
  EXPECT_TRUE(IsTimerError(TimerError("x")));
}

}  // namespace
}  // namespace stoker
