#include "dataplane/sources/dataset.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "dataplane/sources/synthetic_source.h"
#include "gtest/gtest.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

TEST(DatasetTest, ImageFolderLabelsFollowSortedClassNames) {
  TempDir root;
  root.Write("ds/zebra/b.jpg", "x");
  root.Write("ds/zebra/a.JPEG", "x");  // extension matched in any case
  root.Write("ds/apple/1.png", "x");
  root.Write("ds/apple/notes.txt", "x");        // not an image extension
  root.Write("ds/empty_class/readme.md", "x");  // no images: no class
  auto index = ImageFolderIndex::Scan(root.path() / "ds", root.path());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)->class_names(), (std::vector<std::string>{"apple", "zebra"}));
  ASSERT_EQ((*index)->size(), 3);
  EXPECT_EQ((*index)->samples()[0].path, "apple/1.png");
  EXPECT_EQ((*index)->samples()[0].label, 0);
  EXPECT_EQ((*index)->samples()[1].path, "zebra/a.JPEG");
  EXPECT_EQ((*index)->samples()[2].path, "zebra/b.jpg");
  EXPECT_EQ((*index)->samples()[2].label, 1);
}

TEST(DatasetTest, ResolveRefusesNamesThatLeaveTheRoot) {
  TempDir outside, root;
  outside.Write("secret/cls/a.jpg", "x");
  root.Write("ok/cls/a.jpg", "x");
  std::filesystem::create_directory_symlink(outside.path() / "secret", root.path() / "link_out");
  std::filesystem::create_directory_symlink(root.path() / "ok", root.path() / "link_in");
  const std::pair<std::string, absl::StatusCode> cases[] = {
      {"ok", absl::StatusCode::kOk},
      {"link_in", absl::StatusCode::kOk},
      {"../x", absl::StatusCode::kPermissionDenied},
      {"ok/../../x", absl::StatusCode::kPermissionDenied},
      {"/etc", absl::StatusCode::kPermissionDenied},
      {"link_out", absl::StatusCode::kPermissionDenied},
      {"missing", absl::StatusCode::kNotFound},
      {"", absl::StatusCode::kInvalidArgument},
  };
  for (const auto& [name, code] : cases) {
    EXPECT_EQ(ResolveDatasetDir(root.path(), name).status().code(), code) << "'" << name << "'";
  }
  auto status = ResolveDatasetDir(root.path(), "missing").status();
  EXPECT_NE(status.message().find("'missing'"), std::string::npos) << status;
}

TEST(DatasetTest, CatalogSharesIndexAndReportsEmptyDatasets) {
  TempDir root;
  root.Write("ds/c/a.jpg", "x");
  root.Write("empty/readme.txt", "x");
  DatasetCatalog catalog(root.path());
  auto a = catalog.Open("ds");
  auto b = catalog.Open("ds");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(catalog.Open("empty").status().code(), absl::StatusCode::kNotFound);
}

