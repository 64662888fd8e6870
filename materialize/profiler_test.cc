// stoker-profile on a small generated dataset, with a real server on
// 127.0.0.1 and a real client: every strategy measured, storage extrapolated
// from the sample agrees with a full materialisation, the recommendation
// changes with the weights, the tool writes JSON and HTML and cleans up.
#include "materialize/profiler.h"

#include <fstream>

#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"
#include "materialize/materializer.h"
#include "nlohmann/json.hpp"
#include "tests/testdata/image_set.h"
#include "tests/testdata/subprocess.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

constexpr char kPipeline[] = "resize(128), center_crop(112), random_horizontal_flip(0.5)";

StoredFormat Format(const char* encoding, const char* compression) {
  absl::StatusOr<StoredFormat> f = ParseStoredFormat(encoding, compression);
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

class ProfilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new testing::TempDir();
    testing::ImageSetOptions o;
    o.classes = 4;
    o.per_class = 6;
    o.min_side = 150;
    o.max_side = 260;
    ASSERT_TRUE(testing::WriteImageFolder(root_->path() / "photos", o).ok());
  }
  static void TearDownTestSuite() { delete root_; }

  static ProfileConfig Config() {
    ProfileConfig c;
    c.data_root = root_->path();
    c.dataset = "photos";
    c.pipeline = *ParsePipelineText(kPipeline);
    c.sample = 12;
    c.formats = {Format("raw", "none"), Format("raw", "lz4"), Format("jpeg:90", "none"), Format("png", "none")};
    c.batch_size = 4;
    c.rounds = 1;
    return c;
  }

  static std::vector<std::string> Leftovers() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(root_->path())) {
      if (e.path().filename() != "photos") out.push_back(e.path().filename().string());
    }
    return out;
  }

  static testing::TempDir* root_;
};

testing::TempDir* ProfilerTest::root_ = nullptr;

const Strategy& Named(const ProfileResult& r, const std::string& name) {
  for (const Strategy& s : r.strategies) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no strategy " << name;
  return r.strategies.front();
}

TEST_F(ProfilerTest, MeasuresEveryStrategyAndTheWeightsChangeThePick) {
  int64_t last_done = 0, total = 0;
  absl::StatusOr<ProfileResult> r = Profile(Config(), [&](const ProfileProgress& p) {
    EXPECT_EQ(p.done, last_done + 1);
    last_done = p.done;
    total = p.total;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->strategies.size(), 1u + 3 * 4);  // source; decoded, resize, resize+crop x 4 formats
  EXPECT_EQ(r->dataset_samples, 24);
  EXPECT_EQ(r->sample, 12);
  EXPECT_EQ(last_done, total);  // 12 materialisations + 13 x 2 online passes
  EXPECT_EQ(total, 12 + 13 * 2);
  for (const Strategy& s : r->strategies) {
    EXPECT_GT(s.images_per_worker_second, 0) << s.name;
    EXPECT_GT(s.storage_bytes, 0) << s.name;
    EXPECT_EQ(s.wire_bytes_per_sample, 112 * 112 * 3) << s.name;  // uint8 crops on the wire, whatever was stored
    EXPECT_EQ(s.offline_seconds > 0, s.materialised) << s.name;
  }
  // Raw 112x112 crops: a 128-byte .npy header, the pixels, tar headers and padding.
  const Strategy& raw = Named(*r, "resize(128), center_crop(112) raw");
  EXPECT_GE(raw.stored_bytes_per_sample, 112 * 112 * 3 + 128);
  EXPECT_LE(raw.stored_bytes_per_sample, 112 * 112 * 3 + 128 + 4096);
  EXPECT_NEAR(raw.storage_bytes, raw.stored_bytes_per_sample * 24, 0.05 * raw.storage_bytes);

  std::vector<Strategy>& s = r->strategies;
  const size_t fastest = Recommend(s, {0, 0, 1});
  const size_t smallest = Recommend(s, {0, 1, 0});
  for (const Strategy& x : s) {
    EXPECT_LE(x.images_per_worker_second, s[fastest].images_per_worker_second);
    EXPECT_GE(x.storage_bytes, s[smallest].storage_bytes);
  }
  EXPECT_NE(s[fastest].name, s[smallest].name);
  // The smallest is a re-encoded JPEG of the final crop; decoding it online
  // costs more than reading raw pixels.
  EXPECT_EQ(s[smallest].name, "resize(128), center_crop(112) jpeg:90");
  EXPECT_EQ(s[Recommend(s, {1, 0, 0})].name, "source");
  EXPECT_TRUE(Leftovers().empty()) << "work directory left behind";
}

TEST_F(ProfilerTest, ExtrapolatedStorageAgreesWithAFullMaterialisation) {
  ProfileConfig c = Config();
  c.formats = {Format("raw", "none"), Format("jpeg:90", "none")};
  c.rounds = 1;
  absl::StatusOr<ProfileResult> r = Profile(c);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* name : {"resize(128) raw", "resize(128) jpeg:90"}) {
    const Strategy& s = Named(*r, name);
    MaterializeConfig m;
    m.data_root = root_->path();
    m.dataset = "photos";
    m.prefix = s.prefix;
    m.format = s.format;
    m.out = root_->path() / "full";
    absl::StatusOr<MaterializeReport> full = Materialize(m);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_NEAR(s.storage_bytes, static_cast<double>(full->stored_bytes), 0.10 * full->stored_bytes) << name;
    fs::remove_all(m.out);
  }
}

