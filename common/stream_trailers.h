// Trailing metadata a data server sets when it ends a call with an error, so
// that the client blames the right thing, and the token header. Load-bearing: server and
// client of different versions must agree on these keys.
#ifndef STOKER_COMMON_STREAM_TRAILERS_H_
#define STOKER_COMMON_STREAM_TRAILERS_H_

namespace stoker {

// The index of the batch whose failure ended the stream; the client blames
// that batch and not the others it had outstanding.
inline constexpr char kFailedBatchTrailer[] = "stoker-failed-batch";
// ...and its epoch (a stream carries the batches of more than one epoch when
// the next epoch starts while the current one drains).
inline constexpr char kFailedEpochTrailer[] = "stoker-failed-epoch";
// Present when the session itself was refused (its config, or another copy
// of the dataset): the client blames no batch and gives the server no work.
inline constexpr char kSessionRefusedTrailer[] = "stoker-session-refused";
// With RESOURCE_EXHAUSTED on a refused session: the server is full (its
// --max-sessions or --max-streams); milliseconds after which to try it
// again. The client counts the server as full, not failed, and uses others.
inline constexpr char kRetryAfterTrailer[] = "stoker-retry-after-ms";

// On an UNAVAILABLE OpenSession: the server is up and still scanning the
// dataset; the client asks again (up to its open_timeout) instead of giving up.
// Its value is kDatasetCopyingFromStore while the server copies the dataset
// from a remote store into its cache (the client's verdict says "storage"),
// else "1".
inline constexpr char kDatasetOpeningTrailer[] = "stoker-dataset-opening";
inline constexpr char kDatasetCopyingFromStore[] = "store";

// Where a client puts its token, on every DataService call:
// "authorization: Bearer <token>".
inline constexpr char kAuthorizationHeader[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

}  // namespace stoker

#endif  // STOKER_COMMON_STREAM_TRAILERS_H_