// Issue 49: a synthetic name with annotations once read its images from the
// server's working directory; it is refused, naming both.
TEST(DatasetTest, ASyntheticNameWithAnnotationsIsRefused) {
  TempDir root;
  root.Write("instances.json", R"({"images": [], "annotations": [], "categories": []})");
  DatasetCatalog catalog(root.path());
  absl::Status status;
  catalog.OpenAsync(
      "synthetic:32x32:4", [&](SourceOrError s) { status = s.status(); }, absl::InfiniteDuration(), "instances.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("'synthetic:32x32:4' is synthetic"), std::string::npos) << status;
  EXPECT_NE(status.message().find("instances.json"), std::string::npos) << status;
}

// A remote data root: the catalog fetches a dataset's local copy on its scan
// thread before opening it (and not for synthetic names); a name the store
// lacks, or a failed fetch, is the open's error; the name rules still hold.
TEST(DatasetTest, ARemoteRootFetchesEachDatasetBeforeItIsOpened) {
  TempDir root;
  std::vector<std::pair<std::string, bool>> fetched;
  absl::Mutex mu;
  CatalogOptions o;
  o.fetch = [&](const std::string& name, bool directory, const std::atomic<bool>*) {
    absl::MutexLock lock(&mu);
    fetched.emplace_back(name, directory);
    if (name == "broken") return absl::UnavailableError("the store is down");
    if (name == "ds") root.Write("ds/c/a.jpg", "x");  // what the mirror would write
    return absl::OkStatus();
  };
  DatasetCatalog catalog(root.path(), o);
  auto ds = catalog.Open("ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 1);
  EXPECT_EQ(catalog.Open("broken").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(catalog.Open("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(catalog.Open("../x").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(catalog.Open("synthetic:8x8:4").ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(fetched, (std::vector<std::pair<std::string, bool>>{{"ds", true}, {"broken", true}, {"absent", true}}));
}

TEST(DatasetTest, SymlinkedFilesOutsideTheRootAreSkipped) {
  TempDir outside, root;
  const auto secret = outside.Write("secret.jpg", "x");
  root.Write("ds/c/a.jpg", "x");
  std::filesystem::create_symlink(secret, root.path() / "ds/c/b.jpg");
  auto index = ImageFolderIndex::Scan(root.path() / "ds", root.path());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->size(), 1);
}

TEST(DatasetTest, ClassDirectoriesLinkedOutOfTheRootAndLoopingLinksAreSkipped) {
  TempDir outside, root;
  outside.Write("cls/secret.jpg", "x");
  root.Write("ds/real/a.jpg", "x");
  std::filesystem::create_directory_symlink(outside.path() / "cls", root.path() / "ds/evil");
  std::filesystem::create_symlink(root.path() / "ds/real/loop.jpg", root.path() / "ds/real/loop.jpg");
  auto index = ImageFolderIndex::Scan(root.path() / "ds", root.path());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)->class_names(), (std::vector<std::string>{"real"}));
  EXPECT_EQ((*index)->size(), 1);
}

TEST(DatasetTest, ReadFileBytes) {
  TempDir root;
  const auto p = root.Write("f.bin", std::string("a\0b", 3));
  auto bytes = ReadFileBytes(p);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, std::string("a\0b", 3));
  EXPECT_EQ(ReadFileBytes(root.path() / "nope").status().code(), absl::StatusCode::kNotFound);
}

// An opener that blocks until released (or cancelled), counting its calls:
// stands in for the scan of a large tree.
struct GatedOpener {
  absl::Notification release;
  std::atomic<int> calls{0};
  CatalogOptions Options() {
    CatalogOptions o;
    o.opener = [this](const std::string& name, const std::string&,
                      const std::atomic<bool>* cancelled) -> SourceOrError {
      ++calls;
      while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        if (cancelled->load()) return absl::CancelledError("cancelled");
      }
      auto s = SyntheticSource::Open(name);
      if (!s.ok()) return s.status();
      return std::shared_ptr<const SampleSource>(*std::move(s));
    };
    return o;
  }
};

// OpenAsync with a patience, answered without the scan's end.
SourceOrError OpenWithPatience(DatasetCatalog& catalog, const std::string& name, absl::Duration patience) {
  absl::Notification answered;
  SourceOrError result = absl::UnknownError("unset");
  catalog.OpenAsync(
      name,
      [&](SourceOrError r) {
        result = std::move(r);
        answered.Notify();
      },
      patience);
  answered.WaitForNotification();
  return result;
}