TEST_F(ProfilerTest, BadConfigurationsAreRefusedByName) {
  ProfileConfig c = Config();
  c.work_dir = root_->path().parent_path() / "elsewhere";
  absl::StatusOr<ProfileResult> r = Profile(c);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("must lie under --data-root"), std::string::npos) << r.status();

  c = Config();
  c.dataset = "no_such";
  EXPECT_EQ(Profile(c).status().code(), absl::StatusCode::kNotFound);
  c = Config();
  c.formats.clear();
  EXPECT_EQ(Profile(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Config();  // refused before any work: batches need a fixed output size
  c.pipeline = *ParsePipelineText("resize(128), random_horizontal_flip(0.5)");
  r = Profile(c);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--pipeline"), std::string::npos) << r.status();
  EXPECT_TRUE(Leftovers().empty());
}

// stoker-profile with its stderr (logs, progress) in output() too.
absl::StatusOr<std::unique_ptr<testing::Subprocess>> StartProfile(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", STOKER_PROFILE_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::Subprocess::Start(argv);
}

TEST_F(ProfilerTest, TheToolWritesJsonAndHtmlForTheWeightsGiven) {
  testing::TempDir out;
  const fs::path json = out.path() / "profile.json", html = out.path() / "profile.html";
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> p =
      StartProfile({"--data-root=" + root_->path().string(), "--dataset=photos", "--sample=8",
                    "--pipeline=resize(128), center_crop(112), random_horizontal_flip(0.5)", "--formats=raw,jpeg:90",
                    "--compressions=none", "--weights=0,1,0", "--rounds=1", "--batch-size=4", "--progress=log",
                    "--json=" + json.string(), "--html=" + html.string()});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_EQ(*code, 0) << (*p)->output();
  EXPECT_NE((*p)->output().find("recommended: resize(128), center_crop(112) jpeg:90"), std::string::npos)
      << (*p)->output();
  EXPECT_NE((*p)->output().find("profiled "), std::string::npos) << "no progress lines";

  nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(j["recommended"], "resize(128), center_crop(112) jpeg:90");
  EXPECT_EQ(j["strategies"].size(), 7u);  // source; decoded, resize, resize+crop x raw, jpeg:90
  EXPECT_EQ(j["weights"]["storage"], 1.0);
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("resize(128), center_crop(112) jpeg:90"), std::string::npos);
  EXPECT_TRUE(Leftovers().empty());

  absl::StatusOr<std::unique_ptr<testing::Subprocess>> bad =
      StartProfile({"--data-root=" + root_->path().string(), "--dataset=photos", "--weights=1,2"});
  ASSERT_TRUE(bad.ok());
  absl::StatusOr<int> bad_code = (*bad)->Wait(absl::Seconds(30));
  ASSERT_TRUE(bad_code.ok());
  EXPECT_EQ(*bad_code, 2);
  EXPECT_NE((*bad)->output().find("--weights '1,2'"), std::string::npos) << (*bad)->output();
}

}  // namespace
}  // namespace stoker
