#include "dataplane/decode/decoder_threads.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(DecoderThreadsTest, CoresDividedAmongTheClipsBeingDecoded) {
  EXPECT_EQ(SharedDecoderThreads(16, 1), 16);  // a lone clip: every worker's core
  EXPECT_EQ(SharedDecoderThreads(16, 4), 4);
  EXPECT_EQ(SharedDecoderThreads(16, 16), 1);  // every worker decoding: one each
  EXPECT_EQ(SharedDecoderThreads(16, 40), 1);  // never none
  EXPECT_EQ(SharedDecoderThreads(64, 1), kMaxDecoderThreads);
  EXPECT_EQ(SharedDecoderThreads(0, 0), 1);
}

TEST(DecoderThreadsTest, SharesCountWhileTheyLive) {
  const int before = DecoderThreadShare::decoding();
  {
    const DecoderThreadShare fixed(3, 8);
    EXPECT_EQ(fixed.threads(), 3);  // configured: whatever runs beside
    EXPECT_EQ(DecoderThreadShare::decoding(), before + 1);
    const DecoderThreadShare shared(0, 8);
    EXPECT_EQ(shared.threads(), SharedDecoderThreads(8, before + 2));
    EXPECT_EQ(DecoderThreadShare(0, 1).threads(), 1);  // one worker: one thread, as before
    EXPECT_EQ(DecoderThreadShare::decoding(), before + 2);
    EXPECT_EQ(DecoderThreadShare(100, 8).threads(), kMaxDecoderThreads);
  }
  EXPECT_EQ(DecoderThreadShare::decoding(), before);
}

}  // namespace
}  // namespace stoker
