// Host memory for batch image bytes. HostBufferPool recycles freed buffers so
// that steady-state streaming allocates (and page-faults) nothing: a fresh
// tens-of-MB allocation per batch costs more than the copy into it. The pool
// is thread-safe; a HostBuffer is a move-only value that returns its memory to
// the pool (if the pool still exists) when destroyed. Contents are left
// uninitialised: the receive path overwrites every byte.
#ifndef STOKER_CLIENT_HOST_BUFFER_H_
#define STOKER_CLIENT_HOST_BUFFER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class HostBufferPool;

class HostBuffer {
 public:
  HostBuffer() = default;
  // An unpooled buffer.
  explicit HostBuffer(size_t size) : HostBuffer(std::unique_ptr<uint8_t[]>(new uint8_t[size]), size, size, {}) {}
  HostBuffer(HostBuffer&&) = default;
  HostBuffer& operator=(HostBuffer&& other);
  ~HostBuffer();

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  absl::string_view view() const { return {reinterpret_cast<const char*>(data_.get()), size_}; }

 private:
  friend class HostBufferPool;
  HostBuffer(std::unique_ptr<uint8_t[]> data, size_t size, size_t capacity, std::weak_ptr<HostBufferPool> pool)
      : data_(std::move(data)), size_(size), capacity_(capacity), pool_(std::move(pool)) {}
  void Release();

  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  std::weak_ptr<HostBufferPool> pool_;
};

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
 public:
  // Keeps at most `max_free` freed buffers for reuse.
  static std::shared_ptr<HostBufferPool> Create(int max_free) {
    return std::shared_ptr<HostBufferPool>(new HostBufferPool(max_free));
  }

  // A buffer of `size` bytes, reusing a freed one whose capacity fits.
  HostBuffer Get(size_t size);
  int FreeCount() const;

 private:
  friend class HostBuffer;
  explicit HostBufferPool(int max_free) : max_free_(max_free) {}
  void Put(std::unique_ptr<uint8_t[]> data, size_t capacity);

  struct Block {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity;
  };
  const int max_free_;
  mutable absl::Mutex mu_;
  std::vector<Block> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_HOST_BUFFER_H_
