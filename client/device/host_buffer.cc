#include "client/device/host_buffer.h"

#include <algorithm>

#include "glog/logging.h"

namespace stoker {

HostAllocator PlainAllocator() {
  HostAllocator plain;
  plain.allocate = [](size_t size, int) { return new uint8_t[size]; };
  plain.release = [](uint8_t* data, int) { delete[] data; };
  return plain;
}

HostBuffer::HostBuffer(size_t size)
    : data_(PlainAllocator().allocate(size, -1)), size_(size), capacity_(size), allocator_(PlainAllocator()) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = other.data_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    allocator_ = other.allocator_;
    pool_ = std::move(other.pool_);
    other.data_ = nullptr;
    other.size_ = other.capacity_ = 0;
  }
  return *this;
}

HostBuffer::~HostBuffer() { Release(); }

void HostBuffer::Release() {
  if (!data_) return;
  if (auto pool = pool_.lock()) {
    pool->Put(data_, capacity_);
  } else {
    allocator_.release(data_, allocator_.device);
  }
  data_ = nullptr;
}

HostBufferPool::~HostBufferPool() {
  absl::MutexLock lock(&mu_);
  for (Block& b : free_) allocator_.release(b.data, allocator_.device);
}

HostBuffer HostBufferPool::Get(size_t size) {
  HostBuffer buffer;
  buffer.size_ = size;
  buffer.allocator_ = allocator_;
  buffer.pool_ = weak_from_this();
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].capacity >= size) {
        buffer.data_ = free_[i].data;
        buffer.capacity_ = free_[i].capacity;
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return buffer;
      }
    }
    if (!TakeBlockLocked()) {
      // Surplus: plain memory, not pooled, so the scarce kind is never
      // allocated or released on the hot path.
      if (!warned_) {
        LOG(WARNING) << "all " << max_free_ << " pinned host buffers are in use; further batches use pageable "
                     << "memory (slower copies): raise host_slots";
        warned_ = true;
      }
      buffer.allocator_ = PlainAllocator();
      buffer.pool_.reset();
      buffer.data_ = buffer.allocator_.allocate(size, -1);
      buffer.capacity_ = size;
      return buffer;
    }
  }
  buffer.data_ = allocator_.allocate(size, allocator_.device);
  buffer.capacity_ = size;
  return buffer;
}

void HostBufferPool::Reserve(int count, size_t size) {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (blocks_ >= count || !TakeBlockLocked()) return;
    }
    Put(allocator_.allocate(size, allocator_.device), size);
  }
}

bool HostBufferPool::TakeBlockLocked() {
  if (allocator_.scarce && blocks_ >= max_free_) return false;
  ++blocks_;
  return true;
}

int HostBufferPool::FreeCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(free_.size());
}

int HostBufferPool::AllocatorBlocks() const {
  absl::MutexLock lock(&mu_);
  return blocks_;
}

void HostBufferPool::SetMaxFree(int max_free) {
  std::vector<Block> release;
  {
    absl::MutexLock lock(&mu_);
    max_free_ = std::max(1, max_free);
    while (static_cast<int>(free_.size()) > max_free_ || (allocator_.scarce && !free_.empty() && blocks_ > max_free_)) {
      release.push_back(free_.back());
      free_.pop_back();
      --blocks_;
    }
    if (!release.empty() || blocks_ < max_free_) warned_ = false;  // room again: say so if it runs out again
  }
  for (const Block& b : release) allocator_.release(b.data, allocator_.device);
}

void HostBufferPool::Grow(int count, size_t size) {
  int missing = 0;
  {
    absl::MutexLock lock(&mu_);
    if (count <= max_free_) return;
    if (!allocator_.scarce) {
      max_free_ = count;
      return;
    }
    missing = count - blocks_;
  }
  std::vector<Block> made;
  for (int i = 0; i < missing; ++i) made.push_back({allocator_.allocate(size, allocator_.device), size});
  absl::MutexLock lock(&mu_);
  for (const Block& b : made) free_.push_back(b);
  blocks_ += static_cast<int>(made.size());
  max_free_ = std::max(max_free_, count);
}

int HostBufferPool::max_free() const {
  absl::MutexLock lock(&mu_);
  return max_free_;
}

void HostBufferPool::Put(uint8_t* data, size_t capacity) {
  {
    absl::MutexLock lock(&mu_);
    // A scarce pool over its count (lowered) gives the surplus back.
    if (static_cast<int>(free_.size()) < max_free_ && (!allocator_.scarce || blocks_ <= max_free_)) {
      free_.push_back({data, capacity});
      return;
    }
    --blocks_;
  }
  allocator_.release(data, allocator_.device);
}

}  // namespace stoker
