/* Stoker's client as a C ABI: the one interface libstoker_client.so exports.
 *
 * A training job in C, C++ (include/stoker/client.h wraps this header) or any
 * language that calls C opens a client on data servers (or on local workers
 * over a data root), starts epochs and takes ready batches: the image tensor
 * (on the CPU or a CUDA device), the labels and each field asked for.
 *
 * Conventions:
 * - Every call that can fail returns a stoker_code: STOKER_OK (0) or one of
 *   the status codes below (gRPC's numbering). The message of the calling
 *   thread's last failure is stoker_last_error().
 * - Handles are opaque. What a call hands out is released by the matching
 *   call named beside it (stoker_options_free, stoker_client_close,
 *   stoker_batch_release, stoker_free); pointers into a batch stay valid
 *   until the batch is released.
 * - A client is used by one thread at a time; distinct clients are
 *   independent.
 * - No symbol of the implementation (gRPC, protobuf, Abseil, OpenCV, the C++
 *   standard library's) crosses this boundary, so the library works whatever
 *   the caller's compiler settings, standard library ABI included.
 */
#ifndef STOKER_C_API_H_
#define STOKER_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. stoker_abi_version() returns the library's;
 * a program checks that they are equal before any other call. It grows when a
 * declaration here changes incompatibly; additions keep it. */
#define STOKER_ABI_VERSION 1

typedef enum stoker_code {
  STOKER_OK = 0,
  STOKER_CANCELLED = 1,
  STOKER_UNKNOWN = 2,
  STOKER_INVALID_ARGUMENT = 3,
  STOKER_DEADLINE_EXCEEDED = 4,
  STOKER_NOT_FOUND = 5,
  STOKER_ALREADY_EXISTS = 6,
  STOKER_PERMISSION_DENIED = 7,
  STOKER_RESOURCE_EXHAUSTED = 8,
  STOKER_FAILED_PRECONDITION = 9,
  STOKER_ABORTED = 10,
  STOKER_OUT_OF_RANGE = 11,
  STOKER_UNIMPLEMENTED = 12,
  STOKER_INTERNAL = 13,
  STOKER_UNAVAILABLE = 14,
  STOKER_DATA_LOSS = 15,
  STOKER_UNAUTHENTICATED = 16
} stoker_code;

typedef struct stoker_options stoker_options;
typedef struct stoker_client stoker_client;
typedef struct stoker_batch stoker_batch;

int stoker_abi_version(void);
/* The library's version, e.g. "0.9.0". */
const char* stoker_version(void);
/* The message of this thread's last failed call ("" if none); valid until
 * this thread's next call into the library. */
const char* stoker_last_error(void);
/* Releases memory the library handed out (state bytes, stats text). */
void stoker_free(void* p);

/* --- options ---
 * The loader's options, as docs/reference/python.md's options table lists
 * them (include/stoker/client_options.inc is the one description): each by its C++
 * name, e.g. "servers", "dataset", "pipeline", "fields", "batch_size",
 * "seed", "rank", "world_size", "device", "prefetch". Unset options keep
 * their defaults. */
stoker_options* stoker_options_new(void);
void stoker_options_free(stoker_options* options);
/* Sets option `name` from its text: a number as written in C ("256", "0.5",
 * "1e-3"), a bool as "true"/"false"/"1"/"0", a string as is, a list as
 * comma-separated items ("a:50051,b:50051"; "0.485,0.456,0.406").
 * INVALID_ARGUMENT names an unknown option or a value that does not read as
 * the option's type. The device is "cpu", "cuda" or "cuda:N". */
stoker_code stoker_options_set(stoker_options* options, const char* name, const char* value);
/* The options there are: their number, and option i's name, type ("int",
 * "double", "bool", "std::string", ...), unit and help (static strings);
 * NULL past the end. */
int stoker_option_count(void);
const char* stoker_option_name(int i);
const char* stoker_option_type(int i);
const char* stoker_option_unit(int i);
const char* stoker_option_help(int i);

/* --- the client --- */
/* Checks every option (the pipeline and fields texts included), connects to
 * the servers and/or starts the local workers and opens the session. */
stoker_code stoker_client_open(const stoker_options* options, stoker_client** out);
/* Stops the streams and frees the client. Every batch it handed out must be
 * released before (stoker/client.h's Batch keeps its client open). */
void stoker_client_close(stoker_client* client);

int64_t stoker_client_num_samples(const stoker_client* client);
int64_t stoker_client_batches_per_epoch(const stoker_client* client);
/* The epoch the next batches come from: the running one (a restored
 * state's after stoker_client_restore), else the selected one. A job that
 * resumes reads it to continue its own epoch loop there. */
int64_t stoker_client_epoch(const stoker_client* client);

/* Selects the epoch the next batches come from (its order and
 * augmentation); the first is 0 unless set, and each epoch's end selects the
 * one after it. The next stoker_client_next starts it; a running epoch of
 * another number is abandoned, and one of this number (a restored state's
 * included) continues. */
