// Host memory for batch image bytes. HostBufferPool recycles freed buffers so
// that steady-state streaming allocates (and page-faults) nothing: a fresh
// tens-of-MB allocation per batch costs more than the copy into it. With CUDA
// the pool allocates pinned memory (cudaHostAlloc), so the one copy of the
// payload, from gRPC's receive buffers, lands where the DMA to the GPU reads.
// The pool is thread-safe; a HostBuffer is a move-only value that returns its
// memory to the pool (if the pool still exists) when destroyed. Contents are
// left uninitialised: the receive path overwrites every byte.
#ifndef STOKER_CLIENT_DEVICE_HOST_BUFFER_H_
#define STOKER_CLIENT_DEVICE_HOST_BUFFER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

// How a pool gets and returns memory; a value (pools and buffers keep their
// own copy, review 1.19). Both functions must be thread-safe.
struct HostAllocator {
  uint8_t* (*allocate)(size_t size, int device) = nullptr;
  void (*release)(uint8_t* data, int device) = nullptr;
  int device = -1;  // passed to both: the GPU that pinned memory is for
  // Scarce memory (pinned): a pool never holds more than its max_free blocks
  // of it, and gives out plain memory past that (review 1.10), so that no
  // allocation or release of it happens on the hot path once the pool is warm.
  bool scarce = false;
};
// new[] / delete[].
HostAllocator PlainAllocator();

class HostBufferPool;

class HostBuffer {
 public:
  HostBuffer() = default;
  // An unpooled buffer from the plain allocator.
  explicit HostBuffer(size_t size);
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  ~HostBuffer();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  absl::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  friend class HostBufferPool;
  void Release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  HostAllocator allocator_;
  std::weak_ptr<HostBufferPool> pool_;
};

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
 public:
  // Keeps at most `max_free` freed buffers for reuse. With a scarce
  // allocator, at most `max_free` of its blocks exist at once; more buffers
  // lent out at the same time are plain memory (logged once).
  static std::shared_ptr<HostBufferPool> Create(int max_free, HostAllocator allocator = PlainAllocator()) {
    return std::shared_ptr<HostBufferPool>(new HostBufferPool(max_free, allocator));
  }
  ~HostBufferPool();

  // A buffer of `size` bytes, reusing a freed one whose capacity fits.
  HostBuffer Get(size_t size);
  // Allocates free buffers of `size` bytes now, on the calling thread, until
  // the pool has `count` blocks of its allocator (free or lent; a scarce pool
  // stops at max_free): e.g. a ring of pinned slots sized from the batch bytes
  // and the prefetch depth. A no-op once the pool has them.
  void Reserve(int count, size_t size);
  int FreeCount() const;
  // Changes max_free (at least 1), e.g. as a client's prefetch depth changes
  // (the pool then holds what the prefetch holds, no more). Lowering it
  // releases free blocks past the new count now, and (scarce pools) lent ones
  // as they come back. Raising it lets Get and Reserve make more blocks; to
  // raise a scarce pool without leaving blocks to Get (a reader thread), use
  // Grow.
  void SetMaxFree(int max_free);
  // Raises max_free to `count` (never lowers it), first allocating on the
  // calling thread the `size`-byte blocks a scarce pool needs to hold
  // `count`, so that no Get ever makes one.
  void Grow(int count, size_t size);
  int max_free() const;
  // Whether the allocator's memory is scarce (pinned).
  bool scarce() const { return allocator_.scarce; }
  // Blocks of the pool's allocator that exist now (free or lent out).
  int AllocatorBlocks() const;

 private:
  friend class HostBuffer;
  HostBufferPool(int max_free, HostAllocator allocator) : allocator_(allocator), max_free_(max_free) {}
  void Put(uint8_t* data, size_t capacity);
  // Counts one more block of allocator_, unless it is scarce and max_free
  // blocks exist already (then false: the caller uses plain memory).
  bool TakeBlockLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Block {
    uint8_t* data;
    size_t capacity;
  };
  const HostAllocator allocator_;
  mutable absl::Mutex mu_;
  int max_free_ ABSL_GUARDED_BY(mu_);
  std::vector<Block> free_ ABSL_GUARDED_BY(mu_);
  int blocks_ ABSL_GUARDED_BY(mu_) = 0;  // of allocator_, free or lent
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_HOST_BUFFER_H_
