#include "server/dataset.h"

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
  root.Write("ds/apple/notes.txt", "x");  // not an image extension
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

}  // namespace
}  // namespace stoker
