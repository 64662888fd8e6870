#include "storage/storage.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "storage/aws_credentials.h"
#include "storage/http_client.h"
#include "storage/http_storage.h"
#include "storage/s3_storage.h"
#include "storage/url.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

using ::stoker::testing::TempDir;

TEST(UrlTest, ParsesStoresAndRefusesWhatIsNotOne) {
  struct Case {
    const char* text;
    const char* scheme;
    const char* host;
    int port;
    const char* path;
  };
  for (const Case& c :
       {Case{"s3://bucket/a/b", "s3", "bucket", 0, "/a/b"}, Case{"S3://bucket", "s3", "bucket", 0, ""},
        Case{"https://h.example:8443/x/y.tar", "https", "h.example", 8443, "/x/y.tar"},
        Case{"http://127.0.0.1:80/", "http", "127.0.0.1", 80, "/"}, Case{"file:///data/x", "file", "", 0, "/data/x"}}) {
    absl::StatusOr<Url> u = ParseUrl(c.text);
    ASSERT_TRUE(u.ok()) << c.text << ": " << u.status();
    EXPECT_EQ(u->scheme, c.scheme);
    EXPECT_EQ(u->host, c.host);
    EXPECT_EQ(u->port, c.port);
    EXPECT_EQ(u->path, c.path);
  }
  for (const char* bad : {"bucket/key", "gs://b/k", "s3:///key", "http://h:99999/", "http://h:x/",
                          "https://user:secret@h/k", "http://h/k?x=1", "file://otherhost/x"}) {
    absl::StatusOr<Url> u = ParseUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    EXPECT_FALSE(absl::StrContains(u.status().message(), "secret")) << u.status();
  }
  EXPECT_EQ(UriEncode("a b/ü~._-", true), "a%20b/%C3%BC~._-");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriDecode("a%20b%2Fc%zz%4"), "a b/c%zz%4");
  EXPECT_EQ(JoinKey("/base/", "/k/x"), "/base/k/x");
  EXPECT_EQ(TrimSlashes("//a/b//"), "a/b");
  EXPECT_EQ(TrimSlashes("/"), "");
  EXPECT_EQ(ListingIndexKey("train/"), "train/index.txt");
  EXPECT_EQ(ListingIndexKey("train"), "train/index.txt");
  EXPECT_EQ(ListingIndexKey(""), "index.txt");
  EXPECT_TRUE(IsRemoteRoot("s3://b"));
  EXPECT_FALSE(IsRemoteRoot("/data"));
  EXPECT_FALSE(IsRemoteRoot("file:///data"));
}

TEST(UrlTest, BraceRangesExpandAsWebDatasetsDo) {
  auto names = ExpandBraces("train-{000008..000011}.tar");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names,
            (std::vector<std::string>{"train-000008.tar", "train-000009.tar", "train-000010.tar", "train-000011.tar"}));
  auto two = ExpandBraces("{0..1}/s{8..10}");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 6u);
  EXPECT_EQ(two->back(), "1/s10");
  for (const char* bad : {"a{3..1}", "a{x..2}", "a{1..2", "a}", "a{-1..2}"}) {
    EXPECT_FALSE(ExpandBraces(bad).ok()) << bad;
  }
  EXPECT_FALSE(ExpandBraces("{0..999999}{0..999999}").ok()) << "a bound on the names one line makes";
  auto index = ParseIndexFile("ds", "# shards\ntrain-{0..1}.tar\n\n  extra/x.bin  \n");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(*index, (std::vector<std::string>{"ds/train-0.tar", "ds/train-1.tar", "ds/extra/x.bin"}));
}

