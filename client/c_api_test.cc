// The C ABI (include/stoker/c_api.h) through libstoker_client.so only, as a
// training job links it: options by name from the one table, an epoch
// exactly once in local mode and from real stoker-server processes (one of
// them SIGKILLed mid-epoch), fields, a resume from stoker_client_state equal
// to an uninterrupted run, and the C example (examples/c_epoch/epoch.c,
// compiled as C) running an epoch; the C++ API over it (stoker/client.h) in
// the shape the docs give, and its example built with either standard
// library ABI.
#include "stoker/c_api.h"
#include "stoker/client.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/server_process.h"
#include "tests/testdata/subprocess.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::RunningServer;
using ::stoker::testing::Subprocess;
using ::stoker::testing::TempDir;

constexpr int kClasses = 3, kPerClass = 10, kSamples = kClasses * kPerClass;
constexpr int kShardSamples = 12;

// One batch as the test keeps it: its samples, labels and pixels' sum.
struct Seen {
  std::vector<int64_t> indices;
  std::vector<int32_t> labels;
  uint64_t pixel_sum = 0;
  std::map<std::string, std::string> fields;  // name -> kind:values
};

class CApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    testing::ImageSetOptions o;
    o.classes = kClasses;
    o.per_class = kPerClass;
    o.min_side = 48;
    o.max_side = 96;
    ASSERT_TRUE(testing::WriteImageFolder(root_->path() / "ds", o).ok());
    // A shard of jpg + txt + cls samples, for fields.
    std::vector<std::pair<std::string, std::string>> members;
    for (int i = 0; i < kShardSamples; ++i) {
      const std::string key = absl::StrCat("s", 100 + i);
      members.emplace_back(key + ".jpg", testing::EncodeJpeg(testing::SyntheticImage(40, 40, i), 90));
      members.emplace_back(key + ".txt", absl::StrCat("caption ", i));
      members.emplace_back(key + ".cls", absl::StrCat(i % 4));
    }
    std::filesystem::create_directories(root_->path() / "pairs");
    std::ofstream(root_->path() / "pairs" / "train-000000.tar", std::ios::binary) << testing::TarArchive(members);
  }
  static void TearDownTestSuite() { delete root_; }

  // Options for `dataset` with `more` (name, value) set; fails the test on a refusal.
  static stoker_options* Options(const std::vector<std::pair<std::string, std::string>>& more) {
    stoker_options* o = stoker_options_new();
    const std::vector<std::pair<std::string, std::string>> base = {
        {"dataset", "ds"},  {"batch_size", "4"}, {"seed", "5"},     {"pipeline", "random_resized_crop(24)"},
        {"dtype", "uint8"}, {"layout", "nhwc"},  {"device", "cpu"}, {"metrics_port", "-1"}};
    for (const auto& [name, value] : base) EXPECT_EQ(stoker_options_set(o, name.c_str(), value.c_str()), STOKER_OK);
    for (const auto& [name, value] : more) {
      EXPECT_EQ(stoker_options_set(o, name.c_str(), value.c_str()), STOKER_OK) << name << ": " << stoker_last_error();
    }
    return o;
  }
  static std::vector<std::pair<std::string, std::string>> Local() {
    return {{"local_workers", "2"}, {"data_root", root_->path().string()}};
  }

  static stoker_client* Open(const std::vector<std::pair<std::string, std::string>>& more) {
    stoker_options* o = Options(more);
    stoker_client* c = nullptr;
    EXPECT_EQ(stoker_client_open(o, &c), STOKER_OK) << stoker_last_error();
    stoker_options_free(o);
    return c;
  }

  // Up to `limit` batches of the running (or selected) epoch; *ended when its end was seen.
  static std::map<int64_t, Seen> Take(stoker_client* c, int limit = 1 << 30, bool* ended = nullptr) {
    std::map<int64_t, Seen> out;
    if (ended != nullptr) *ended = false;
    for (int n = 0; n < limit; ++n) {
      stoker_batch* b = nullptr;
      EXPECT_EQ(stoker_client_next(c, nullptr, &b), STOKER_OK) << stoker_last_error();
      if (b == nullptr) {
        if (ended != nullptr) *ended = true;
        break;
      }
      Seen s;
      const int64_t size = stoker_batch_size(b);
      s.indices.assign(stoker_batch_sample_indices(b), stoker_batch_sample_indices(b) + size);
      s.labels.assign(stoker_batch_labels(b), stoker_batch_labels(b) + size);
      stoker_tensor t;
      EXPECT_EQ(stoker_batch_image(b, &t), STOKER_OK);
      EXPECT_EQ(t.dtype, STOKER_UINT8);
      EXPECT_EQ(t.layout, STOKER_NHWC);
      EXPECT_EQ(t.device, -1);
      EXPECT_EQ(t.cuda_event, nullptr);
      EXPECT_EQ(t.ndim, 4);
      EXPECT_EQ(t.shape[0], size);
      EXPECT_EQ(t.shape[3], 3);
      const auto* px = static_cast<const uint8_t*>(t.data);
      for (int64_t i = 0; i < t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3]; ++i) s.pixel_sum += px[i];
      for (int f = 0; f < stoker_batch_field_count(b); ++f) {
        stoker_field field;
        EXPECT_EQ(stoker_batch_field(b, f, &field), STOKER_OK);
        EXPECT_EQ(field.num_offsets, size + 1);
        EXPECT_EQ(field.offsets[0], 0);
        EXPECT_EQ(static_cast<size_t>(field.offsets[size]), field.bytes);
        s.fields[field.name] =
            absl::StrCat(field.kind, ":", std::string(static_cast<const char*>(field.values), field.bytes));
      }
      stoker_field none;
      EXPECT_EQ(stoker_batch_field(b, stoker_batch_field_count(b), &none), STOKER_OUT_OF_RANGE);
      out[stoker_batch_index(b)] = std::move(s);
      stoker_batch_release(b, nullptr);
    }
    return out;
  }

  static void ExpectExactlyOnce(const std::map<int64_t, Seen>& batches, int samples) {
    std::multiset<int64_t> seen;
    for (const auto& [index, b] : batches) seen.insert(b.indices.begin(), b.indices.end());
    EXPECT_EQ(seen.size(), static_cast<size_t>(samples));
    for (int i = 0; i < samples; ++i) EXPECT_EQ(seen.count(i), 1u) << "sample " << i;
  }

  static TempDir* root_;
};

