// Threads for one video clip's decoder. The worker pool has one worker per
// core (its size is the budget), so while it decodes as many clips as it
// has workers each decoder gets one thread; a session decoding few long
// clips (a small batch, a shallow prefetch, the pool's only job) would
// leave cores idle, so each decoder gets the budget divided among the clips
// being decoded in this process when it starts. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_DECODER_THREADS_H_
#define STOKER_DATAPLANE_DECODE_DECODER_THREADS_H_

namespace stoker {

// More threads than this gain nothing on a clip (FFmpeg's frame threads
// each hold a frame in flight).
inline constexpr int kMaxDecoderThreads = 16;

// `budget` threads divided among `decoding` clips (this one included): at
// least 1, at most kMaxDecoderThreads.
int SharedDecoderThreads(int budget, int decoding);

// One clip being decoded, counted for as long as it lives.
class DecoderThreadShare {
 public:
  // configured > 0: that many threads whatever runs beside (the server's
  // --video-decoder-threads); 0: `budget` (the pool's workers) shared as
  // above.
  DecoderThreadShare(int configured, int budget);
  ~DecoderThreadShare();
  DecoderThreadShare(const DecoderThreadShare&) = delete;
  DecoderThreadShare& operator=(const DecoderThreadShare&) = delete;

  int threads() const { return threads_; }
  // Clips being decoded in this process now.
  static int decoding();

 private:
  int threads_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_DECODER_THREADS_H_