TEST(LocalStorageTest, StatListReadAndAChangedFileIsRefused) {
  TempDir dir;
  dir.Write("ds/a/1.jpg", "0123456789");
  dir.Write("ds/b/2.jpg", "abc");
  dir.Write("other.txt", "x");
  absl::StatusOr<std::unique_ptr<Storage>> s = OpenStorage(dir.path().string());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->is_local());
  absl::StatusOr<std::vector<ObjectInfo>> list = (*s)->List("ds/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].key, "ds/a/1.jpg");
  EXPECT_EQ((*list)[1].key, "ds/b/2.jpg");
  EXPECT_EQ((*list)[1].size, 3);
  absl::StatusOr<ObjectInfo> info = (*s)->Stat("ds/a/1.jpg");
  ASSERT_TRUE(info.ok());
  std::string out = ">";
  ASSERT_TRUE((*s)->ReadRange(*info, 2, 5, &out).ok());
  EXPECT_EQ(out, ">23456");
  EXPECT_EQ((*s)->ReadRange(*info, 8, 5, &out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*s)->Stat("ds/none.jpg").status().code(), absl::StatusCode::kNotFound);
  dir.Write("ds/a/1.jpg", "0123456789AB");  // rewritten
  absl::Status changed = (*s)->ReadRange(*info, 0, 4, &out);
  EXPECT_EQ(changed.code(), absl::StatusCode::kFailedPrecondition) << changed;
  EXPECT_TRUE(absl::StrContains(changed.message(), "1.jpg")) << changed;
  EXPECT_EQ(out, ">23456") << "a failed read appends nothing";
  EXPECT_FALSE(OpenStorage((dir.path() / "missing").string()).ok());
  EXPECT_TRUE(OpenStorage("file://" + dir.path().string()).ok());
}

TEST(SequentialReaderTest, ReadsInBlocksFrontToBack) {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>(i * 7));
  dir.Write("f", bytes);
  auto s = OpenStorage(dir.path().string());
  ASSERT_TRUE(s.ok());
  auto info = (*s)->Stat("f");
  ASSERT_TRUE(info.ok());
  SequentialReader reader(s->get(), *info, 64);
  std::string got;
  for (int n : {1, 63, 100, 0, 500, 1000}) ASSERT_TRUE(reader.Read(n, &got).ok());
  EXPECT_EQ(got, bytes);
  EXPECT_EQ(reader.position(), 1000);
  ASSERT_TRUE(reader.Read(10, &got).ok());
  EXPECT_EQ(got.size(), 1000u);
}

TEST(BackoffTest, FullJitterUnderAnExponentialCap) {
  const absl::Duration base = absl::Milliseconds(100), max = absl::Seconds(10);
  EXPECT_EQ(BackoffDelay(1, base, max, 0.999), absl::Milliseconds(99.9));
  EXPECT_EQ(BackoffDelay(3, base, max, 0.5), absl::Milliseconds(200));
  EXPECT_EQ(BackoffDelay(30, base, max, 0.5), absl::Seconds(5));
  EXPECT_EQ(BackoffDelay(4, base, max, 0), absl::ZeroDuration());
}

TEST(ListObjectsV2Test, ParsesAPageAndRefusesOtherXml) {
  const std::string xml =
      "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><IsTruncated>true</IsTruncated><NextContinuationToken>tok/+=</NextContinuationToken>"
      "<Contents><Key>p/a.tar</Key><Size>123</Size><ETag>&quot;e1&quot;</ETag>"
      "<LastModified>2026-01-02T03:04:05.000Z</LastModified></Contents>"
      "<Contents><Key>p/b.tar</Key><Size>0</Size><ETag>\"e2\"</ETag></Contents></ListBucketResult>";
  absl::StatusOr<ListPage> page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "tok/+=");
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a.tar");
  EXPECT_EQ(page->objects[0].size, 123);
  EXPECT_EQ(page->objects[0].etag, "\"e1\"");
  EXPECT_GT(page->objects[0].mtime_ns, 0);
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").ok());
  EXPECT_FALSE(ParseListObjectsV2("not xml").ok());
  EXPECT_EQ(XmlErrorCode("<Error><Code>SlowDown</Code><Message>m</Message></Error>"), "SlowDown");
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"}) {
      ::unsetenv(v);
    }
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);  // never 169.254.169.254 from a test
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", (dir_.path() / "credentials").c_str(), 1);
    ::setenv("AWS_CONFIG_FILE", (dir_.path() / "config").c_str(), 1);
  }
  // What a fresh chain finds now (as a new process would).
  static absl::StatusOr<AwsCredentials> Found() {
    AwsCredentialChain chain;
    return chain.Get();
  }
  TempDir dir_;
};