TempDir* CApiTest::root_ = nullptr;

TEST_F(CApiTest, OptionsAreSetByNameFromTheTableAndRefusalsNameTheProblem) {
  EXPECT_EQ(stoker_abi_version(), STOKER_ABI_VERSION);
  EXPECT_STRNE(stoker_version(), "");
  std::set<std::string> names;
  for (int i = 0; i < stoker_option_count(); ++i) {
    names.insert(stoker_option_name(i));
    EXPECT_STRNE(stoker_option_help(i), "") << stoker_option_name(i);
  }
  EXPECT_EQ(stoker_option_name(stoker_option_count()), nullptr);
  for (const char* n : {"servers", "dataset", "pipeline", "fields", "batch_size", "seed", "epochs", "rank",
                        "world_size", "tls_ca", "auth_token_file", "prefetch", "device", "local_workers"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  stoker_options* o = stoker_options_new();
  EXPECT_EQ(stoker_options_set(o, "batch_sise", "4"), STOKER_INVALID_ARGUMENT);
  EXPECT_NE(std::string(stoker_last_error()).find("no option 'batch_sise'"), std::string::npos) << stoker_last_error();
  EXPECT_EQ(stoker_options_set(o, "batch_size", "four"), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(stoker_last_error()), "option batch_size: 'four' is not a int");
  EXPECT_EQ(stoker_options_set(o, "drop_last", "maybe"), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(stoker_options_set(o, "device", "cuda:x"), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(stoker_options_set(o, "device", "cuda:1"), STOKER_OK);
  EXPECT_EQ(stoker_options_set(o, "mean", "0.5, 0.5,0.5"), STOKER_OK);
  EXPECT_EQ(stoker_options_set(o, "mean", "0.5,x"), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(stoker_options_set(nullptr, "seed", "1"), STOKER_INVALID_ARGUMENT);
  // Every option is checked at open, before any connection: a bad pipeline text is named.
  EXPECT_EQ(stoker_options_set(o, "dataset", "ds"), STOKER_OK);
  EXPECT_EQ(stoker_options_set(o, "servers", "127.0.0.1:1"), STOKER_OK);
  EXPECT_EQ(stoker_options_set(o, "pipeline", "blur(3)"), STOKER_OK);
  stoker_client* c = reinterpret_cast<stoker_client*>(0x1);
  EXPECT_EQ(stoker_client_open(o, &c), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(stoker_last_error()).find("unknown op 'blur'"), std::string::npos) << stoker_last_error();
  stoker_options_free(o);
}

TEST_F(CApiTest, LocalModeRunsEachEpochExactlyOnceAndStartsTheNextByItself) {
  stoker_client* c = Open(Local());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(stoker_client_num_samples(c), kSamples);
  EXPECT_EQ(stoker_client_batches_per_epoch(c), (kSamples + 3) / 4);
  std::map<int64_t, Seen> e0 = Take(c);  // epoch 0 unless set
  ExpectExactlyOnce(e0, kSamples);
  std::map<int64_t, Seen> e1 = Take(c);  // the next call starts the epoch after it
  ExpectExactlyOnce(e1, kSamples);
  EXPECT_NE(e0.at(0).indices, e1.at(0).indices) << "epoch 1 has its own order";
  // Labels follow the sample: its class folder.
  std::map<int64_t, int32_t> label;
  for (const auto* epoch : {&e0, &e1}) {
    for (const auto& [i, b] : *epoch) {
      for (size_t k = 0; k < b.indices.size(); ++k) {
        auto [it, inserted] = label.emplace(b.indices[k], b.labels[k]);
        EXPECT_EQ(it->second, b.labels[k]);
      }
    }
  }
  char* stats = nullptr;
  ASSERT_EQ(stoker_client_stats_json(c, &stats), STOKER_OK);
  EXPECT_NE(std::string(stats).find("\"images_per_second\""), std::string::npos) << stats;
  EXPECT_NE(std::string(stats).find("\"bottleneck\""), std::string::npos) << stats;
  EXPECT_NE(std::string(stats).find("\"bottleneck_figures\":{"), std::string::npos) << stats;
  EXPECT_NE(std::string(stats).find("\"batches_per_server\":{\"local\":"), std::string::npos) << stats;
  stoker_free(stats);
  // set_epoch selects an epoch again: the same batches as the first time.
  ASSERT_EQ(stoker_client_set_epoch(c, 0), STOKER_OK);
  std::map<int64_t, Seen> again = Take(c);
  for (const auto& [i, b] : e0) {
    EXPECT_EQ(again.at(i).indices, b.indices);
    EXPECT_EQ(again.at(i).pixel_sum, b.pixel_sum) << "batch " << i;
  }
  EXPECT_EQ(stoker_client_set_epoch(c, -1), STOKER_INVALID_ARGUMENT);
  stoker_client_close(c);
}

TEST_F(CApiTest, AResumeFromTheStateGivesTheRestOfTheUninterruptedEpoch) {
  stoker_client* whole = Open(Local());
  ASSERT_EQ(stoker_client_set_epoch(whole, 3), STOKER_OK);
  const std::map<int64_t, Seen> expected = Take(whole);
  stoker_client_close(whole);

  stoker_client* first = Open(Local());
  ASSERT_EQ(stoker_client_set_epoch(first, 3), STOKER_OK);
  bool ended = false;
  std::map<int64_t, Seen> got = Take(first, 3, &ended);
  ASSERT_FALSE(ended);
  void* state = nullptr;
  size_t size = 0;
  ASSERT_EQ(stoker_client_state(first, &state, &size), STOKER_OK) << stoker_last_error();
  stoker_client_close(first);

  stoker_client* second = Open(Local());
  ASSERT_EQ(stoker_client_restore(second, state, size), STOKER_OK) << stoker_last_error();
  ASSERT_EQ(stoker_client_set_epoch(second, 3), STOKER_OK) << "the restored epoch continues";
  for (auto& [i, b] : Take(second)) {
    EXPECT_FALSE(got.count(i)) << "batch " << i << " delivered twice";
    got[i] = std::move(b);
  }
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [i, b] : expected) {
    EXPECT_EQ(got.at(i).indices, b.indices) << "batch " << i;
    EXPECT_EQ(got.at(i).pixel_sum, b.pixel_sum) << "batch " << i;
  }
  stoker_client_close(second);

  // A state saved under another seed is refused, naming both.
  stoker_client* other = Open({{"local_workers", "1"}, {"data_root", root_->path().string()}, {"seed", "6"}});
  EXPECT_EQ(stoker_client_restore(other, state, size), STOKER_FAILED_PRECONDITION);
  EXPECT_NE(std::string(stoker_last_error()).find("seed 5"), std::string::npos) << stoker_last_error();
  EXPECT_EQ(stoker_client_restore(other, "junk", 4), STOKER_INVALID_ARGUMENT);
  stoker_client_close(other);
  stoker_free(state);
}

TEST_F(CApiTest, FieldsComeBackAsValuesAndOffsets) {
  stoker_client* c = Open({{"local_workers", "1"},
                           {"data_root", root_->path().string()},
                           {"dataset", "pairs"},
                           {"fields", "image=jpg, caption=txt, label=cls"},
                           {"batch_size", "3"}});
  ASSERT_NE(c, nullptr);
  const std::map<int64_t, Seen> batches = Take(c);
  ExpectExactlyOnce(batches, kShardSamples);
  for (const auto& [i, b] : batches) {
    ASSERT_EQ(b.fields.size(), 2u) << "caption and label; the image is the tensor";
    for (int64_t s : b.indices) {
      EXPECT_NE(b.fields.at("caption").find(absl::StrCat("caption ", s)), std::string::npos) << b.fields.at("caption");
    }
    EXPECT_EQ(b.fields.at("caption").rfind("text:", 0), 0u);
    EXPECT_EQ(b.fields.at("label").rfind("class:", 0), 0u);
    EXPECT_EQ(b.fields.at("label").size(), 6 + 4 * b.indices.size()) << "one int32 per sample";
  }
  stoker_client_close(c);
}

TEST_F(CApiTest, AnEpochFromTwoServersSurvivesOneKilledMidEpoch) {
  RunningServer a = testing::StartServerProcess(STOKER_SERVER_BIN, root_->path(), {"--workers=1"});
  RunningServer b =
      testing::StartServerProcess(STOKER_SERVER_BIN, root_->path(), {"--workers=1", "--test-sample-delay-ms=20"});
  ASSERT_FALSE(a.address.empty());
  ASSERT_FALSE(b.address.empty());
  stoker_client* c = Open({{"servers", absl::StrCat(a.address, ",", b.address)}, {"unavailable_timeout_s", "20"}});
  ASSERT_NE(c, nullptr);
  std::map<int64_t, Seen> got = Take(c, 2);
  b.process->Signal(SIGKILL);
  for (auto& [i, batch] : Take(c)) got[i] = std::move(batch);
  ExpectExactlyOnce(got, kSamples);
  stoker_client_close(c);
}

TEST_F(CApiTest, TheCExampleRunsAnEpochFromAServer) {
  RunningServer server = testing::StartServerProcess(STOKER_SERVER_BIN, root_->path(), {"--workers=2"});
  ASSERT_FALSE(server.address.empty());
  auto run =
      Subprocess::Start({STOKER_C_EPOCH_BIN, "--epochs", "2", absl::StrCat("servers=", server.address), "dataset=ds",
                         "batch_size=7", "pipeline=center_crop(32)", "device=cpu", "dtype=uint8", "metrics_port=-1"});
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<std::string> last = (*run)->WaitForLine("stats {", absl::Seconds(90));
  const std::string* out = &(*run)->output();
  ASSERT_TRUE(last.ok()) << last.status() << "\n" << *out;
  absl::StatusOr<int> code = (*run)->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << *out;
  std::map<int64_t, std::multiset<int64_t>> samples;  // epoch -> indices
  for (absl::string_view line : absl::StrSplit(*out, '\n')) {
    if (!absl::ConsumePrefix(&line, "batch ")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, absl::ByAnyChar(" :"), absl::SkipEmpty());
    ASSERT_GE(parts.size(), 3u);
    int64_t epoch = -1, v = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &epoch));
    for (size_t k = 3; k < parts.size(); ++k) {
      ASSERT_TRUE(absl::SimpleAtoi(parts[k], &v));
      samples[epoch].insert(v);
    }
  }
  ASSERT_EQ(samples.size(), 2u) << *out;
  for (const auto& [epoch, seen] : samples) {
    EXPECT_EQ(seen.size(), static_cast<size_t>(kSamples)) << "epoch " << epoch;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), static_cast<size_t>(kSamples));
  }
  int epochs_counted = 0;
  for (size_t at = out->find("\nimages 30\n"); at != std::string::npos; at = out->find("\nimages 30\n", at + 1)) {
    ++epochs_counted;
  }
  EXPECT_EQ(epochs_counted, 2) << *out;
  EXPECT_NE(out->find("\nstats {\"batches\":10,"), std::string::npos) << *out;
}

