// stoker-materialize's core and the server's serving of its output: every
// sample stored exactly once, other tools can check the shards, batches
// served from a materialised dataset equal the online ones, interrupted runs
// (cancelled or SIGKILLed) resume to identical shards, and damaged outputs
// get clear errors while the server keeps serving other datasets.
#include "materialize/materializer.h"

#include <signal.h>
#include <sys/file.h>

#include <fstream>
#include <map>
#include <thread>

#include "absl/synchronization/notification.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sessions/data_service_core.h"
#include "dataplane/sources/tar_shards.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/subprocess.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Served {
  absl::Status status;
  std::string data;
  std::vector<int32_t> labels;
  std::vector<v1::FailedSample> failed;
};

Served Failed(absl::Status status) {
  Served s;
  s.status = std::move(status);
  return s;
}

class MaterializeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ImageSetOptions o;
    o.classes = 3;
    o.per_class = 6;
    o.min_side = 60;
    o.max_side = 140;
    ASSERT_TRUE(testing::WriteImageFolder(root_.path() / "clean", o).ok());
    ASSERT_TRUE(testing::WriteImageFolder(root_.path() / "dirty", o).ok());
    root_.Write("dirty/class_000/zz_bad.jpg", "not an image");  // index 6
  }

  MaterializeConfig Config(const std::string& dataset, const std::string& prefix, const std::string& format,
                           const std::string& compression, const std::string& out) {
    MaterializeConfig c;
    c.data_root = root_.path();
    c.dataset = dataset;
    if (!prefix.empty()) c.prefix = *ParsePipelineText(prefix);  // empty: decoded pixels
    c.format = *ParseStoredFormat(format, compression);
    c.out = root_.path() / out;
    c.workers = 2;
    c.shard_samples = 4;
    c.progress_every = absl::Milliseconds(10);
    return c;
  }

  static v1::SessionConfig Session(const std::string& dataset, const std::string& pipeline, int batch_size) {
    v1::SessionConfig c;
    c.set_dataset(dataset);
    c.set_batch_size(batch_size);
    c.set_seed(7);
    const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(pipeline);
    for (const v1::Op& op : *ops) *c.add_pipeline() = op;
    return c;
  }

  // One batch of `indices` in `epoch`, made by a session on `config`.
  Served Batch(const v1::SessionConfig& config, const std::vector<int64_t>& indices, int64_t epoch = 0) {
    DataServiceCore::SessionOrError session = core_->StartSession(config);
    if (!session.ok()) return Failed(session.status());
    v1::BatchRequest request;
    request.set_epoch(epoch);
    for (int64_t i : indices) request.add_sample_indices(i);
    absl::Notification done;
    Served served;
    absl::Status submitted = (*session)->Submit(request, [&](FinishedBatch batch) {
      served.status = batch.status;
      if (batch.data) served.data = *batch.data;
      served.labels.assign(batch.header.labels().begin(), batch.header.labels().end());
      served.failed.assign(batch.header.failed_samples().begin(), batch.header.failed_samples().end());
      done.Notify();
    });
    if (!submitted.ok()) return Failed(submitted);
    done.WaitForNotification();
    return served;
  }

  std::unique_ptr<DataServiceCore> MakeCore() {
    CoreConfig c;
    c.data_root = root_.path();
    c.workers = 2;
    return std::make_unique<DataServiceCore>(c, &metrics_);
  }

  testing::TempDir root_;
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
  std::unique_ptr<DataServiceCore> core_ = MakeCore();
};

