#include "server/storage_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

std::string Text(const StorageMetrics& metrics) { return prometheus::TextSerializer().Serialize(metrics.Collect()); }

TEST(StorageMetricsTest, ExportsTheCountersRetriesLatencyAndCache) {
  StorageReading reading;
  reading.store = "s3";
  reading.counters.requests = 12;
  reading.counters.bytes = 3 << 20;
  reading.counters.retries_by_reason = {{"503", 2}, {"reset", 1}};
  reading.counters.latency_counts.assign(std::size(kStorageLatencyBounds) + 1, 0);
  reading.counters.latency_counts[0] = 4;                                 // <= 1 ms
  reading.counters.latency_counts[std::size(kStorageLatencyBounds)] = 1;  // past 30 s
  reading.counters.latency_seconds = 31.5;
  reading.cache.objects_reused = 7;
  reading.cache.objects_fetched = 3;
  reading.cache.bytes_cached = 1000;
  reading.cache_capacity_bytes = 5000;
  reading.cache.ensure_seconds = 2.5;
  StorageMetrics metrics([&] { return reading; });
  const std::string text = Text(metrics);
  EXPECT_NE(text.find("stoker_server_storage_requests_total{store=\"s3\"} 12"), std::string::npos) << text;
  EXPECT_NE(text.find("stoker_server_storage_received_bytes_total{store=\"s3\"} 3145728"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_retries_total{reason=\"503\",store=\"s3\"} 2"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_retries_total{reason=\"reset\",store=\"s3\"} 1"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_request_seconds_bucket{store=\"s3\",le=\"0.001\"} 4"), std::string::npos)
      << text;
  EXPECT_NE(text.find("stoker_server_storage_request_seconds_bucket{store=\"s3\",le=\"30\"} 4"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_request_seconds_bucket{store=\"s3\",le=\"+Inf\"} 5"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_request_seconds_count{store=\"s3\"} 5"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_objects_total{result=\"hit\",store=\"s3\"} 7"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_objects_total{result=\"fetched\",store=\"s3\"} 3"),
            std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_bytes{store=\"s3\"} 1000"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_capacity_bytes{store=\"s3\"} 5000"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_fetch_seconds_total{store=\"s3\"} 2.5"), std::string::npos);

  reading.counters.requests = 13;  // read again at each scrape
  EXPECT_NE(Text(metrics).find("stoker_server_storage_requests_total{store=\"s3\"} 13"), std::string::npos);
}

TEST(StorageMetricsTest, ForMirrorReadsTheMirrorsStatsAfterAnEnsure) {
  stoker::testing::TempDir dir;
  dir.Write("store/ds/a.bin", std::string(100, 'a'));
  dir.Write("store/ds/b.bin", std::string(50, 'b'));
  auto store = OpenStorage((dir.path() / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  MirrorOptions options;
  options.cache_dir = dir.path() / "cache";
  options.cache_bytes = 4096;
  auto mirror = StoreMirror::Create(*std::move(store), options);
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  std::shared_ptr<StorageMetrics> metrics = StorageMetrics::ForMirror(mirror->get());
  ASSERT_TRUE((*mirror)->Ensure("ds", /*directory=*/true).ok());
  const std::string text = Text(*metrics);
  EXPECT_NE(text.find("stoker_server_storage_cache_objects_total{result=\"fetched\",store=\"file\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stoker_server_storage_cache_objects_bytes_total{result=\"fetched\",store=\"file\"} 150"),
            std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_bytes{store=\"file\"} 150"), std::string::npos);
  EXPECT_NE(text.find("stoker_server_storage_cache_capacity_bytes{store=\"file\"} 4096"), std::string::npos);
}

TEST(StorageMetricsTest, StoreKindIsTheScheme) {
  EXPECT_EQ(StoreKind("s3://bucket/prefix"), "s3");
  EXPECT_EQ(StoreKind("https://host/path"), "https");
  EXPECT_EQ(StoreKind("/data"), "file");
  EXPECT_EQ(StoreKind("catalog:/etc/stoker/datasets.txt"), "catalog");
}

}  // namespace
}  // namespace stoker