// The shape of docs/how-to/use-from-cpp.md: Open, SetEpoch, Next until null,
// the batch released with its object; State and Restore; errors as Status.
TEST_F(CApiTest, TheCppApiRunsAnEpochResumesAndNamesErrors) {
  stoker::ClientOptions o;
  o.local_workers = 2;
  o.data_root = root_->path().string();
  o.dataset = "ds";
  o.batch_size = 4;
  o.seed = 5;
  o.pipeline = "random_resized_crop(24)";
  o.dtype = "uint8";
  o.layout = "nhwc";
  o.device = "cpu";
  o.metrics_port = -1;
  o.mean = std::vector<float>{0.5f, 0.5f, 0.5f};  // a list option from its type
  auto c = stoker::Client::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->num_samples(), kSamples);
  ASSERT_TRUE((*c)->SetEpoch(2).ok());
  std::map<int64_t, std::vector<int64_t>> whole;
  std::multiset<int64_t> seen;
  while (true) {
    auto b = (*c)->Next();
    ASSERT_TRUE(b.ok()) << b.status().message();
    if (!*b) break;
    EXPECT_EQ((*b)->epoch(), 2);
    EXPECT_EQ((*b)->image().shape[0], (*b)->size());
    EXPECT_EQ((*b)->image().dtype, STOKER_UINT8);
    for (int64_t k = 0; k < (*b)->size(); ++k) {
      seen.insert((*b)->sample_indices()[k]);
      EXPECT_GE((*b)->labels()[k], 0);
      EXPECT_LT((*b)->labels()[k], kClasses);
    }
    whole[(*b)->index()].assign((*b)->sample_indices(), (*b)->sample_indices() + (*b)->size());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSamples));
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), static_cast<size_t>(kSamples));

  // Two batches of epoch 2 again, a checkpoint, and the rest from a new client.
  ASSERT_TRUE((*c)->SetEpoch(2).ok());
  std::map<int64_t, std::vector<int64_t>> resumed;
  for (int n = 0; n < 2; ++n) {
    auto b = (*c)->Next();
    ASSERT_TRUE(b.ok() && *b);
    resumed[(*b)->index()].assign((*b)->sample_indices(), (*b)->sample_indices() + (*b)->size());
  }
  auto state = (*c)->State();
  ASSERT_TRUE(state.ok()) << state.status().message();
  auto d = stoker::Client::Open(o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Restore(*state).ok());
  while (true) {
    auto b = (*d)->Next();
    ASSERT_TRUE(b.ok()) << b.status().message();
    if (!*b) break;
    EXPECT_FALSE(resumed.count((*b)->index())) << "batch " << (*b)->index() << " twice";
    resumed[(*b)->index()].assign((*b)->sample_indices(), (*b)->sample_indices() + (*b)->size());
  }
  EXPECT_EQ(resumed, whole);
  auto stats = (*d)->StatsJson();
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->find("\"bottleneck\""), std::string::npos);

  // Errors carry the library's code and message.
  stoker::Status bad = (*d)->Restore("junk");
  EXPECT_EQ(bad.code(), STOKER_INVALID_ARGUMENT);
  EXPECT_NE(bad.message().find("not a state"), std::string::npos) << bad.message();
  stoker::ClientOptions wrong = o;
  wrong.batch_size = "four";
  auto refused = stoker::Client::Open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), STOKER_INVALID_ARGUMENT);
  EXPECT_EQ(refused.status().message(), "option batch_size: 'four' is not a int");
  EXPECT_TRUE(wrong.Set("seed", "9"));
  EXPECT_FALSE(wrong.Set("no_such_option", "1"));
}