stoker_code stoker_client_set_epoch(stoker_client* client, int64_t epoch);

/* The next batch of the running epoch (starting the selected epoch if none
 * is running): *out is the batch, or NULL once the epoch has ended (the next
 * call starts the epoch after it). On CUDA, work queued afterwards on
 * `cuda_stream` (a cudaStream_t; NULL: the legacy default stream) sees the
 * batch ready; the image tensor's cuda_event is recorded when it is. */
stoker_code stoker_client_next(stoker_client* client, void* cuda_stream, stoker_batch** out);

/* Where this rank stands, for a checkpoint (mid-epoch too): opaque bytes
 * (*data from malloc: stoker_free), with the dataset, seed, batch size and
 * order they were made under. */
stoker_code stoker_client_state(const stoker_client* client, void** data, size_t* size);
/* Continues from a saved state: the next batches are exactly the saved
 * epoch's that this rank had not yet received, with the same content.
 * FAILED_PRECONDITION names what differs when the state was saved under
 * another dataset, seed, batch size or rank. */
stoker_code stoker_client_restore(stoker_client* client, const void* data, size_t size);

/* The run's statistics and the bottleneck verdict as one JSON object
 * (*json from malloc: stoker_free), with the keys Python's Loader.stats()
 * has from the client: images_per_second, starved_percent, bottleneck,
 * bottleneck_explanation, bottleneck_figures, device_path, ... (a figure
 * that is not a number is null). */
stoker_code stoker_client_stats_json(const stoker_client* client, char** json);

/* --- a batch --- */
typedef enum stoker_dtype {
  STOKER_FLOAT32 = 0,
  STOKER_FLOAT16 = 1,
  STOKER_BFLOAT16 = 2,
  STOKER_UINT8 = 3,
  STOKER_INT16 = 4
} stoker_dtype;

typedef enum stoker_layout { STOKER_NCHW = 0, STOKER_NHWC = 1, STOKER_LAYOUT_OTHER = 2 } stoker_layout;

#define STOKER_MAX_DIMS 8

/* Fields of fixed width (an enum's size is the compiler's choice): dtype
 * holds a stoker_dtype, layout a stoker_layout. */
typedef struct stoker_tensor {
  void* data;     /* the slot: host memory, or device memory on CUDA */
  int32_t dtype;  /* stoker_dtype */
  int32_t layout; /* stoker_layout: images NCHW or NHWC; audio, video and targets OTHER */
  int32_t ndim;
  int64_t shape[STOKER_MAX_DIMS];
  int32_t device;   /* CUDA device ordinal; -1: host memory */
  void* cuda_event; /* cudaEvent_t recorded when data is ready; NULL on the host */
} stoker_tensor;

typedef struct stoker_field {
  const char* name;
  const char* kind;   /* "text", "bytes", "class", "boxes", "tokens", ... */
  const void* values; /* every sample's values, concatenated */
  size_t bytes;
  /* batch size + 1 byte offsets into `values`, from 0 to `bytes`: sample
   * i's values are bytes [offsets[i], offsets[i + 1]) (int32 little-endian
   * for class and classes, float32 items of item_shape for boxes, keypoints
   * and masks, the member's bytes for text and bytes). */
  const int64_t* offsets;
  int64_t num_offsets;
  int32_t item_ndim; /* the shape of one item (e.g. {4} for a box); 0: scalar */
  const int64_t* item_shape;
} stoker_field;

int64_t stoker_batch_size(const stoker_batch* batch);
int64_t stoker_batch_epoch(const stoker_batch* batch);
int64_t stoker_batch_index(const stoker_batch* batch);
/* The image tensor (the batch's sample, whatever the pipeline makes). */
stoker_code stoker_batch_image(const stoker_batch* batch, stoker_tensor* out);
/* With MixUp or CutMix (options mixup_alpha, cutmix_alpha): the mixed soft
 * targets, float32 [N, num_classes] on the image's device and ready with it,
 * which replace the labels for the loss. NOT_FOUND without MixUp/CutMix. */
stoker_code stoker_batch_targets(const stoker_batch* batch, stoker_tensor* out);
/* stoker_batch_size labels (class ids; before MixUp/CutMix's mixing) and
 * sample indices. */
const int32_t* stoker_batch_labels(const stoker_batch* batch);
const int64_t* stoker_batch_sample_indices(const stoker_batch* batch);
/* The fields the options asked for, in their order. */
int stoker_batch_field_count(const stoker_batch* batch);
stoker_code stoker_batch_field(const stoker_batch* batch, int i, stoker_field* out);
/* Gives the slot back once the work queued so far on `cuda_stream` (NULL:
 * the legacy default stream) has run; frees the batch. */
void stoker_batch_release(stoker_batch* batch, void* cuda_stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STOKER_C_API_H_ */
