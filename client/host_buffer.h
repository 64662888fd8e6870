// Host memory for batch image bytes. HostBufferPool recycles freed buffers so
// that steady-state streaming allocates (and page-faults) nothing: a fresh
// tens-of-MB allocation per batch costs more than the copy into it. With CUDA
// the pool allocates pinned memory (cudaHostAlloc), so the one copy of the
// payload, from gRPC's receive buffers, lands where the DMA to the GPU reads.
// The pool is thread-safe; a HostBuffer is a move-only value that returns its
// memory to the pool (if the pool still exists) when destroyed. Contents are
// left uninitialised: the receive path overwrites every byte.
#ifndef STOKER_CLIENT_HOST_BUFFER_H_
#define STOKER_CLIENT_HOST_BUFFER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

// How a pool gets and returns memory. Both must be thread-safe.
struct HostAllocator {
  uint8_t* (*allocate)(size_t size);
  void (*release)(uint8_t* data);
};
// new[] / delete[].
const HostAllocator& PlainAllocator();

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
  const HostAllocator* allocator_ = nullptr;
  std::weak_ptr<HostBufferPool> pool_;
};

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
 public:
  // Keeps at most `max_free` freed buffers for reuse.
  static std::shared_ptr<HostBufferPool> Create(int max_free, const HostAllocator& allocator = PlainAllocator()) {
    return std::shared_ptr<HostBufferPool>(new HostBufferPool(max_free, allocator));
  }
  ~HostBufferPool();

  // A buffer of `size` bytes, reusing a freed one whose capacity fits.
  HostBuffer Get(size_t size);
  // Allocates `count` free buffers of `size` bytes now, e.g. a ring of
  // pinned slots sized from the batch bytes and the prefetch depth.
  void Reserve(int count, size_t size);
  int FreeCount() const;

 private:
  friend class HostBuffer;
  HostBufferPool(int max_free, const HostAllocator& allocator) : max_free_(max_free), allocator_(allocator) {}
  void Put(uint8_t* data, size_t capacity);

  struct Block {
    uint8_t* data;
    size_t capacity;
  };
  const int max_free_;
  const HostAllocator& allocator_;
  mutable absl::Mutex mu_;
  std::vector<Block> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_HOST_BUFFER_H_
