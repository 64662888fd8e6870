#include "storage/catalog_storage.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

absl::Status Parse(const std::string& text) { return OpenCatalogStorage("cat.txt", text, {}).status(); }

TEST(CatalogStorageTest, ReadsEntriesWithCommentsAndBraceLists) {
  auto catalog = OpenCatalogStorage("cat.txt",
                                    "# datasets\n"
                                    "imagenet/train  https://host/data/imagenet/train/  # a directory\n"
                                    "\n"
                                    "laion\thttps://host/laion/part-{000..009}.tar\n"
                                    "coco s3://bucket/coco\n",
                                    {});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ((*catalog)->root(), "catalog:cat.txt");
  EXPECT_EQ((*catalog)->Describe("imagenet/train/a.tar"), "https://host/data/imagenet/train/a.tar");
  EXPECT_EQ((*catalog)->Describe("laion/part-003.tar"), "https://host/laion/part-003.tar");
  EXPECT_EQ((*catalog)->Describe("coco/ann.json"), "s3://bucket/coco/ann.json");
  EXPECT_EQ((*catalog)->Describe("laion"), "laion (https://host/laion/part-{000..009}.tar)");
  EXPECT_EQ((*catalog)->Stat("elsewhere/x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*catalog)->List("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(CatalogStorageTest, ABadLineIsAnErrorNamingIt) {
  EXPECT_NE(Parse("a https://h/x\nb\n").message().find("cat.txt line 2: expected a dataset name and its URL"),
            std::string::npos);
  EXPECT_NE(Parse("a https://h/x\na https://h/y\n").message().find("line 2: 'a' is named twice"), std::string::npos);
  EXPECT_NE(Parse("../up https://h/x\n").message().find("is not a dataset name"), std::string::npos);
  EXPECT_NE(Parse("a https://h/x\na/b https://h/y\n").message().find("would nest"), std::string::npos);
  EXPECT_NE(Parse("a /local/dir\n").message().find("is not an s3://, http:// or https:// URL"), std::string::npos);
  EXPECT_NE(Parse("a ftp://h/x\n").message().find("line 1"), std::string::npos);
  EXPECT_NE(Parse("a https://h/p-{1..}.tar\n").message().find("line 1"), std::string::npos);
  EXPECT_NE(Parse("# nothing\n").message().find("no datasets"), std::string::npos);
}

TEST(CatalogStorageTest, OpenStorageReadsACatalogFileAndCallsItRemote) {
  EXPECT_TRUE(IsRemoteRoot("catalog:/etc/stoker/datasets.txt"));
  auto missing = OpenStorage("catalog:/nonexistent/datasets.txt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/datasets.txt cannot be read"), std::string::npos);
}

}  // namespace
}  // namespace stoker