// MixUp through the ABI: soft targets [N, classes] beside the images; none
// without it.
TEST_F(CApiTest, MixUpTargetsComeWithTheBatch) {
  stoker_client* c = Open({{"local_workers", "1"},
                           {"data_root", root_->path().string()},
                           {"dtype", "float32"},
                           {"mixup_alpha", "0.4"},
                           {"num_classes", "3"}});
  ASSERT_NE(c, nullptr);
  stoker_batch* b = nullptr;
  ASSERT_EQ(stoker_client_next(c, nullptr, &b), STOKER_OK) << stoker_last_error();
  ASSERT_NE(b, nullptr);
  stoker_tensor targets;
  ASSERT_EQ(stoker_batch_targets(b, &targets), STOKER_OK) << stoker_last_error();
  EXPECT_EQ(targets.dtype, STOKER_FLOAT32);
  ASSERT_EQ(targets.ndim, 2);
  EXPECT_EQ(targets.shape[0], stoker_batch_size(b));
  EXPECT_EQ(targets.shape[1], 3);
  const auto* t = static_cast<const float*>(targets.data);
  int mixed = 0;
  for (int64_t i = 0; i < targets.shape[0]; ++i) {
    float sum = 0, top = 0;
    for (int k = 0; k < 3; ++k) sum += t[i * 3 + k], top = std::max(top, t[i * 3 + k]);
    EXPECT_NEAR(sum, 1.0f, 1e-5) << "row " << i;
    mixed += top < 0.999f;
  }
  EXPECT_GT(mixed, 0) << "no row was mixed";
  stoker_batch_release(b, nullptr);
  stoker_client_close(c);

  stoker_client* plain = Open(Local());
  ASSERT_EQ(stoker_client_next(plain, nullptr, &b), STOKER_OK);
  EXPECT_EQ(stoker_batch_targets(b, &targets), STOKER_NOT_FOUND);
  stoker_batch_release(b, nullptr);
  stoker_client_close(plain);
}