TEST_F(MaterializeTest, EverySampleIsStoredOnceAndOtherToolsCanCheckTheShards) {
  std::vector<MaterializeProgress> reports;
  absl::StatusOr<MaterializeReport> r = Materialize(Config("dirty", "resize(48)", "raw", "zstd", "out"),
                                                    [&](const MaterializeProgress& p) { reports.push_back(p); });
  ASSERT_TRUE(r.ok()) << r.status();
  const Manifest& m = r->manifest;
  EXPECT_EQ(m.source_samples, 19);
  EXPECT_EQ(m.samples, 18);
  ASSERT_EQ(m.failed.size(), 1u);
  EXPECT_EQ(m.failed[0].index, 6);
  EXPECT_EQ(m.failed[0].path, "class_000/zz_bad.jpg");
  EXPECT_NE(m.failed[0].reason.find("not_an_image"), std::string::npos) << m.failed[0].reason;
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"class_000", "class_001", "class_002"}));
  EXPECT_EQ(m.shards.size(), 5u);  // 19 samples, 4 per shard
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().done, 19);
  EXPECT_EQ(reports.back().failed, 1);
  EXPECT_FALSE(fs::exists(root_.path() / "out.partial"));
  // The manifest on disk says the same.
  absl::StatusOr<Manifest> on_disk = ReadManifest(root_.path() / "out");
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->ToJson(), m.ToJson());

  std::map<int64_t, int> copies;
  std::shared_ptr<const SampleSource> source = *DatasetCatalog(root_.path()).Open("dirty");
  for (const Manifest::Shard& s : m.shards) {
    const fs::path path = root_.path() / "out" / s.name;
    EXPECT_EQ(*FileChecksum(path), s.checksum) << s.name;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), s.bytes);
    absl::StatusOr<TarScan> scan = ScanTar(path);
    ASSERT_TRUE(scan.ok());
    EXPECT_EQ(scan->damage, "");
    for (const TarMember& member : scan->members) {
      const int64_t index = std::stoll(member.name.substr(0, member.name.find('.')));
      if (member.name.find(".npy.zst") != std::string::npos) ++copies[index];
      if (member.name.find(".cls") != std::string::npos) {
        std::string cls(member.size, '\0');
        std::ifstream in(path, std::ios::binary);
        in.seekg(member.offset);
        in.read(cls.data(), member.size);
        EXPECT_EQ(cls, std::to_string(source->label(index))) << member.name;
      }
    }
  }
  for (int64_t i = 0; i < 19; ++i) EXPECT_EQ(copies[i], i == 6 ? 0 : 1) << "sample " << i;
}

TEST_F(MaterializeTest, ServedBatchesAreByteIdenticalToOnlineOnesForExactFormats) {
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  struct Case {
    std::string prefix, pipeline;
  };
  const std::vector<Case> cases = {
      {"resize(48), center_crop(40)", "resize(48), center_crop(40), random_horizontal_flip(0.5)"},
      // Crops of the stored 96-pixel images reach twice their output: online
      // they are resized from the pixels, never shrunk while decoding.
      {"resize(96)", "resize(96), random_resized_crop(32), random_horizontal_flip(0.5), color_jitter(0.4, 0.4)"},
      {"", "center_crop(40), random_horizontal_flip(0.5)"},  // decoded pixels
  };
  int n = 0;
  for (const Case& c : cases) {
    for (auto [format, compression] : std::vector<std::pair<std::string, std::string>>{
             {"raw", "none"}, {"raw", "zstd"}, {"raw", "lz4"}, {"png", "none"}}) {
      const std::string out = "m" + std::to_string(n++);
      absl::StatusOr<MaterializeReport> r = Materialize(Config("clean", c.prefix, format, compression, out));
      ASSERT_TRUE(r.ok()) << r.status();
      for (int64_t epoch : {0, 1}) {
        Served online = Batch(Session("clean", c.pipeline, 18), all, epoch);
        Served stored = Batch(Session(out, c.pipeline, 18), all, epoch);
        ASSERT_TRUE(online.status.ok()) << online.status;
        ASSERT_TRUE(stored.status.ok()) << stored.status;
        EXPECT_EQ(online.labels, stored.labels);
        EXPECT_TRUE(online.data == stored.data) << "'" << c.prefix << "' stored as " << format << "+" << compression
                                                << ", epoch " << epoch << ": the bytes differ";
        v1::SessionConfig decoded_cache = Session(out, c.pipeline, 18);  // the diagnostic cache's path too
        decoded_cache.set_cache_mode(v1::CACHE_DECODED);
        Served cached = Batch(decoded_cache, all, epoch);
        ASSERT_TRUE(cached.status.ok()) << cached.status;
        EXPECT_TRUE(online.data == cached.data) << "'" << c.prefix << "' stored as " << format << "+" << compression
                                                << " through CACHE_DECODED: the bytes differ";
      }
    }
  }
}

