#include "dataplane/user_ops/python_stage.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sample/sample_watch.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace stoker {
namespace {

// Debian's interpreter and the tests' module (tests/python_transforms).
PythonStageConfig Config(int processes = 2) {
  setenv("PYTHONPATH", STOKER_PYTHON_TRANSFORMS_DIR, 1);
  PythonStageConfig c;
  c.modules = {"stoker_test_transforms"};
  c.processes = processes;
  c.executable = "/usr/bin/python3";
  c.timeout = absl::Milliseconds(1500);
  c.shared_bytes = int64_t{4} << 20;
  return c;
}

v1::PythonTransform Op(const std::string& text) {
  auto ops = ParsePipelineText(text);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return (*ops)[0].python();
}

cv::Mat Image(int h = 6, int w = 5) {
  cv::Mat m(h, w, CV_8UC3);
  for (int i = 0; i < h * w * 3; ++i) m.data[i] = static_cast<uint8_t>(i * 7);
  return m;
}

class PythonStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 here";
  }
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
};

TEST_F(PythonStageTest, RunsTheFunctionOnTheSharedImage) {
  auto stage = PythonStage::Start(Config(), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const cv::Mat in = Image();
  for (const char* fn : {"python(stoker_test_transforms:invert)", "python(stoker_test_transforms:invert_in_place)"}) {
    absl::StatusOr<cv::Mat> out = (*stage)->Run(Op(fn), 0, {7, 1, 2}, in, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), in.size());
    for (int i = 0; i < in.rows * in.cols * 3; ++i) ASSERT_EQ(out->data[i], 255 - in.data[i]) << fn << " at " << i;
  }
  absl::StatusOr<cv::Mat> small = (*stage)->Run(Op("python(stoker_test_transforms:shrink, size=2)"), 0, {}, in, 0);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->size(), cv::Size(2, 2));
  EXPECT_EQ(small->at<cv::Vec3b>(1, 1), in.at<cv::Vec3b>(3, 2));
}

