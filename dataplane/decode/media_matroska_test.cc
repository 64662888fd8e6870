// Matroska attachments are hidden from FFmpeg's demuxer: the Void that
// replaces each Attachments element (in the Segment or pointed to by the
// SeekHead), and an MKV with a large attachment whose video and audio decode
// without reading it.
#include "dataplane/decode/media_matroska.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/audio_decoder.h"
#include "dataplane/decode/video_decoder.h"
#include "gtest/gtest.h"
#include "tests/testdata/ffmpeg_files.h"
#include "tests/testdata/peak_rss.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;
using stoker_media::HideMatroskaAttachments;
using stoker_media::InputPatch;

using ::stoker::testing::HaveFfmpeg;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// An MKV of 1 s of video and audio, with a `attachment_bytes` attachment.
std::string MkvWithAttachment(int64_t attachment_bytes, const std::string& extra = "") {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("stoker_mkv_test_", getpid());
  fs::create_directories(dir);
  { std::ofstream(dir / "blob.bin", std::ios::binary) << std::string(static_cast<size_t>(attachment_bytes), 'Z'); }
  const std::string cmd = absl::StrCat(
      "ffmpeg -v error -y -f lavfi -i testsrc=d=1:s=64x48:r=10 -f lavfi -i sine=d=1:r=16000 -c:v mpeg4 -c:a flac ",
      extra, " -attach ", (dir / "blob.bin").string(), " -metadata:s:t mimetype=application/octet-stream ",
      (dir / "a.mkv").string(), " </dev/null");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string bytes = ReadAll(dir / "a.mkv");
  fs::remove_all(dir);
  return bytes;
}

// The bytes the demuxer reads: the file with the patches over it.
std::string Patched(std::string bytes, const std::vector<InputPatch>& patches) {
  for (const InputPatch& p : patches) bytes.replace(static_cast<size_t>(p.offset), p.bytes.size(), p.bytes);
  return bytes;
}

TEST(MatroskaTest, AnAttachmentBecomesAVoidOfTheSameLength) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  const std::string mkv = MkvWithAttachment(100000);
  const auto* data = reinterpret_cast<const uint8_t*>(mkv.data());
  const std::vector<InputPatch> patches = HideMatroskaAttachments(data, static_cast<int64_t>(mkv.size()));
  ASSERT_EQ(patches.size(), 1u);
  const InputPatch& p = patches[0];
  EXPECT_EQ(mkv.substr(static_cast<size_t>(p.offset), 4), "\x19\x41\xA4\x69");  // the Attachments ID it replaces
  ASSERT_EQ(p.bytes.size(), 9u);
  EXPECT_EQ(static_cast<uint8_t>(p.bytes[0]), 0xEC);  // Void
  EXPECT_EQ(static_cast<uint8_t>(p.bytes[1]), 0x01);  // an 8-byte size
  uint64_t payload = 0;
  for (int i = 2; i < 9; ++i) payload = (payload << 8) | static_cast<uint8_t>(p.bytes[static_cast<size_t>(i)]);
  // The Void spans the attachment's bytes.
  const size_t blob = mkv.find(std::string(100000, 'Z'));
  ASSERT_NE(blob, std::string::npos);
  EXPECT_LT(static_cast<size_t>(p.offset), blob);
  EXPECT_GE(static_cast<size_t>(p.offset) + 9 + payload, blob + 100000);
  // Nothing else is touched; a file that is not Matroska gets no patches.
  EXPECT_TRUE(HideMatroskaAttachments(data, 4).empty());
  const std::string not_mkv = "RIFF\x10\0\0\0WAVEfmt ";
  EXPECT_TRUE(HideMatroskaAttachments(reinterpret_cast<const uint8_t*>(not_mkv.data()), 16).empty());
}

TEST(MatroskaTest, TruncatedAndHostileHeadersGiveNoPatchesOrBoundedOnes) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  const std::string mkv = MkvWithAttachment(5000);
  for (size_t cut = 0; cut < mkv.size(); cut += 97) {
    for (const InputPatch& p :
         HideMatroskaAttachments(reinterpret_cast<const uint8_t*>(mkv.data()), static_cast<int64_t>(cut))) {
      EXPECT_LE(p.offset + static_cast<int64_t>(p.bytes.size()), static_cast<int64_t>(cut));
    }
  }
}

TEST(MatroskaTest, VideoAndAudioOfAnMkvWithA100MBAttachmentDecodeWithoutReadingIt) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  const std::string mkv = MkvWithAttachment(int64_t{100} << 20);
  VideoLimits limits;
  const int64_t growth = testing::PeakRssGrowth([&] {
    absl::StatusOr<VideoIndex> index = IndexVideo(mkv, limits);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(index->pts.size(), 10u);
    std::vector<uint8_t> frames(static_cast<size_t>(2 * 64 * 48 * 3));
    absl::Status decoded = DecodeVideoFrames(mkv, limits, {index->pts[0], index->pts[5]}, 64, 48, frames.data());
    EXPECT_TRUE(decoded.ok()) << decoded;
    AudioDecodeOptions o;
    absl::StatusOr<Waveform> audio = DecodeAudio(mkv, o);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->frames, 16000);
  });
  if (growth < 0) GTEST_SKIP() << testing::PeakRssSkipReason();
  // Read, the attachment would take 200 MB (its bytes and the stream's copy).
  EXPECT_LT(growth, int64_t{40} << 20) << "peak RSS grew by " << growth;
}

}  // namespace
}  // namespace stoker