TEST_F(MaterializeTest, ServedJpegBatchesAreWithinTheStatedTolerance) {
  // Re-encoding at quality 90 (4:2:0 chroma, as libjpeg's default) loses a
  // little: the documented tolerance is a mean absolute difference under 8
  // levels of 255 (docs/materialize.md); these small, grainy synthetic images
  // are a hard case (about 5).
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  const std::string pipeline = "resize(48), center_crop(40), random_horizontal_flip(0.5)";
  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "jpeg:90", "none", "j")).ok());
  Served online = Batch(Session("clean", pipeline, 18), all);
  Served stored = Batch(Session("j", pipeline, 18), all);
  ASSERT_TRUE(stored.status.ok()) << stored.status;
  ASSERT_EQ(online.data.size(), stored.data.size());
  double sum = 0;
  for (size_t i = 0; i < online.data.size(); ++i) {
    sum += std::abs(static_cast<int>(static_cast<uint8_t>(online.data[i])) - static_cast<uint8_t>(stored.data[i]));
  }
  const double mean = sum / static_cast<double>(online.data.size());
  EXPECT_LT(mean, 8.0);
  EXPECT_GT(mean, 0.0) << "JPEG at quality 90 cannot be exact; is the re-encoding skipped?";
  EXPECT_EQ(online.labels, stored.labels);
}

TEST_F(MaterializeTest, ASessionWhosePipelineDoesNotBeginWithThePrefixIsRefusedNamingBoth) {
  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "none", "m")).ok());
  Served refused = Batch(Session("m", "resize(64), center_crop(40)", 4), {0, 1, 2, 3});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status)) << refused.status;
  EXPECT_NE(refused.status.message().find("'resize(48)'"), std::string::npos) << refused.status;
  EXPECT_NE(refused.status.message().find("'resize(64), center_crop(40)'"), std::string::npos) << refused.status;
  Served too_short = Batch(Session("m", "center_crop(40)", 4), {0, 1, 2, 3});
  EXPECT_TRUE(absl::IsFailedPrecondition(too_short.status)) << too_short.status;
  // The same server goes on serving this dataset and others.
  EXPECT_TRUE(Batch(Session("m", "resize(48), center_crop(40)", 4), {0, 1, 2, 3}).status.ok());
  EXPECT_TRUE(Batch(Session("clean", "center_crop(40)", 4), {0, 1, 2, 3}).status.ok());
}

TEST_F(MaterializeTest, DamagedOutputsGetClearErrorsAndTheServerServesOthers) {
  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "zstd", "good")).ok());
  const fs::path good = root_.path() / "good";
  auto copy = [&](const std::string& name) {
    fs::copy(good, root_.path() / name, fs::copy_options::recursive);
    return root_.path() / name;
  };
  const std::string manifest_text = ReadAll(good / kManifestFileName);
  auto rewrite = [](const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; };
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
  };
  fs::resize_file(copy("truncated") / "shard-000001.tar", 3000);
  fs::remove(copy("missing") / "shard-000002.tar");
  rewrite(copy("miscounted") / kManifestFileName, replace(manifest_text, "\"samples\": 18", "\"samples\": 19"));
  rewrite(copy("garbled") / kManifestFileName, manifest_text.substr(0, manifest_text.size() / 2));
  rewrite(copy("array") / kManifestFileName, "[" + manifest_text + "]");
  // Edited consistently (compression and field agree), but not the shards.
  rewrite(copy("edited_format") / kManifestFileName,
          replace(replace(manifest_text, "\"compression\": \"zstd\"", "\"compression\": \"lz4\""),
                  "\"field\": \"npy.zst\"", "\"field\": \"npy.lz4\""));
  {
    const fs::path header = copy("bad_header") / "shard-000000.tar";  // same size, a tar header broken
    std::fstream f(header, std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXX", 4);  // the first header's name: its checksum no longer matches
  }
  struct Case {
    std::string dataset, fragment;
  };
  for (const Case& c :
       std::vector<Case>{{"truncated", "shard-000001.tar holds 3000 bytes"},
                         {"missing", "lists shard shard-000002.tar, which is missing"},
                         {"miscounted", "manifest says 19 samples; its shards hold 18"},
                         {"garbled", "manifest is not valid"},
                         {"array", "manifest.json is not a Stoker manifest"},
                         {"edited_format", "manifest's format or compression does not match its shards"},
                         {"bad_header", "damaged shard"}}) {
    Served s = Batch(Session(c.dataset, "resize(48), center_crop(40)", 4), {0, 1, 2, 3});
    EXPECT_EQ(s.status.code(), absl::StatusCode::kDataLoss) << c.dataset << ": " << s.status;
    EXPECT_NE(s.status.message().find(c.fragment), std::string::npos) << c.dataset << ": " << s.status;
  }
  // A damaged sample inside a good shard: the bad-sample policy applies.
  const fs::path flipped = copy("flipped");
  absl::StatusOr<TarScan> scan = ScanTar(flipped / "shard-000000.tar");
  ASSERT_TRUE(scan.ok());
  {
    std::fstream f(flipped / "shard-000000.tar", std::ios::in | std::ios::out | std::ios::binary);
    // Sample 0's bytes changed in place, in the middle (its zstd frame still
    // parses as far as its header): only its checksum tells.
    f.seekp(scan->members[0].offset + scan->members[0].size / 2);
    f.write("\x5a\xa5\x5a\xa5", 4);
  }
  Served skip_config = Batch(Session("flipped", "resize(48), center_crop(40)", 2), {0, 1});  // SKIP: the default
  ASSERT_TRUE(skip_config.status.ok()) << skip_config.status;
  ASSERT_EQ(skip_config.failed.size(), 1u);
  EXPECT_EQ(skip_config.failed[0].sample_index(), 0);
  EXPECT_EQ(skip_config.failed[0].reason().rfind("corrupt: ", 0), 0u) << skip_config.failed[0].reason();
  EXPECT_NE(skip_config.failed[0].reason().find("the shard was changed after it was made"), std::string::npos)
      << skip_config.failed[0].reason();
  Served fail = Batch(
      [&] {
        v1::SessionConfig c = Session("flipped", "resize(48), center_crop(40)", 2);
        c.set_bad_sample_policy(v1::FAIL);
        return c;
      }(),
      {0, 1});
  EXPECT_EQ(fail.status.code(), absl::StatusCode::kDataLoss) << fail.status;
  EXPECT_NE(fail.status.message().find("shard-000000.tar:000000000"), std::string::npos) << fail.status;
  // Throughout, the good copy and the source are served.
  EXPECT_TRUE(Batch(Session("good", "resize(48), center_crop(40)", 4), {0, 1, 2, 3}).status.ok());
  EXPECT_TRUE(Batch(Session("clean", "center_crop(40)", 4), {0, 1, 2, 3}).status.ok());
}