TEST_F(PythonStageTest, TheGeneratorFollowsTheSampleAndThePosition) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const v1::PythonTransform noise = Op("python(stoker_test_transforms:noise, amount=50)");
  const cv::Mat in = Image(16, 16);
  auto a = (*stage)->Run(noise, 1, {7, 1, 2}, in, 0);
  auto b = (*stage)->Run(noise, 1, {7, 1, 2}, in, 0);
  auto c = (*stage)->Run(noise, 1, {7, 1, 3}, in, 0);
  auto d = (*stage)->Run(noise, 2, {7, 1, 2}, in, 0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(cv::norm(*a, *b, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(*a, *c, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(*a, *d, cv::NORM_INF), 0);
}

TEST_F(PythonStageTest, ChecksNamesAgainstTheModules) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  EXPECT_TRUE((*stage)->Check("p[0]", Op("python(stoker_test_transforms:invert)")).ok());
  const absl::Status missing = (*stage)->Check("p[0]", Op("python(stoker_test_transforms:nope)"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("has no public function 'nope'"), std::string::npos) << missing;
  // Imported names (`from shutil import rmtree`) and private ones are not the module's functions.
  for (const char* name : {"rmtree", "np", "os", "_private", "__import__", "noise.__globals__"}) {
    const absl::Status s = (*stage)->Check("p[0]", Op(std::string("python(stoker_test_transforms:") + name + ")"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
  }
  v1::PythonTransform nan = Op("python(stoker_test_transforms:noise, amount=nan)");
  EXPECT_NE((*stage)->Check("p[0]", nan).message().find("numbers must be finite"), std::string::npos);
  const absl::Status other = (*stage)->Check("p[0]", Op("python(subprocess:run)"));
  EXPECT_NE(other.message().find("module 'subprocess' is not one of"), std::string::npos) << other;
  EXPECT_FALSE((*stage)->Check("p[0]", Op("python(nocolon)")).ok());
}

TEST_F(PythonStageTest, FaultsFailTheSampleAndLostProcessesAreReplaced) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const cv::Mat in = Image();
  struct Case {
    const char* op;
    const char* reason;
  };
  for (const Case& c : std::vector<Case>{
           {"python(stoker_test_transforms:raises)", "raised ValueError: this sample is not to my liking"},
           {"python(stoker_test_transforms:wrong_dtype)", "returned image has dtype float32; expected uint8"},
           {"python(stoker_test_transforms:not_a_dict)", "returned a ndarray; expected the sample dict"},
           {"python(stoker_test_transforms:crashes)", "crashed its worker process (killed by signal 6"},
           {"python(stoker_test_transforms:sleeps, seconds=30)", "timed out after 1500 ms"},
           {"python(stoker_test_transforms:garbles)", "crashed its worker process (a reply of 2147483647 bytes)"},
           {"python(stoker_test_transforms:forged)", "crashed its worker process (a reply to another request)"},
       }) {
    const pid_t before = (*stage)->Pids()[0];
    absl::StatusOr<cv::Mat> out = (*stage)->Run(Op(c.op), 0, {}, in, 0);
    ASSERT_FALSE(out.ok()) << c.op;
    // A timeout or a crash depends on the server's load: a timer error (the
    // batch fails as retryable), never a bad sample (issue 49).
    const bool timer =
        std::string(c.op).find("crashes") != std::string::npos || std::string(c.op).find("sleeps") != std::string::npos;
    EXPECT_EQ(IsTimerError(out.status()), timer) << out.status();
    if (!timer) EXPECT_EQ(DecodeFailureOf(out.status()), DecodeFailure::kTransform);
    EXPECT_NE(out.status().message().find(c.reason), std::string::npos) << out.status();
    const std::string named = "python(" + Op(c.op).function() + ")";
    EXPECT_NE(out.status().message().find(named), std::string::npos) << out.status();
    // The next call works, on the same process or on its replacement.
    absl::StatusOr<cv::Mat> next = (*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, in, 0);
    ASSERT_TRUE(next.ok()) << next.status();
    const bool replaced = (*stage)->Pids()[0] != before;
    const std::string name = c.op;
    EXPECT_EQ(replaced, name.find("crashes") != std::string::npos || name.find("sleeps") != std::string::npos ||
                            name.find("garbles") != std::string::npos || name.find("forged") != std::string::npos)
        << c.op;
  }
  EXPECT_EQ(metrics_.PythonReplaced("crash").Value(), 1);
  EXPECT_EQ(metrics_.PythonReplaced("timeout").Value(), 1);
  EXPECT_EQ(metrics_.PythonReplaced("protocol").Value(), 2);
}

// Issue 49: a sample whose stream ended stops waiting for its Python worker
// at once (the worker, still in the function, is replaced), instead of
// holding the server's worker until the timeout.
TEST_F(PythonStageTest, ACancelledSampleStopsWaitingAndTheProcessIsReplaced) {
  PythonStageConfig config = Config(1);
  config.timeout = absl::Seconds(60);
  auto stage = PythonStage::Start(config, &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const pid_t before = (*stage)->Pids()[0];
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(500));
    cancelled.store(true);
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<cv::Mat> out;
  {
    SampleWatch watch(&cancelled, absl::InfiniteDuration());
    out = (*stage)->Run(Op("python(stoker_test_transforms:sleeps, seconds=30)"), 0, {}, Image(), 0);
  }
  canceller.join();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  absl::StatusOr<cv::Mat> next = (*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, Image(), 0);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE((*stage)->Pids()[0], before);
  EXPECT_EQ(metrics_.PythonReplaced("stopped").Value(), 1);
}

TEST_F(PythonStageTest, AProcessThatDiedWhileIdleIsReplacedWithoutFailingASample) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const pid_t before = (*stage)->Pids()[0];
  ASSERT_EQ(kill(before, SIGKILL), 0);
  absl::SleepFor(absl::Milliseconds(200));
  absl::StatusOr<cv::Mat> out = (*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, Image(), 0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE((*stage)->Pids()[0], before);
  EXPECT_EQ(metrics_.PythonReplaced("crash").Value(), 1);
}

TEST_F(PythonStageTest, WorkersIgnoreSignalsToTheServersGroupAndLeaveWithIt) {
  PythonStageConfig c = Config(1);
  auto stage = PythonStage::Start(c, &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const pid_t pid = (*stage)->Pids()[0];
  EXPECT_NE(getpgid(pid), getpgid(0));  // its own group: Ctrl-C to the server's group passes it by
  ASSERT_EQ(kill(pid, SIGTERM), 0);     // and a supervisor's SIGTERM leaves it to finish its sample
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE((*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, Image(), 0).ok());
  EXPECT_EQ((*stage)->Pids()[0], pid);
  stage->reset();  // the stage ends its processes
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST_F(PythonStageTest, ValueFieldsAreArraysTheFunctionMayReplace) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  std::string caption = "a photo of a cat", label(4, '\0');
  label[0] = 3;  // int32 little-endian
  UserOpIo io;
  io.max_field_bytes = 1 << 20;
  io.fields = {{"caption", v1::TEXT, &caption}, {"label", v1::CLASS, &label}};
  absl::StatusOr<cv::Mat> out =
      (*stage)->Run(Op("python(stoker_test_transforms:caption_upper)"), 0, {}, Image(), 0, &io);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(caption, "A PHOTO OF A CAT");
  EXPECT_EQ(label, std::string("\x67\0\0\0", 4));  // 103
  // A function that leaves them alone leaves their bytes.
  ASSERT_TRUE((*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, Image(), 0, &io).ok());
  EXPECT_EQ(caption, "A PHOTO OF A CAT");
  // Wrong values fail the sample and change nothing.
  for (const auto& [fn, reason] : std::vector<std::pair<std::string, std::string>>{
           {"bad_caption", "not UTF-8"},
           {"label_as_float", "returned field 'label' of dtype float64 and shape (1,); expected a 1-D array of int32"},
       }) {
    out = (*stage)->Run(Op("python(stoker_test_transforms:" + fn + ")"), 0, {}, Image(), 0, &io);
    ASSERT_FALSE(out.ok()) << fn;
    EXPECT_NE(out.status().message().find(reason), std::string::npos) << out.status();
    EXPECT_EQ(caption, "A PHOTO OF A CAT");
    EXPECT_EQ(label, std::string("\x67\0\0\0", 4));
  }
  io.max_field_bytes = 4;  // the session's max_field_bytes holds for a changed value
  out = (*stage)->Run(Op("python(stoker_test_transforms:caption_upper)"), 0, {}, Image(), 0, &io);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(DecodeFailureOf(out.status()), DecodeFailure::kTooLarge) << out.status();
}

TEST_F(PythonStageTest, ImagesOverTheLimitsAreRefused) {
  auto stage = PythonStage::Start(Config(1), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const cv::Mat big = Image(1200, 1200);  // 4.3 MB: over the 4 MiB region
  absl::StatusOr<cv::Mat> out = (*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, big, 0);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("--python-transform-max-bytes"), std::string::npos) << out.status();
  out = (*stage)->Run(Op("python(stoker_test_transforms:invert)"), 0, {}, Image(), 20);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("over --max-pixels (20)"), std::string::npos) << out.status();
}

TEST_F(PythonStageTest, ManyThreadsShareTheProcesses) {
  auto stage = PythonStage::Start(Config(2), &metrics_);
  ASSERT_TRUE(stage.ok()) << stage.status();
  const cv::Mat in = Image();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto out = (*stage)->Run(Op("python(stoker_test_transforms:noise)"), 0, {1, 0, t * 100 + i}, in, 0);
        if (out.ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

TEST_F(PythonStageTest, AModuleThatDoesNotImportStopsTheStart) {
  PythonStageConfig c = Config(1);
  c.modules = {"stoker_test_transforms", "no_such_module_anywhere"};
  auto stage = PythonStage::Start(c, &metrics_);
  ASSERT_FALSE(stage.ok());
  EXPECT_EQ(stage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stage.status().message().find("cannot import no_such_module_anywhere: ModuleNotFoundError"),
            std::string::npos)
      << stage.status();
  c.modules = {"stoker_test_transforms"};
  c.executable = "/nonexistent/python";
  stage = PythonStage::Start(c, &metrics_);
  ASSERT_FALSE(stage.ok());
  EXPECT_NE(stage.status().message().find("/nonexistent/python does not start"), std::string::npos) << stage.status();
}

}  // namespace
}  // namespace stoker