TEST_F(CredentialsTest, TheEnvironmentComesFirstThenTheProfileFiles) {
  dir_.Write("credentials",
             "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
             "[other]\naws_access_key_id=OTHERKEY\naws_secret_access_key=OTHERSECRET\n"
             "aws_session_token = OTHERTOKEN\n");
  dir_.Write("config",
             "[profile proc]\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": "
             "\"PROCKEY\", \"SecretAccessKey\": \"PROCSECRET\", \"Expiration\": "
             "\"2099-01-01T00:00:00Z\"}'\n");
  {
    auto c = Found();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->access_key_id, "FILEKEY");
  }
  ::setenv("AWS_PROFILE", "other", 1);
  {
    auto c = Found();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->session_token, "OTHERTOKEN");
  }
  ::setenv("AWS_PROFILE", "proc", 1);
  {
    auto c = Found();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->access_key_id, "PROCKEY");
    EXPECT_EQ(c->secret_access_key, "PROCSECRET");
    EXPECT_LT(c->expiration, absl::InfiniteFuture());
  }
  ::setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
  {
    auto c = Found();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->access_key_id, "ENVKEY");
    EXPECT_EQ(c->source, "environment");
  }
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::setenv("AWS_PROFILE", "missing", 1);
  absl::Status s = Found().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "profile 'missing'")) << s;
  for (const char* secret : {"FILESECRET", "OTHERSECRET", "PROCSECRET", "ENVSECRET"}) {
    EXPECT_FALSE(absl::StrContains(s.message(), secret));
  }
}

// Credentials are kept until 5 minutes before they expire, then fetched again.
TEST_F(CredentialsTest, CredentialsNearTheirExpiryAreFetchedAgain) {
  const fs::path calls = dir_.path() / "calls";
  const std::string soon = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now() + absl::Minutes(4), absl::UTCTimeZone());
  const std::string later = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now() + absl::Hours(2), absl::UTCTimeZone());
  dir_.Write("config",
             "[profile soon]\ncredential_process = sh -c 'echo x >> " + calls.string() +
                 "; printf \"{\\\"Version\\\": 1, \\\"AccessKeyId\\\": \\\"A\\\", \\\"SecretAccessKey\\\": \\\"S\\\", "
                 "\\\"Expiration\\\": \\\"" +
                 soon +
                 "\\\"}\"'\n"
                 "[profile later]\ncredential_process = sh -c 'echo y >> " +
                 calls.string() +
                 "; printf \"{\\\"Version\\\": 1, \\\"AccessKeyId\\\": \\\"A\\\", \\\"SecretAccessKey\\\": \\\"S\\\", "
                 "\\\"Expiration\\\": \\\"" +
                 later + "\\\"}\"'\n");
  for (const char* profile : {"soon", "later"}) {
    ::setenv("AWS_PROFILE", profile, 1);
    AwsCredentialChain chain;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(chain.Get().ok()) << chain.Get().status();
  }
  std::ifstream in(calls);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "x\nx\nx\ny\n") << "expiring in 4 minutes: every use fetches; in 2 hours: kept";
}

TEST_F(CredentialsTest, CredentialProcessFailuresNameTheProfileNotTheOutput) {
  dir_.Write("config",
             "[profile bad]\ncredential_process = printf 'SECRETGARBAGE'\n"
             "[profile fails]\ncredential_process = false\n");
  for (const char* profile : {"bad", "fails"}) {
    ::setenv("AWS_PROFILE", profile, 1);
    absl::Status s = Found().status();
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(absl::StrContains(s.message(), profile)) << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "SECRETGARBAGE")) << s;
  }
  EXPECT_FALSE(
      ParseCredentialProcessOutput("{\"Version\": 2, \"AccessKeyId\": \"a\", \"SecretAccessKey\": \"b\"}").ok());
  EXPECT_EQ(ParseIni("# c\n[a]\nk = v = w\n\n[profile b]\nx=1\n")["profile b"]["x"], "1");
}

TEST(CredentialsParseTest, EndpointJsonAndStsXml) {
  auto c = ParseEndpointCredentials(
      R"({"Code": "Success", "AccessKeyId": "AK", "SecretAccessKey": "SK", "Token": "TK",
          "Expiration": "2030-01-02T03:04:05Z"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->session_token, "TK");
  EXPECT_LT(c->expiration, absl::InfiniteFuture());
  EXPECT_FALSE(ParseEndpointCredentials("{\"AccessKeyId\": 1}").ok());
  auto sts = ParseWebIdentityResponse(
      "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
      "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIA1</AccessKeyId>"
      "<SecretAccessKey>S1</SecretAccessKey><SessionToken>T1</SessionToken>"
      "<Expiration>2030-01-02T03:04:05Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
      "</AssumeRoleWithWebIdentityResponse>");
  ASSERT_TRUE(sts.ok()) << sts.status();
  EXPECT_EQ(sts->access_key_id, "ASIA1");
  EXPECT_EQ(sts->session_token, "T1");
  EXPECT_FALSE(
      ParseWebIdentityResponse("<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>").ok());
}

}  // namespace
}  // namespace stoker