TEST(DatasetTest, AnOpenWithPatienceNeverWaitsForTheScanAndTheScanRunsOnce) {
  TempDir root;
  GatedOpener gate;
  DatasetCatalog catalog(root.path(), gate.Options());
  const std::string name = "synthetic:16x16:10:2";
  for (int i = 0; i < 3; ++i) {
    auto first = OpenWithPatience(catalog, name, absl::ZeroDuration());  // returns while the scan is blocked
    EXPECT_TRUE(IsStillOpening(first.status())) << first.status();
    EXPECT_FALSE(IsStillCopyingFromStore(first.status())) << "a scan, not a copy";
    EXPECT_NE(first.status().message().find("still being opened"), std::string::npos) << first.status();
  }
  std::atomic<int> answered{0};
  catalog.OpenAsync(name, [&](SourceOrError r) {
    EXPECT_TRUE(r.ok()) << r.status();
    ++answered;
  });
  EXPECT_EQ(answered.load(), 0);  // waits for the scan, on the scan thread
  gate.release.Notify();
  auto opened = catalog.Open(name);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->size(), 10);
  EXPECT_EQ(answered.load(), 1);
  EXPECT_TRUE(OpenWithPatience(catalog, name, absl::ZeroDuration()).ok());
  EXPECT_EQ(gate.calls.load(), 1);
  // Bad names are answered at once, without a scan.
  EXPECT_EQ(OpenWithPatience(catalog, "../x", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(IsStillOpening(OpenWithPatience(catalog, "missing", absl::ZeroDuration()).status()));
}

TEST(DatasetTest, AWaiterOutOfPatienceHearsStillOpeningAndTheScanGoesOn) {
  TempDir root;
  GatedOpener gate;
  DatasetCatalog catalog(root.path(), gate.Options());
  const std::string name = "synthetic:16x16:10:2";
  absl::Notification impatient_answered, patient_answered;
  absl::Status impatient, patient;
  catalog.OpenAsync(name, [&](SourceOrError r) {
    patient = r.status();
    patient_answered.Notify();
  });
  catalog.OpenAsync(
      name,
      [&](SourceOrError r) {
        impatient = r.status();
        impatient_answered.Notify();
      },
      absl::Milliseconds(50));
  ASSERT_TRUE(impatient_answered.WaitForNotificationWithTimeout(absl::Seconds(30)));  // by the timer, gate closed
  EXPECT_TRUE(IsStillOpening(impatient)) << impatient;
  EXPECT_FALSE(patient_answered.HasBeenNotified());
  gate.release.Notify();
  ASSERT_TRUE(patient_answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(patient.ok()) << patient;
  EXPECT_EQ(gate.calls.load(), 1);
}

TEST(DatasetTest, AWaiterOnACopyFromTheStoreHearsItsProgressAndTheScanFollows) {
  TempDir root;
  root.Write("ds/c/a.jpg", "x");  // the copy, as the fetch leaves it
  GatedOpener scan;
  scan.release.Notify();
  CatalogOptions o = scan.Options();
  absl::Notification copied;
  std::atomic<int> fetches{0};
  o.fetch = [&](const std::string& name, bool directory, const std::atomic<bool>* cancelled) {
    EXPECT_EQ(name, "ds");
    EXPECT_TRUE(directory);
    ++fetches;
    while (!copied.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
      if (cancelled->load()) return absl::CancelledError("cancelled");
    }
    return absl::OkStatus();
  };
  o.fetch_progress = [](const std::string& name) {
    EXPECT_EQ(name, "ds");
    return std::string("test://ds: 1.5 of 3.0 MB copied (0.5 MB/s, 3.0 s)");
  };
  o.opener = [inner = o.opener](const std::string&, const std::string& key, const std::atomic<bool>* cancelled) {
    return inner("synthetic:16x16:10:2", key, cancelled);
  };
  DatasetCatalog catalog(root.path(), o);
  auto waiting = OpenWithPatience(catalog, "ds", absl::ZeroDuration());
  EXPECT_TRUE(IsStillOpening(waiting.status())) << waiting.status();
  EXPECT_TRUE(IsStillCopyingFromStore(waiting.status())) << waiting.status();
  EXPECT_NE(waiting.status().message().find("still being copied from its store"), std::string::npos)
      << waiting.status();
  EXPECT_NE(waiting.status().message().find("1.5 of 3.0 MB copied"), std::string::npos) << waiting.status();
  copied.Notify();
  auto opened = catalog.Open("ds");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->size(), 10);
  EXPECT_EQ(fetches.load(), 1);
}

TEST(DatasetTest, StopAnswersWaitersCancelsTheScanAndRefusesNewOpens) {
  TempDir root;
  GatedOpener gate;
  DatasetCatalog catalog(root.path(), gate.Options());
  absl::Notification answered;
  absl::Status got;
  catalog.OpenAsync("synthetic:16x16:10:2", [&](SourceOrError r) {
    got = r.status();
    answered.Notify();
  });
  catalog.Stop();  // the gate is never released: only the cancellation ends the scan
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable) << got;
  EXPECT_NE(got.message().find("shut down"), std::string::npos) << got;
  auto later = OpenWithPatience(catalog, "synthetic:8x8:10:2", absl::ZeroDuration());
  EXPECT_EQ(later.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(IsStillOpening(later.status()));
}  // the destructor joins the cancelled scan

TEST(DatasetTest, RealScansStopWhenCancelled) {
  TempDir root;
  root.Write("ds/c/a.jpg", "x");
  std::atomic<bool> cancelled{true};
  EXPECT_EQ(ImageFolderIndex::Scan(root.path() / "ds", root.path(), 0, &cancelled).status().code(),
            absl::StatusCode::kCancelled);
  cancelled = false;
  EXPECT_TRUE(ImageFolderIndex::Scan(root.path() / "ds", root.path(), 0, &cancelled).ok());
}

}  // namespace
}  // namespace stoker