// Every option takes a value of its own type (each Setting<T> instantiated),
// and a batch keeps its client open after the Client object is gone; after a
// Restore, epoch() says which epoch continues.
TEST_F(CApiTest, EveryOptionTakesItsTypeAndABatchOutlivesItsClient) {
  stoker::ClientOptions all;
#define STOKER_OPTION(type, name, default_value, unit, python, help) \
  all.name = type{};                                                 \
  EXPECT_TRUE(all.name.set()) << #name;
#include "stoker/client_options.inc"
#undef STOKER_OPTION
  all.drop_last = true;
  EXPECT_EQ(all.drop_last.text(), "true");
  all.mean = std::vector<float>{0.25f, 0.5f};
  EXPECT_EQ(all.mean.text(), "0.25,0.5");
  all.servers = std::vector<std::string>{"", "b:1"};
  EXPECT_EQ(all.servers.text(), ",b:1");

  stoker::ClientOptions o;
  o.local_workers = 1;
  o.data_root = root_->path().string();
  o.dataset = "ds";
  o.batch_size = 4;
  o.device = "cpu";
  o.metrics_port = -1;
  std::unique_ptr<stoker::Batch> kept;
  std::string state;
  {
    auto c = stoker::Client::Open(o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    ASSERT_TRUE((*c)->SetEpoch(6).ok());
    auto b = (*c)->Next();
    ASSERT_TRUE(b.ok() && *b);
    kept = std::move(*b);
    state = *(*c)->State();
  }  // the Client object goes first
  EXPECT_EQ(kept->size(), 4);
  EXPECT_EQ(kept->epoch(), 6);
  kept.reset();  // the slot, then the client
  auto d = stoker::Client::Open(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->epoch(), 0);
  ASSERT_TRUE((*d)->Restore(state).ok());
  EXPECT_EQ((*d)->epoch(), 6);
}

// The C++ example, built against the header and the library only, with the
// new and the old (_GLIBCXX_USE_CXX11_ABI=0) standard library ABI: each runs
// two epochs exactly once in local mode.
TEST_F(CApiTest, TheCppExampleRunsWithEitherStandardLibraryAbi) {
  for (const char* binary : {STOKER_CPP_EPOCH_BIN, STOKER_CPP_EPOCH_OLD_ABI_BIN}) {
    auto run = Subprocess::Start({binary, "--epochs", "2", "local_workers=2",
                                  absl::StrCat("data_root=", root_->path().string()), "dataset=ds", "batch_size=8",
                                  "pipeline=center_crop(32)", "device=cpu", "metrics_port=-1"});
    ASSERT_TRUE(run.ok()) << run.status();
    absl::StatusOr<std::string> last = (*run)->WaitForLine("stats {", absl::Seconds(90));
    const std::string& out = (*run)->output();
    ASSERT_TRUE(last.ok()) << binary << ": " << last.status() << "\n" << out;
    absl::StatusOr<int> code = (*run)->Wait(absl::Seconds(30));
    ASSERT_TRUE(code.ok());
    EXPECT_EQ(*code, 0) << out;
    std::map<int64_t, std::set<int64_t>> samples;
    size_t count = 0;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (!absl::ConsumePrefix(&line, "batch ")) continue;
      std::vector<std::string> parts = absl::StrSplit(line, absl::ByAnyChar(" :"), absl::SkipEmpty());
      int64_t epoch = -1, v = 0;
      ASSERT_TRUE(absl::SimpleAtoi(parts[0], &epoch));
      for (size_t k = 3; k < parts.size(); ++k) {
        ASSERT_TRUE(absl::SimpleAtoi(parts[k], &v));
        samples[epoch].insert(v);
        ++count;
      }
    }
    EXPECT_EQ(count, 2u * kSamples) << binary;
    EXPECT_EQ(samples[0].size(), static_cast<size_t>(kSamples)) << binary;
    EXPECT_EQ(samples[1].size(), static_cast<size_t>(kSamples)) << binary;
  }
}

}  // namespace
}  // namespace stoker