TEST_F(MaterializeTest, BadSettingsAndAnExistingOutputAreRefused) {
  absl::StatusOr<MaterializeReport> random =
      Materialize(Config("clean", "resize(48), random_horizontal_flip(0.5)", "raw", "none", "x"));
  EXPECT_TRUE(absl::IsInvalidArgument(random.status())) << random.status();
  EXPECT_NE(random.status().message().find("random_horizontal_flip"), std::string::npos) << random.status();
  EXPECT_FALSE(fs::exists(root_.path() / "x.partial"));

  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "none", "x")).ok());
  absl::StatusOr<MaterializeReport> again = Materialize(Config("clean", "resize(40)", "raw", "none", "x"));
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("--overwrite"), std::string::npos) << again.status();
  EXPECT_EQ(PipelineToText(ReadManifest(root_.path() / "x")->prefix), "resize(48)");  // untouched

  MaterializeConfig replace = Config("clean", "resize(40)", "raw", "none", "x");
  replace.overwrite = true;
  ASSERT_TRUE(Materialize(replace).ok());
  EXPECT_EQ(PipelineToText(ReadManifest(root_.path() / "x")->prefix), "resize(40)");
  EXPECT_FALSE(fs::exists(root_.path() / "x.partial"));

  absl::StatusOr<MaterializeReport> of_materialised = Materialize(Config("x", "", "raw", "none", "y"));
  EXPECT_TRUE(absl::IsInvalidArgument(of_materialised.status())) << of_materialised.status();

  absl::StatusOr<MaterializeReport> float_jpeg = Materialize(
      Config("clean", "resize(48), normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225)", "jpeg:90", "none", "z"));
  EXPECT_TRUE(absl::IsInvalidArgument(float_jpeg.status())) << float_jpeg.status();
  EXPECT_NE(float_jpeg.status().message().find("stored raw only"), std::string::npos) << float_jpeg.status();
}

