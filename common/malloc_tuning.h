// Process-wide glibc malloc settings for moving tens of MB per batch.
// By default glibc serves large allocations (gRPC's receive slices, batch
// buffers) with fresh mmap()s and trims freed memory back to the kernel, so
// every batch pays page faults and zeroing on memory it just freed; measured
// here, that halves loopback goodput. Call once at start-up from main(), before
// threads start. Libraries never call it on their own.
#ifndef STOKER_COMMON_MALLOC_TUNING_H_
#define STOKER_COMMON_MALLOC_TUNING_H_

namespace stoker {

// Keeps allocations up to 256 MiB on the heap and freed memory up to 1 GiB
// in the process for reuse. Returns false if glibc refused a setting.
bool TuneMallocForLargeBuffers();

}  // namespace stoker

#endif  // STOKER_COMMON_MALLOC_TUNING_H_
