/* Stoker op plugins: the C ABI between a data server (or local mode) and a
 * shared object that adds ops to the pipeline grammar. A plugin exports one
 * function, stoker_op_plugin(), returning a table of its ops; the server
 * loads every plugin in --op-plugins DIR at start, refuses one whose
 * abi_version differs from STOKER_OP_PLUGIN_ABI_VERSION (naming the file),
 * and registers each op under its name, which has a dot ("team.op") so that
 * it never collides with a built-in op.
 *
 * Threading: create/destroy may run more than once per session, and
 * concurrently for different sessions; apply runs on the server's worker
 * threads, concurrently, with the same state: it must only read the state. The image, the arguments and the generator
 * belong to the caller for the duration of the call.
 *
 * C++ plugins use the header-only wrapper in stoker/op_plugin.hpp. */
#ifndef STOKER_OP_PLUGIN_H_
#define STOKER_OP_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load-bearing: bumped on any change to the structs below. */
#define STOKER_OP_PLUGIN_ABI_VERSION 2

enum StokerArgumentType { STOKER_ARG_INT = 1, STOKER_ARG_FLOAT = 2, STOKER_ARG_BOOL = 3, STOKER_ARG_STRING = 4 };

/* One argument from the pipeline text: name=value, bound to the op's
 * params in order when given by position. */
typedef struct StokerArgument {
  const char* name;
  int32_t type;             /* StokerArgumentType */
  int64_t int_value;        /* STOKER_ARG_INT, and STOKER_ARG_BOOL (0 or 1) */
  double float_value;       /* STOKER_ARG_FLOAT */
  const char* string_value; /* STOKER_ARG_STRING, NUL-terminated */
} StokerArgument;

/* An 8-bit image, height x width x channels (3: RGB), rows `stride` bytes
 * apart. */
typedef struct StokerImage {
  uint8_t* data;
  int32_t height, width, channels;
  int64_t stride;
} StokerImage;

/* The sample's random generator (the same stream the built-in ops draw from,
 * seeded from the session's seed, the epoch and the sample index). */
typedef struct StokerRng {
  void* state;
  uint64_t (*next)(void* state); /* 64 uniform random bits */
} StokerRng;

/* For an op that makes an image of another size: a new image of
 * height x width x 3 that replaces the input once apply returns 0 (NULL
 * when over the server's pixel limit). */
typedef struct StokerAllocator {
  void* host;
  StokerImage* (*allocate)(void* host, int32_t height, int32_t width);
} StokerAllocator;

/* The sample's value fields (a caption, a class, tokens...), encoded as
 * stoker.proto's FieldKind says: kind 2 class, 3 classes, 11 tokens: int32
 * little-endian values; 12 number: one float32; 4 text (UTF-8), 5 bytes,
 * 6 json: the bytes. Empty when the session has none. */
typedef struct StokerField {
  const char* name;
  int32_t kind;
  const uint8_t* data;
  int64_t size; /* bytes */
} StokerField;

typedef struct StokerFields {
  int32_t count;
  const StokerField* fields;
  void* host;
  /* Replaces field `index` with `size` bytes at `data` (copied) once apply
   * returns 0; the host checks it as its kind (UTF-8, JSON, one class, the
   * session's max_field_bytes) and fails the sample otherwise. Returns 0,
   * or nonzero for an index out of range. */
  int32_t (*replace)(void* host, int32_t index, const uint8_t* data, int64_t size);
} StokerFields;

enum StokerOutputSize {
  STOKER_SIZE_KEEPS = 0, /* the output has the input's size */
  STOKER_SIZE_FIXED = 1, /* the output is always *height x *width */
  STOKER_SIZE_VARIES = 2 /* the output's size depends on the input */
};

typedef struct StokerOpInfo {
  const char* name;          /* "team.op": lower-case words joined by dots */
  const char* doc;           /* one line, for the reference */
  const char* const* params; /* positional parameter names, NULL-terminated (may be NULL) */
  int32_t random;            /* nonzero when apply draws from the generator */
  /* Parses and checks the arguments; returns the op's state, or NULL with a
   * message (naming the argument and what is allowed) in error. */
  void* (*create)(const StokerArgument* args, int32_t num_args, char* error, size_t error_size);
  void (*destroy)(void* state);
  int32_t (*output_size)(const void* state, int32_t* height, int32_t* width); /* StokerOutputSize */
  /* Transforms *image in place, or into an image from allocator, and may
   * replace fields. Returns 0, or nonzero with a message in error (the
   * sample fails with it, and its fields stay as they were). */
  int32_t (*apply)(const void* state, StokerImage* image, StokerRng* rng, StokerAllocator* allocator,
                   StokerFields* fields, char* error, size_t error_size);
} StokerOpInfo;

typedef struct StokerPluginInfo {
  uint32_t abi_version; /* STOKER_OP_PLUGIN_ABI_VERSION when built */
  const char* name;     /* the plugin's name, for logs */
  int32_t num_ops;
  const StokerOpInfo* ops;
} StokerPluginInfo;

/* The entry point every plugin exports. */
#define STOKER_OP_PLUGIN_ENTRY "stoker_op_plugin"
typedef const StokerPluginInfo* (*StokerOpPluginEntry)(void);

#ifdef __cplusplus
}
#endif

#endif /* STOKER_OP_PLUGIN_H_ */