TEST_F(MaterializeTest, AFloatPrefixEndingInNormalizeIsServedByteIdentically) {
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  const std::string pipeline = "resize(48), center_crop(40), normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225)";
  for (const char* compression : {"none", "lz4"}) {
    const std::string out = absl::StrCat("f_", compression);
    absl::StatusOr<MaterializeReport> r = Materialize(Config("clean", pipeline, "raw", compression, out));
    ASSERT_TRUE(r.ok()) << r.status();
    // float32 (40, 40, 3) arrays: numpy.load reads them as they are served.
    if (std::string(compression) == "none") {
      EXPECT_GT(r->stored_bytes, 18 * 40 * 40 * 3 * 4);
    }
    for (v1::Layout layout : {v1::NHWC, v1::NCHW}) {
      v1::SessionConfig online_config = Session("clean", pipeline, 18), stored_config = Session(out, pipeline, 18);
      for (v1::SessionConfig* c : {&online_config, &stored_config}) {
        c->set_dtype(v1::FLOAT32);
        c->set_layout(layout);
      }
      Served online = Batch(online_config, all), stored = Batch(stored_config, all);
      ASSERT_TRUE(online.status.ok()) << online.status;
      ASSERT_TRUE(stored.status.ok()) << stored.status;
      EXPECT_EQ(stored.data.size(), 18u * 40 * 40 * 3 * 4);
      EXPECT_TRUE(online.data == stored.data) << compression << ", layout " << layout << ": the bytes differ";
    }
    // The stored floats hold the normalisation: a pipeline without it does not fit.
    v1::SessionConfig plain = Session(out, "resize(48), center_crop(40)", 18);
    Served refused = Batch(plain, all);
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status)) << refused.status;
  }
}

TEST_F(MaterializeTest, AnInterruptedRunResumesToTheSameShards) {
  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "lz4", "whole")).ok());

  MaterializeConfig slow = Config("clean", "resize(48)", "raw", "lz4", "resumed");
  slow.workers = 1;
  slow.test_sample_delay = absl::Milliseconds(30);
  std::atomic<bool> cancel{false};
  slow.cancel = &cancel;
  std::thread stopper([&] {
    // Stop once two shards are recorded.
    const fs::path progress = root_.path() / "resumed.partial" / "progress";
    for (int i = 0; i < 500; ++i) {
      std::error_code ec;
      int records = 0;
      for (fs::directory_iterator it(progress, ec), end; !ec && it != end; it.increment(ec)) ++records;
      if (records >= 2) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    cancel.store(true);
  });
  absl::StatusOr<MaterializeReport> cut = Materialize(slow);
  stopper.join();
  ASSERT_TRUE(absl::IsCancelled(cut.status())) << cut.status();
  EXPECT_NE(cut.status().message().find("rerun the same command"), std::string::npos) << cut.status();
  EXPECT_FALSE(fs::exists(root_.path() / "resumed"));

  // Other settings are refused while the interrupted run waits.
  absl::StatusOr<MaterializeReport> other = Materialize(Config("clean", "resize(40)", "raw", "lz4", "resumed"));
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("--prefix ('resize(48)' then, 'resize(40)' now)"), std::string::npos)
      << other.status();

  absl::StatusOr<MaterializeReport> done = Materialize(Config("clean", "resize(48)", "raw", "lz4", "resumed"));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GE(done->shards_resumed, 2);
  EXPECT_EQ(done->shards_resumed + done->shards_made, 5);
  const Manifest whole = *ReadManifest(root_.path() / "whole");
  ASSERT_EQ(done->manifest.shards.size(), whole.shards.size());
  for (size_t i = 0; i < whole.shards.size(); ++i) {
    EXPECT_EQ(done->manifest.shards[i].checksum, whole.shards[i].checksum) << whole.shards[i].name;
  }
}

