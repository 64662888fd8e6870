/* An epoch through Stoker's C ABI (include/stoker/c_api.h), in plain C:
 * the options from the command line as name=value, then every batch of the
 * asked-for epochs, each sample's index printed with its batch, and the run's
 * statistics. Build: cc -std=c99 epoch.c $(pkg-config --cflags --libs stoker-client)
 *
 *   epoch [--epochs N] [--first-epoch E] name=value...
 *   epoch --epochs 1 servers=127.0.0.1:50051 dataset=train batch_size=64 \
 *         pipeline='center_crop(224)' device=cpu dtype=uint8
 *
 * Output: "batch EPOCH INDEX SIZE: i0 i1 ..." per batch, "field NAME KIND
 * BYTES" per field of the first batch, "images N" per epoch, then "stats
 * {json}". Exit status 0, or 1 with the library's message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stoker/c_api.h"

static int fail(const char* what) {
  fprintf(stderr, "epoch: %s: %s\n", what, stoker_last_error());
  return 1;
}

int main(int argc, char** argv) {
  long epochs = 1, first_epoch = 0;
  stoker_options* options;
  stoker_client* client;
  int i;
  long e;
  if (stoker_abi_version() != STOKER_ABI_VERSION) {
    fprintf(stderr, "epoch: the library's ABI is %d, this program's %d\n", stoker_abi_version(), STOKER_ABI_VERSION);
    return 1;
  }
  options = stoker_options_new();
  for (i = 1; i < argc; ++i) {
    char* eq;
    if (strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) {
      epochs = strtol(argv[++i], NULL, 10);
      continue;
    }
    if (strcmp(argv[i], "--first-epoch") == 0 && i + 1 < argc) {
      first_epoch = strtol(argv[++i], NULL, 10);
      continue;
    }
    eq = strchr(argv[i], '=');
    if (eq == NULL) {
      fprintf(stderr, "epoch: '%s' is not name=value\n", argv[i]);
      return 2;
    }
    *eq = '\0';
    if (stoker_options_set(options, argv[i], eq + 1) != STOKER_OK) return fail("options");
  }
  if (stoker_client_open(options, &client) != STOKER_OK) return fail("open");
  stoker_options_free(options);
  for (e = first_epoch; e < first_epoch + epochs; ++e) {
    long images = 0;
    int first = 1;
    if (stoker_client_set_epoch(client, e) != STOKER_OK) return fail("set_epoch");
    for (;;) {
      stoker_batch* batch;
      stoker_tensor image;
      const int64_t* indices;
      int64_t n, k;
      int f;
      if (stoker_client_next(client, NULL, &batch) != STOKER_OK) return fail("next");
      if (batch == NULL) break; /* the epoch's end */
      if (stoker_batch_image(batch, &image) != STOKER_OK) return fail("image");
      n = stoker_batch_size(batch);
      if (image.ndim < 1 || image.shape[0] != n) {
        fprintf(stderr, "epoch: an image tensor of %d dimensions for %ld samples\n", image.ndim, (long)n);
        return 1;
      }
      indices = stoker_batch_sample_indices(batch);
      printf("batch %ld %ld %ld:", (long)stoker_batch_epoch(batch), (long)stoker_batch_index(batch), (long)n);
      for (k = 0; k < n; ++k) printf(" %ld", (long)indices[k]);
      printf("\n");
      for (f = 0; first && f < stoker_batch_field_count(batch); ++f) {
        stoker_field field;
        if (stoker_batch_field(batch, f, &field) != STOKER_OK) return fail("field");
        printf("field %s %s %lu\n", field.name, field.kind, (unsigned long)field.bytes);
      }
      first = 0;
      images += (long)n;
      stoker_batch_release(batch, NULL);
    }
    printf("images %ld\n", images);
  }
  {
    char* stats;
    if (stoker_client_stats_json(client, &stats) != STOKER_OK) return fail("stats");
    printf("stats %s\n", stats);
    stoker_free(stats);
  }
  stoker_client_close(client);
  return 0;
}
