#include "client/host_buffer.h"

namespace stoker {

HostBuffer& HostBuffer::operator=(HostBuffer&& other) {
  if (this != &other) {
    Release();
    data_ = std::move(other.data_);
    size_ = other.size_;
    capacity_ = other.capacity_;
    pool_ = std::move(other.pool_);
  }
  return *this;
}

HostBuffer::~HostBuffer() { Release(); }

void HostBuffer::Release() {
  if (!data_) return;
  if (auto pool = pool_.lock()) pool->Put(std::move(data_), capacity_);
  data_.reset();
}

HostBuffer HostBufferPool::Get(size_t size) {
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].capacity >= size) {
        Block block = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return HostBuffer(std::move(block.data), size, block.capacity, weak_from_this());
      }
    }
  }
  return HostBuffer(std::unique_ptr<uint8_t[]>(new uint8_t[size]), size, size, weak_from_this());
}

int HostBufferPool::FreeCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(free_.size());
}

void HostBufferPool::Put(std::unique_ptr<uint8_t[]> data, size_t capacity) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(free_.size()) < max_free_) free_.push_back({std::move(data), capacity});
}

}  // namespace stoker