TEST_F(MaterializeTest, SigkillMidRunThenRerunGivesExactlyOneCopyOfEachSample) {
  const std::vector<std::string> argv = {STOKER_MATERIALIZE_BIN,
                                         "--data-root",
                                         root_.path().string(),
                                         "--dataset",
                                         "clean",
                                         "--prefix",
                                         "resize(48)",
                                         "--format",
                                         "raw",
                                         "--compression",
                                         "zstd",
                                         "--out",
                                         (root_.path() / "k").string(),
                                         "--local-workers",
                                         "2",
                                         "--shard-samples",
                                         "2",
                                         "--progress",
                                         "log"};
  std::vector<std::string> slow = argv;
  slow.insert(slow.end(), {"--test-sample-delay-ms", "40"});
  auto child = testing::Subprocess::Start(slow);
  ASSERT_TRUE(child.ok()) << child.status();
  const fs::path progress = root_.path() / "k.partial" / "progress";
  int records = 0;
  for (int i = 0; i < 1000 && records < 3; ++i) {
    std::error_code ec;
    records = 0;
    for (fs::directory_iterator it(progress, ec), end; !ec && it != end; it.increment(ec)) ++records;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(records, 3) << "the run made too few shards to be cut mid-way";
  (*child)->Signal(SIGKILL);
  EXPECT_EQ(*(*child)->Wait(absl::Seconds(10)), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(root_.path() / "k")) << "the run finished before it was killed";

  auto rerun = testing::Subprocess::Start(argv);
  ASSERT_TRUE(rerun.ok());
  absl::StatusOr<std::string> line = (*rerun)->WaitForLine("stoker-materialize:", absl::Seconds(60));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*(*rerun)->Wait(absl::Seconds(10)), 0);
  EXPECT_NE(line->find("18 samples (0 failed) in 9 shards"), std::string::npos) << *line;
  const Manifest m = *ReadManifest(root_.path() / "k");
  std::map<int64_t, int> copies;
  for (const Manifest::Shard& s : m.shards) {
    EXPECT_EQ(*FileChecksum(root_.path() / "k" / s.name), s.checksum) << s.name;
    const absl::StatusOr<TarScan> scan = ScanTar(root_.path() / "k" / s.name);
    ASSERT_TRUE(scan.ok());
    for (const TarMember& member : scan->members) {
      if (member.name.find(".npy.zst") != std::string::npos) ++copies[std::stoll(member.name)];
    }
  }
  EXPECT_EQ(copies.size(), 18u);
  for (const auto& [index, n] : copies) EXPECT_EQ(n, 1) << "sample " << index;
  EXPECT_FALSE(fs::exists(root_.path() / "k.partial"));
  // Other readers: the shard lists with GNU tar.
  if (std::system("command -v tar >/dev/null") == 0) {
    const std::string cmd =
        "tar -tf " + (root_.path() / "k" / "shard-000000.tar").string() + " > " + (root_.path() / "list.txt").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(ReadAll(root_.path() / "list.txt"),
              "000000000.npy.zst\n000000000.cls\n000000000.xxh3\n000000001.npy.zst\n000000001.cls\n000000001.xxh3\n");
  }
}

TEST_F(MaterializeTest, ConcurrentRunsAllFailedSamplesAndForeignManifestsAreHandled) {
  // A run already writing OUT holds OUT.partial.lock: a second one is refused.
  const fs::path lock = root_.path() / "busy.partial.lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  absl::StatusOr<MaterializeReport> busy = Materialize(Config("clean", "resize(48)", "raw", "none", "busy"));
  EXPECT_TRUE(absl::IsFailedPrecondition(busy.status())) << busy.status();
  EXPECT_NE(busy.status().message().find("another stoker-materialize is writing"), std::string::npos) << busy.status();
  close(fd);
  EXPECT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "none", "busy")).ok());
  EXPECT_FALSE(fs::exists(lock));

  // Nothing decodable: an error, and no output.
  root_.Write("bad/a/1.jpg", "nope");
  root_.Write("bad/b/2.jpg", "still not");
  absl::StatusOr<MaterializeReport> none = Materialize(Config("bad", "resize(48)", "raw", "none", "bad_out"));
  EXPECT_TRUE(absl::IsDataLoss(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("no sample of 'bad' could be made (2 failed"), std::string::npos)
      << none.status();
  EXPECT_FALSE(fs::exists(root_.path() / "bad_out"));
  EXPECT_FALSE(fs::exists(root_.path() / "bad_out.partial"));

  // Another tool's manifest.json beside plain tar shards is not ours: the
  // shards are served as before.
  const std::string jpeg = testing::EncodeJpeg(testing::SyntheticImage(64, 64, 1), 90);
  root_.Write("webdataset/train-000000.tar",
              testing::TarArchive({{"a.jpg", jpeg}, {"a.cls", "0"}, {"b.jpg", jpeg}, {"b.cls", "1"}}));
  root_.Write("webdataset/manifest.json", R"({"name": "my shards", "files": 1})");
  Served served = Batch(Session("webdataset", "center_crop(32)", 2), {0, 1});
  EXPECT_TRUE(served.status.ok()) << served.status;
}

TEST_F(MaterializeTest, TheFingerprintCoversHowTheSamplesWereMade) {
  // Same shapes, so the same member sizes; another interpolation, so other pixels.
  ASSERT_TRUE(Materialize(Config("clean", "resize(48)", "raw", "none", "linear")).ok());
  ASSERT_TRUE(Materialize(Config("clean", "resize(48, interpolation=nearest)", "raw", "none", "nearest")).ok());
  DatasetCatalog catalog(root_.path());
  const std::string a = (*catalog.Open("linear"))->fingerprint(), b = (*catalog.Open("nearest"))->fingerprint();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 5), "xxh3:");
  EXPECT_EQ(ReadManifest(root_.path() / "linear")->shards[0].bytes,
            ReadManifest(root_.path() / "nearest")->shards[0].bytes);
}

}  // namespace
}  // namespace stoker
